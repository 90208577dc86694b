"""aoti_guard.builder.validate."""

"""aoti_guard.builder."""

"""aoti_guard.container."""

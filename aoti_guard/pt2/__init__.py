"""aoti_guard.pt2."""

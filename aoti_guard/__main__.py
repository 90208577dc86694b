from __future__ import annotations

from aoti_guard.cli import run

run()

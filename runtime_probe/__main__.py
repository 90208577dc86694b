"""``python -m runtime_probe``: the probe's command line with the standard library only (runtime_probe/cli.py)."""

from __future__ import annotations

import sys

from runtime_probe.cli import main

sys.exit(main())

from __future__ import annotations

import sys

from runtime_probe.cli import main

sys.exit(main())

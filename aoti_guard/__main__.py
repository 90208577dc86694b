from __future__ import annotations

import sys

from aoti_guard.cli import main

sys.exit(main())

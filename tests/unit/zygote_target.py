"""What tests/unit/test_zygote.py runs through a zygote: a module that reports the world it was
started in and then exits as told (``python -m tests.unit.zygote_target [exit N | kill SIG | sleep S]``)."""

from __future__ import annotations

import json
import os
import signal
import sys
import time

# counts the imports: a forked child must import the served module afresh every time
with open(os.environ["ZYGOTE_TARGET_IMPORTS"], "a") as log:
    log.write(f"{os.getpid()}\n")

if __name__ == "__main__":
    print(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "marker": os.environ.get("AOTI_GUARD_MARKER")}))
    print("to stderr\r\nsecond line", file=sys.stderr)
    what, value = [*sys.argv[1:3], "exit", "0"][:2]
    if what == "kill":
        os.kill(os.getpid(), getattr(signal, value))
    elif what == "sleep":
        sys.stdout.flush()
        time.sleep(float(value))
    sys.exit(int(value) if what == "exit" else 0)

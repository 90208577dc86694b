"""The bare baseline of probe_fast.py: what a serving process does without runtime_probe.

``python bench/_bare_load.py PKG``: import torch, ``torch._inductor.aoti_load_package(PKG)``, one
call on inputs of the example's shapes (x float32 [4, 16], mask bool [4, 32]). Prints one JSON
line with each step's time, for the breakdown table; the benchmark times the whole process.
"""

from __future__ import annotations

import json
import sys
import time


def main(argv: list[str]) -> int:
    started = time.monotonic()
    import torch

    imported = time.monotonic()
    model = torch._inductor.aoti_load_package(argv[0])
    loaded = time.monotonic()
    torch.manual_seed(0)
    x, mask = torch.randn(4, 16), torch.rand(4, 32) > 0.3
    model(x, mask)
    ran = time.monotonic()
    steps = {"import torch": imported - started, "aoti_load_package": loaded - imported, "run": ran - loaded}
    print(json.dumps({"steps": {k: round(v, 3) for k, v in steps.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

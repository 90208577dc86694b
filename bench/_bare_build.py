"""The bare baseline of build_overhead.py: what a release script does without aoti-guard.

``python bench/_bare_build.py OUT.pt2``: torch.export.export + aoti_compile_and_package of the
bundled example (the same program ``aoti-guard build`` builds with no target). Prints one JSON
line with the time of each step, for the breakdown table; the benchmark times the whole process.
"""

from __future__ import annotations

import json
import sys
import time


def main(argv: list[str]) -> int:
    started = time.monotonic()
    import torch

    from aoti_guard.builder.resolve.example import example_spec

    spec = example_spec()
    imported = time.monotonic()
    ep = torch.export.export(spec.model, tuple(spec.args), dict(spec.kwargs), dynamic_shapes=spec.dynamic_shapes)
    exported = time.monotonic()
    torch._inductor.aoti_compile_and_package(ep, package_path=argv[0])
    compiled = time.monotonic()
    steps = {"import": imported - started, "export": exported - imported, "compile": compiled - exported}
    print(json.dumps({"steps": {k: round(v, 3) for k, v in steps.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

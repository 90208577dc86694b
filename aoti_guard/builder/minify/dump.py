"""The child that makes torch write the AOTI minifier launcher:
``python -m aoti_guard.builder.minify.dump PROGRAM.pt2 CONFIGS.json PACKAGE.pt2``.

It compiles the saved ExportedProgram with ``aoti_compile_and_package``, exactly as a user would,
with the minifier dump switched on (``aot_inductor.dump_aoti_minifier``; ``repro_level`` 4 also
loads, runs and checks the compiled model's accuracy against eager on the example inputs). On a
compile error or an accuracy failure torch writes ``minifier_launcher.py`` under
``$TORCH_COMPILE_DEBUG_DIR/torch_compile_debug/run_*/minifier/`` (the parent sets the variable: torch
reads it at import). Exit code 1 and the line ``aoti-guard: failure reproduced`` when it failed,
0 when it did not.
"""

from __future__ import annotations

import json
import sys
import traceback

REPRODUCED = "aoti-guard: failure reproduced"
NOT_REPRODUCED = "aoti-guard: no failure"


def main(argv: list[str]) -> int:
    from aoti_guard.builder.resolve.saved_program import load_program
    from runtime_probe.runtime.torch_compat import aoti_compile_and_package, inductor_config

    config = inductor_config()
    config.aot_inductor.dump_aoti_minifier = True
    config.aot_inductor.repro_level = 4
    ep = load_program(argv[1])
    with open(argv[2], encoding="utf-8") as fh:
        configs = json.load(fh)
    try:
        aoti_compile_and_package()(ep, package_path=argv[3], inductor_configs=configs)
    except Exception:  # noqa: BLE001 - the failure is what we came for
        traceback.print_exc()
        print(REPRODUCED, flush=True)
        return 1
    print(NOT_REPRODUCED, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

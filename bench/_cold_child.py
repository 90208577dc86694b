"""One fresh process of bench/cold_start.py: ``python bench/_cold_child.py MODE PKG DEVICE``.

Modes: ``import`` (import torch only), ``torch`` (torch._inductor.aoti_load_package), ``direct``
(torch._C._aoti.AOTIModelPackageLoader + torch's AOTICompiledModel, whose module imports Inductor:
what the probe's child and runtime_probe.load did before 2026-11-26; they now wrap the same loader
in runtime_probe.runtime.compiled_model.CompiledModel and import no Inductor),
``guard`` (runtime_probe.load, hashes verified) and ``guard-noverify`` (verify=False). Each
loader is timed, then one call (synchronised on CUDA) on inputs made from the package's manifest
(made after the load, not timed). Prints one JSON line: {"steps": {name: seconds}}.
"""

from __future__ import annotations

import json
import sys
import time


def main(argv: list[str]) -> int:
    mode, package, device = argv
    t0 = time.perf_counter()
    import torch

    steps = {"import torch": time.perf_counter() - t0}
    if mode == "import":
        print(json.dumps({"steps": {k: round(v, 4) for k, v in steps.items()}}))
        return 0
    index = int(device.split(":")[1]) if ":" in device else (0 if device == "cuda" else -1)
    t1 = time.perf_counter()
    if mode == "torch":
        model = torch._inductor.aoti_load_package(package, device_index=index)
    elif mode == "direct":
        from torch.export.pt2_archive._package import AOTICompiledModel

        model = AOTICompiledModel(torch._C._aoti.AOTIModelPackageLoader(package, "model", False, 1, index))
    else:
        import runtime_probe

        model = runtime_probe.load(package, device, verify=mode == "guard")
    steps["load"] = time.perf_counter() - t1
    from bench._inputs import call_spec, make_call, read_manifest

    args, kwargs = make_call(call_spec(read_manifest(package), batch=4), device)
    t2 = time.perf_counter()
    model(*args, **kwargs)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    steps["first call"] = time.perf_counter() - t2
    print(json.dumps({"steps": {k: round(v, 4) for k, v in steps.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""What a bare package of timm vit_tiny (dynamic_img_size) does at each image size: the guards
export recorded, whether ep.module() refuses the size, and |bare package - eager| there.

The evidence behind docs/zoo.md's timm_vit_tiny entry (issue: the true cause of a wrong package).
Plain torch + timm: no aoti-guard in the measured path.

    python scripts/gpu/vit_guard_sizes.py --device cuda --size full --out DIR
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from zoo.models import entry


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--size", default="small", choices=["small", "full"])
    ap.add_argument("--out", default=".")
    ap.add_argument("--sides", default="32,48,64,224,512")
    a = ap.parse_args()
    spec = entry("timm_vit_tiny").factory(a.size, a.device)  # makes torchvision (timm imports it) importable first
    import timm

    args, kwargs = tuple(spec.args), dict(spec.kwargs)
    result: dict[str, object] = {
        "torch": torch.__version__,
        "timm": timm.__version__,
        "device": torch.cuda.get_device_name() if a.device.startswith("cuda") else "cpu",
        "example": list(args[0].shape),
    }
    t0 = time.time()
    ep = torch.export.export(spec.model, args, kwargs, dynamic_shapes=spec.dynamic_shapes)
    result["guards"] = list(getattr(ep, "_guards_code", []) or [])
    result["range_constraints"] = {str(k): str(v) for k, v in ep.range_constraints.items()}
    path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.join(a.out, "vit_bare.pt2"))
    result["compile_s"] = round(time.time() - t0, 1)
    bare = torch._inductor.aoti_load_package(path)
    rows = []
    gen = torch.Generator().manual_seed(0)
    for side in [int(s) for s in a.sides.split(",")]:
        x = torch.randn(2, 3, side, side, generator=gen).to(a.device)
        with torch.no_grad():
            eager = spec.model(x)
            eager64 = __import__("copy").deepcopy(spec.model).double()(x.double())
            row: dict[str, object] = {"side": side, "eager_vs_fp64": float((eager.double() - eager64).abs().max())}
            try:
                ep.module()(x)
                row["export_module"] = "accepts"
            except Exception as exc:  # noqa: BLE001 - the guard's refusal is the measurement
                row["export_module"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
            try:
                out = bare(x)
                row["bare_vs_eager"] = float((out.double() - eager.double()).abs().max())
                row["output_abs_max"] = float(eager.abs().max())
            except Exception as exc:  # noqa: BLE001
                row["bare_vs_eager"] = f"raised {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
        rows.append(row)
        print(json.dumps(row), flush=True)
    result["sizes"] = rows
    with open(os.path.join(a.out, "vit_guard_sizes.json"), "w") as fh:
        json.dump(result, fh, indent=1)
    print(json.dumps({k: v for k, v in result.items() if k != "sizes"}, indent=1))


if __name__ == "__main__":
    main()

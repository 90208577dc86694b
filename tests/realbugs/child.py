"""One side of one case, in a child process (it may segfault or abort): prints one JSON line.

    python -m tests.realbugs.child bare|guard REQUEST.json

``bare``: torch alone. The package is loaded with ``torch._inductor.aoti_load_package`` and called
directly; with no package (the build stopped before compiling), the factory's model is exported
and compiled here with ``aoti_compile_and_package``. ``guard``: ``runtime_probe.load``. Both give
the weights first (torch's ``load_constants`` / the guard's), then make the calls and compare each
output with the eager model's on the same inputs (when the case has one).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def _function(ref: str) -> Any:
    path, name = ref.rsplit(":", 1)
    module = ".".join(Path(path).with_suffix("").parts)
    return getattr(importlib.import_module(module), name)


def _spec(target: str) -> tuple[Any, tuple[Any, ...], dict[str, Any], Any]:
    made = _function(target)()
    if hasattr(made, "model"):
        return made.model, tuple(made.args), dict(made.kwargs), made.dynamic_shapes
    model, args, *rest = made
    kwargs = rest[0] if rest else {}
    return model, tuple(args), dict(kwargs), rest[1] if len(rest) > 1 else None


def _flat(out: Any) -> list[Any]:
    import torch
    from torch.utils import _pytree as pytree

    return [leaf if isinstance(leaf, torch.Tensor) else torch.tensor(leaf) for leaf in pytree.tree_leaves(out)]


def compare(got: Any, want: Any) -> dict[str, Any]:
    """``ok`` or ``wrong`` with what differs first (count, shape, device, values)."""
    import torch

    got_leaves, want_leaves = _flat(got), _flat(want)
    if len(got_leaves) != len(want_leaves):
        return {"result": "wrong", "detail": f"{len(got_leaves)} outputs, eager gives {len(want_leaves)}"}
    worst = 0.0
    for i, (g, w) in enumerate(zip(got_leaves, want_leaves, strict=True)):
        if tuple(g.shape) != tuple(w.shape):
            return {"result": "wrong", "detail": f"output {i} has shape {list(g.shape)}, eager gives {list(w.shape)}"}
        if g.device != w.device:
            return {"result": "wrong", "detail": f"output {i} is on {g.device}, eager gives {w.device}"}
        g64, w64 = g.detach().cpu().double(), w.detach().cpu().double()
        same_nonfinite = torch.equal(torch.isnan(g64), torch.isnan(w64)) and torch.equal(torch.isinf(g64), torch.isinf(w64))
        finite = torch.isfinite(g64) & torch.isfinite(w64)
        err = float((g64[finite] - w64[finite]).abs().max()) if finite.any() else 0.0
        scale = float(w64[finite].abs().max()) if finite.any() else 0.0
        worst = max(worst, err)
        if not same_nonfinite or err > 1e-3 + 1e-2 * scale:
            detail = f"output {i}: max error {err:.3g}" if same_nonfinite else f"output {i}: inf/NaN where eager has none (or the reverse)"
            return {"result": "wrong", "detail": detail}
    return {"result": "ok", "detail": f"max error {worst:.2g}"}


def _eager_outputs(req: dict[str, Any], weights: dict[str, Any] | None) -> list[Any] | str:
    """The eager model's outputs for each call, or why there are none."""
    import copy

    model, _args, _kwargs, _ = _spec(req["target"])
    model = copy.deepcopy(model)
    if weights is not None:
        try:
            model.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in weights.items()}, strict=False)
        except RuntimeError as exc:
            return f"eager refuses these weights: {str(exc).splitlines()[1].strip() if len(str(exc).splitlines()) > 1 else exc}"
    device = req.get("device")
    if device:  # a GPU case: eager on the device the package is loaded on, as its user compares
        model = model.to(device)
    outs = []
    for _ in range(req["calls"]):
        args, kwargs = _on_device(_function(req["inputs"])(), device)
        outs.append(model(*args, **kwargs))
    return outs


class ExportFailed(Exception):
    pass


def _bare_model(req: dict[str, Any], work: Path) -> Any:
    import torch

    if req.get("package"):
        device = req.get("device") or ""
        if ":" in device:  # a GPU case: the device index the report's user asked for
            return torch._inductor.aoti_load_package(req["package"], device_index=int(device.split(":")[1]))
        return torch._inductor.aoti_load_package(req["package"])
    model, args, kwargs, dynamic = _spec(req["target"])
    try:
        ep = torch.export.export(model, args, kwargs, dynamic_shapes=dynamic)
    except Exception as exc:
        raise ExportFailed(_first_line(exc)) from exc
    path = torch._inductor.aoti_compile_and_package(ep, package_path=str(work / "bare.pt2"))
    return torch._inductor.aoti_load_package(path)


def _on_device(inputs: Any, device: str | None) -> Any:
    if not device:
        return inputs
    import torch
    from torch.utils import _pytree as pytree

    return pytree.tree_map(lambda t: t.to(device) if isinstance(t, torch.Tensor) else t, inputs)


def _first_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0][:300] if lines else type(exc).__name__


def run_bare(req: dict[str, Any], work: Path) -> dict[str, Any]:
    start = time.monotonic()
    try:
        compiled = _bare_model(req, work)
    except ExportFailed as exc:
        return {"result": "export failed", "detail": str(exc)}
    except Exception as exc:  # noqa: BLE001 - the outcome is the measurement
        return {"result": "error", "detail": _first_line(exc)}
    load_s = time.monotonic() - start
    weights = _function(req["weights"])() if req.get("weights") else None
    if weights is not None:
        try:
            compiled.load_constants(weights, check_full_update=True)
        except Exception as exc:  # noqa: BLE001
            return {"result": "error", "detail": "load_constants: " + _first_line(exc)}
    return _calls(req, compiled, weights, load_s)


def run_guard(req: dict[str, Any]) -> dict[str, Any]:
    import runtime_probe
    from runtime_probe.reporting.errors import GuardError

    start = time.monotonic()
    try:
        model = runtime_probe.load(req["package"], device=req.get("device"))
        load_s = time.monotonic() - start
        weights = _function(req["weights"])() if req.get("weights") else None
        if weights is not None:
            model.load_constants(weights)
    except GuardError as exc:
        return {"result": "refused", "code": getattr(exc, "code", None) or _codes(exc), "detail": _first_line(exc)}
    return _calls(req, model, weights, load_s)


def _codes(exc: BaseException) -> str | None:
    findings = getattr(exc, "findings", None) or []
    return getattr(findings[0], "code", None) if findings else None


def _calls(req: dict[str, Any], model: Any, weights: Any, load_s: float) -> dict[str, Any]:
    from runtime_probe.reporting.errors import GuardError

    outs = []
    try:
        for _ in range(req["calls"]):
            args, kwargs = _on_device(_function(req["inputs"])(), req.get("device"))
            outs.append(model(*args, **kwargs))
    except GuardError as exc:
        return {"result": "refused", "code": getattr(exc, "code", None) or _codes(exc), "detail": _first_line(exc), "load_s": load_s}
    except Exception as exc:  # noqa: BLE001
        return {"result": "error", "detail": _first_line(exc), "load_s": load_s}
    if not req["eager"]:
        return {"result": "ran", "detail": "no eager model in this process to compare with", "load_s": load_s}
    want = _eager_outputs(req, weights)
    if isinstance(want, str):
        return {"result": "ran", "detail": want, "load_s": load_s}
    for i, (got, ref) in enumerate(zip(outs, want, strict=True)):
        verdict = compare(got, ref)
        if verdict["result"] != "ok":
            verdict["detail"] = (f"call {i + 1}: " if req["calls"] > 1 else "") + verdict["detail"]
            return {**verdict, "load_s": load_s}
    return {**compare(outs[-1], want[-1]), "load_s": load_s}


def main(argv: list[str]) -> int:
    side, request = argv[1], Path(argv[2])
    req = json.loads(request.read_text())
    sys.path.insert(0, str(REPO))
    result = run_bare(req, request.parent) if side == "bare" else run_guard(req)
    sys.stdout.write("\nREALBUGS-RESULT " + json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

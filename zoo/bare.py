"""The bare path: ``torch.export`` + ``aoti_compile_and_package`` + ``aoti_load_package``, no aoti-guard.

``bare_build(spec, out_path)`` exports a BuildSpec, compiles it into a package, loads the package,
runs it on the example inputs and compares it with eager on the pytree-flattened outputs. It never
raises: every phase's outcome and time lands in the returned dict, with the first failure's phase
and message. A later parity runner calls it beside ``aoti-guard build``.

``python -m zoo.bare [NAME...]`` runs it over the zoo, one model at a time, each in a child process
(a crash or a leak stays there) with a cold Inductor cache of its own, and prints one line per model;
``--json`` keeps every result, ``--markdown`` prints the table of zoo/README.md.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import traceback
from typing import Any

__all__ = ["bare_build", "main", "pytree_types", "run_zoo"]

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOADER_ENV = "AOTI_GUARD_ZOO_BARE_LOADER"  # how the bare child loads its package (bare_build's loader)


def _qualname(t: type) -> str:
    return f"{t.__module__}.{t.__qualname__}"


def pytree_types(tree: Any) -> list[dict[str, Any]]:
    """The container types of a pytree, outermost first, each once: name, serialized name, count.

    Plain ``tuple``/``list``/``dict`` are included, so a model whose output is one tensor gives ``[]``
    and a ModelOutput holding a DynamicCache gives both.
    """
    import torch.utils._pytree as pytree

    _, spec = pytree.tree_flatten(tree)
    seen: dict[type, dict[str, Any]] = {}
    stack = [spec]
    while stack:
        node = stack.pop(0)
        if node.is_leaf():
            continue
        t = node.type
        if t not in seen:
            reg = getattr(pytree, "SUPPORTED_SERIALIZED_TYPES", {}).get(t)
            seen[t] = {"type": _qualname(t), "serialized_type_name": getattr(reg, "serialized_type_name", None), "count": 0}
        seen[t]["count"] += 1
        stack.extend(node.children_specs)
    return list(seen.values())


def _leaf_paths(tree: Any, limit: int = 12) -> list[str]:
    import torch.utils._pytree as pytree

    flat, _ = pytree.tree_flatten_with_path(tree)
    return [pytree.keystr(path) for path, _ in flat[:limit]] + ([f"... {len(flat) - limit} more"] if len(flat) > limit else [])


def _compare(ref: Any, got: Any) -> dict[str, Any]:
    """Leaf-wise comparison of two pytrees: max abs error, max |ref|, and whether the structures match."""
    import torch
    import torch.utils._pytree as pytree

    ref_leaves, ref_spec = pytree.tree_flatten(ref)
    got_leaves, got_spec = pytree.tree_flatten(got)
    out: dict[str, Any] = {"same_structure": str(ref_spec) == str(got_spec), "leaves": len(ref_leaves), "got_leaves": len(got_leaves)}
    max_abs, ref_max, nonfinite = 0.0, 0.0, False
    for r, g in zip(ref_leaves, got_leaves):
        if isinstance(r, torch.Tensor) and isinstance(g, torch.Tensor):
            if r.shape != g.shape:
                out["shape_mismatch"] = f"{tuple(r.shape)} vs {tuple(g.shape)}"
                max_abs = float("inf")
                continue
            if r.numel() == 0:
                continue
            r64, g64 = r.detach().double().cpu(), g.detach().double().cpu()
            nonfinite = nonfinite or not bool(torch.isfinite(g64).all())
            max_abs = max(max_abs, float((r64 - g64).abs().max()))
            ref_max = max(ref_max, float(r64.abs().max()))
        elif r != g:
            out["value_mismatch"] = f"{r!r} vs {g!r}"
    out.update(max_abs_err=max_abs, ref_max_abs=ref_max, nonfinite=nonfinite)
    return out


def _same_inputs(before: Any, after: Any) -> bool:
    import torch
    import torch.utils._pytree as pytree

    a, a_spec = pytree.tree_flatten(before)
    b, b_spec = pytree.tree_flatten(after)
    if str(a_spec) != str(b_spec) or len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if x.shape != y.shape or not torch.equal(x, y):
                return False
    return True


def bare_build(spec: Any, out_path: str, *, strict: bool = False, loader: str | None = None) -> dict[str, Any]:
    """Export ``spec`` (an ``aoti_guard.BuildSpec``), package it at ``out_path``, load, run, compare.

    ``loader``: ``"torch"`` (``aoti_load_package``, the default) or ``"direct"`` (torch's C++
    ``AOTIModelPackageLoader`` wrapped in ``AOTICompiledModel``, which is what ``aoti_load_package``
    returns, without its start-up work: on the lent GPU image that took 87-105 s per load against
    8 s, docs/gpu-validation.md). Default: ``$AOTI_GUARD_ZOO_BARE_LOADER`` or ``"torch"``. The
    load is not part of the bare time either way.

    Every call of the model gets a deep copy of the example inputs: a Hugging Face ``DynamicCache``
    is extended in place by an eager forward.

    Returns a dict: ``ok`` (every phase passed), ``phase`` (the first that failed) and ``error``;
    ``export_s``, ``compile_s``, ``load_s``, ``run_s``, ``eager_s`` (seconds); ``symbols`` (the
    exported program's range constraints); ``input_types`` / ``output_types`` (pytree containers),
    ``output_paths`` (leaf key paths), ``eager_mutates_inputs``; ``compare`` (``max_abs_err``,
    ``ref_max_abs``, ``same_structure``, ``leaves``); ``package_bytes``.
    """
    import torch

    result: dict[str, Any] = {"name": spec.label, "ok": False, "phase": None, "error": None}

    def inputs() -> tuple[tuple[Any, ...], dict[str, Any]]:
        return copy.deepcopy((tuple(spec.args), dict(spec.kwargs)))

    phase = "eager"
    try:
        result["input_types"] = pytree_types((tuple(spec.args), dict(spec.kwargs)))
        args, kwargs = inputs()
        t0 = time.perf_counter()
        with torch.no_grad():
            ref = spec.model(*args, **kwargs)
        result["eager_s"] = round(time.perf_counter() - t0, 3)
        result["eager_mutates_inputs"] = not _same_inputs((tuple(spec.args), dict(spec.kwargs)), (args, kwargs))
        result["output_types"] = pytree_types(ref)
        result["output_paths"] = _leaf_paths(ref)

        phase = "export"
        args, kwargs = inputs()
        t0 = time.perf_counter()
        ep = torch.export.export(spec.model, args, kwargs, dynamic_shapes=spec.dynamic_shapes, strict=strict)
        result["export_s"] = round(time.perf_counter() - t0, 3)
        result["symbols"] = {str(k): [int(v.lower), int(v.upper)] for k, v in ep.range_constraints.items()}

        phase = "compile"
        t0 = time.perf_counter()
        path = torch._inductor.aoti_compile_and_package(ep, package_path=out_path)
        result["compile_s"] = round(time.perf_counter() - t0, 3)
        result["package_bytes"] = os.path.getsize(path)

        phase = "load"
        t0 = time.perf_counter()
        compiled = _load(path, loader or os.environ.get(LOADER_ENV) or "torch")
        result["loader"] = loader or os.environ.get(LOADER_ENV) or "torch"
        result["load_s"] = round(time.perf_counter() - t0, 3)

        phase = "run"
        args, kwargs = inputs()
        t0 = time.perf_counter()
        got = compiled(*args, **kwargs)
        result["run_s"] = round(time.perf_counter() - t0, 3)
        result["run_output_types"] = pytree_types(got)

        phase = "compare"
        result["compare"] = _compare(ref, got)
        if not result["compare"]["same_structure"]:
            raise AssertionError("the package's output pytree differs from eager's")
    except Exception as exc:  # noqa: BLE001  (every failure is a result, never a crash of the runner)
        result["phase"] = phase
        lines = [line for line in f"{type(exc).__name__}: {exc}".splitlines() if line.strip()]
        result["error"] = "\n".join(lines[:20])
        result["traceback"] = traceback.format_exc(limit=-8)
        return result
    result["ok"] = True
    return result


def _load(path: str, loader: str) -> Any:
    import torch

    if loader == "torch":
        return torch._inductor.aoti_load_package(path)
    if loader != "direct":
        raise ValueError(f"unknown bare loader {loader!r} (torch or direct)")
    from torch.export.pt2_archive._package import AOTICompiledModel

    return AOTICompiledModel(torch._C._aoti.AOTIModelPackageLoader(path, "model", False, 1, -1))


# --------------------------------------------------------------------------------------------------
# the zoo runner
# --------------------------------------------------------------------------------------------------


def _versions() -> dict[str, Any]:
    from importlib import metadata

    out: dict[str, Any] = {"python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count()}
    for dist in ("torch", "torchvision", "timm", "transformers"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


def _child(name: str, size: str, device: str, out_dir: str, result_path: str) -> int:
    from zoo import models

    result: dict[str, Any] = {"name": name, "size": size, "device": device}
    try:
        result["torchvision_import"] = models.ensure_torchvision_importable()
        t0 = time.perf_counter()
        spec = models.build(name, size, device)
        result["factory_s"] = round(time.perf_counter() - t0, 3)
    except Exception as exc:  # noqa: BLE001  (every failure is a result, never a crash of the runner)
        result.update(ok=False, phase="factory", error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc(limit=-8))
    else:
        result.update(bare_build(spec, os.path.join(out_dir, f"{name}.pt2")))
    with open(result_path, "w") as f:
        json.dump(result, f, indent=1)
    return 0 if result.get("ok") else 1


def run_zoo(
    names: list[str], *, size: str = "small", device: str = "cpu", out_dir: str | None = None, timeout: float = 900, echo: bool = True
) -> list[dict[str, Any]]:
    """``bare_build`` over ``names``, one at a time, each in a child with a cold Inductor cache."""
    keep = out_dir is not None
    out_dir = out_dir or tempfile.mkdtemp(prefix="zoo-bare-")
    os.makedirs(out_dir, exist_ok=True)
    results = []
    for name in names:
        with tempfile.TemporaryDirectory(prefix=f"zoo-{name}-") as scratch:
            result_path = os.path.join(scratch, "result.json")
            env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TORCHINDUCTOR_CACHE_DIR=os.path.join(scratch, "inductor"))
            env["PYTHONPATH"] = os.pathsep.join(p for p in (_REPO_ROOT, env.get("PYTHONPATH")) if p)
            cmd = [
                sys.executable,
                "-m",
                "zoo.bare",
                "--child",
                name,
                "--size",
                size,
                "--device",
                device,
                "--out",
                out_dir,
                "--result",
                result_path,
            ]
            t0 = time.perf_counter()
            try:
                proc = subprocess.run(cmd, env=env, cwd=_REPO_ROOT, capture_output=True, text=True, timeout=timeout)
                tail = (proc.stdout + proc.stderr)[-4000:]
                rc: int | str = proc.returncode
            except subprocess.TimeoutExpired as exc:
                tail, rc = str(exc.stderr or "")[-4000:], "timeout"
            wall = round(time.perf_counter() - t0, 1)
            if os.path.exists(result_path):
                with open(result_path) as f:
                    result = json.load(f)
            else:
                result = {
                    "name": name,
                    "ok": False,
                    "phase": "child",
                    "error": f"the child ended ({rc}) without a result",
                    "log_tail": tail,
                }
            result["wall_s"] = wall
        package = os.path.join(out_dir, f"{name}.pt2")
        if not keep and os.path.exists(package):
            os.remove(package)
        results.append(result)
        if echo:
            print(_line(result), flush=True)
    if not keep and not os.listdir(out_dir):
        os.rmdir(out_dir)
    return results


def _fmt(v: Any, spec: str = ".1f") -> str:
    return "-" if v is None else format(v, spec)


def _line(r: dict[str, Any]) -> str:
    err = r.get("compare", {}).get("max_abs_err")
    status = "ok" if r.get("ok") else f"FAILED at {r.get('phase')}: {(r.get('error') or '').splitlines()[0][:160]}"
    return (
        f"{r['name']:<20} export {_fmt(r.get('export_s'))}s  compile {_fmt(r.get('compile_s'))}s  max_abs_err {_fmt(err, '.2e')}  {status}"
    )


def _types(r: dict[str, Any]) -> str:
    names = [
        t["type"].rsplit(".", 1)[-1]
        for t in r.get("output_types", [])
        if t["type"] not in ("builtins.tuple", "builtins.list", "builtins.dict")
    ]
    return ", ".join(names) or "Tensor"


def registry_markdown() -> str:
    """The README's table of the zoo: what each entry is and its dynamic dimensions."""
    from zoo import models

    rows = ["| model | library | family | architecture | dynamic dimensions |", "| --- | --- | --- | --- | --- |"]
    for e in models.entries():
        dims = e.dims + (f" ({e.note})" if e.note else "")
        rows.append(f"| {e.name} | {e.library} | {e.family} | {e.arch} | {dims} |")
    return "\n".join(rows)


def markdown(results: list[dict[str, Any]]) -> str:
    """The README's table of a run: one row per model."""
    rows = [
        "| model | export | export s | compile s | max abs err vs eager | max abs eager | output pytree types | exported symbols |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for r in results:
        exported = "ok" if r.get("export_s") is not None else f"failed at {r.get('phase')}"
        if not r.get("ok") and r.get("export_s") is not None:
            exported += f", then failed at {r.get('phase')}"
        cmp = r.get("compare", {})
        symbols = ", ".join(f"{k} {lo}..{hi}" for k, (lo, hi) in r.get("symbols", {}).items())
        rows.append(
            f"| {r['name']} | {exported} | {_fmt(r.get('export_s'))} | {_fmt(r.get('compile_s'))} | "
            f"{_fmt(cmp.get('max_abs_err'), '.1e')} | {_fmt(cmp.get('ref_max_abs'), '.2g')} | {_types(r)} | {symbols} |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zoo.bare", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="zoo models (default: all)")
    parser.add_argument("--size", choices=("small", "full"), default="small")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", help="keep the packages in this folder (default: a temporary one, removed)")
    parser.add_argument("--json", help="write every result (and the versions) to this file")
    parser.add_argument("--markdown", action="store_true", help="print the README table at the end")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per model (default 900)")
    parser.add_argument("--list", action="store_true", help="list the zoo and exit")
    parser.add_argument("--report", metavar="JSON", help="print the README tables of a saved --json run and exit")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    ns = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    if ns.child:
        return _child(ns.child, ns.size, ns.device, ns.out, ns.result)

    from zoo import models

    if ns.report:
        with open(ns.report) as f:
            saved = json.load(f)
        print(registry_markdown() + "\n\n" + markdown(saved["results"]))
        return 0
    if ns.list:
        for e in models.entries():
            print(f"{e.name:<20} {e.library:<12} {e.family:<16} {e.dims}")
        return 0
    names = ns.names or models.names()
    for name in names:
        models.entry(name)  # an unknown name fails before any compile
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    results = run_zoo(names, size=ns.size, device=ns.device, out_dir=ns.out, timeout=ns.timeout)
    if ns.json:
        with open(ns.json, "w") as f:
            json.dump({"started": started, "size": ns.size, "device": ns.device, "versions": _versions(), "results": results}, f, indent=1)
    if ns.markdown:
        print(markdown(results))
    failed = [r["name"] for r in results if not r.get("ok")]
    print(f"{len(results) - len(failed)}/{len(results)} ok" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

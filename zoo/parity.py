"""Parity: the bare path and aoti-guard, side by side, over the zoo (issue 12).

For each model, each step in a child process of its own (a crash stays there):

a. ``bare``: ``zoo.bare`` (``torch.export`` + ``aoti_compile_and_package`` + load + run), cold
   Inductor cache: result and seconds (export + compile);
b. ``build``: ``aoti-guard build zoo/models.py:NAME -o OUT/NAME.pt2 --json ...``, the command line a
   user runs (debug twin included), in a cold Inductor cache of its own: exit code, seconds, ratio
   build / bare, the golden samples and which symbols they took to their min and max, the max error
   against eager and against float64, the findings' codes;
c. ``probe``: ``aoti-guard probe OUT/NAME.pt2 --json ...``: exit code, verdict, seconds;
d. ``guard``: ``runtime_probe.load(OUT/NAME.pt2)`` in a child where transformers, timm and
   torchvision cannot be imported (a serving process without the model's library), run on every
   golden sample the package stores, whole (every element against the stored outputs) or compact
   (inputs regenerated from their recipes, outputs against their digests: zoo/guard_golden.py),
   within the stored tolerances; per sample which it was; the type it returned and the leaf names.

parity = the bare path failed, or build, probe and guard all passed.

``python -m zoo.parity [NAMES...] --json run.json --markdown docs-table.md``;
``python -m zoo.parity --report run.json`` prints docs/zoo.md's content from a saved run.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import datetime
import json
import os
import platform
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from zoo.schedule import STEPS

__all__ = ["build_step", "guard_step", "main", "markdown", "probe_step", "run_model", "run_parity"]

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The libraries a serving process need not have: the guard child refuses to import them.
BLOCKED = ("transformers", "timm", "torchvision")
_LOCK = threading.Lock()


def _progress(name: str, phase: str, text: str) -> None:
    with _LOCK:
        print(f"[zoo.parity] {name} {phase}: {text}", file=sys.stderr, flush=True)


def _env(scratch: str, size: str, device: str) -> dict[str, str]:
    """The children's environment: this tree first on the path, offline, a cold Inductor cache."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env.pop("TRITON_CACHE_DIR", None)  # Triton's cache then lives under the (cold) Inductor cache
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_REPO_ROOT, env.get("PYTHONPATH")) if p)
    env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(scratch, "inductor")
    env["AOTI_GUARD_ZOO_SIZE"] = size
    env["AOTI_GUARD_ZOO_DEVICE"] = device
    return env


def _run(cmd: Sequence[str], env: dict[str, str], timeout: float, log_path: str | None) -> tuple[int | str, float, str]:
    """Run a child; (exit code or "timeout", seconds, the output's tail). Never raises for the child's sake."""
    t0 = time.perf_counter()
    # a session of its own: on a timeout the whole tree goes (the build's validation child, compilers)
    proc = subprocess.Popen(
        list(cmd), env=env, cwd=_REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
        rc: int | str = proc.returncode
        out = stdout + stderr
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        rc = "timeout"
        out = _text(stdout) + _text(stderr)
    seconds = round(time.perf_counter() - t0, 2)
    if log_path is not None:
        with open(log_path, "w") as f:
            f.write(f"$ {shlex.join(cmd)}\n{out}")
    return rc, seconds, out[-3000:]


def _text(data: Any) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else str(data)


def _load_json(path: str) -> dict[str, Any] | None:
    try:
        with open(path) as f:
            data = json.load(f)
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


# --------------------------------------------------------------------------------------------------
# a. the bare path
# --------------------------------------------------------------------------------------------------


def bare_step(name: str, size: str, device: str, timeout: float) -> dict[str, Any]:
    from zoo import bare

    r = bare.run_zoo([name], size=size, device=device, out_dir=None, timeout=timeout, echo=False)[0]
    seconds = None
    if r.get("export_s") is not None and r.get("compile_s") is not None:
        seconds = round(r["export_s"] + r["compile_s"], 2)
    return {
        "ok": bool(r.get("ok")),
        "seconds": seconds,
        "phase": r.get("phase"),
        "error": (r.get("error") or "").splitlines()[0][:300] if r.get("error") else None,
        "export_s": r.get("export_s"),
        "compile_s": r.get("compile_s"),
        "wall_s": r.get("wall_s"),
        "factory_s": r.get("factory_s"),
        "eager_s": r.get("eager_s"),
        "load_s": r.get("load_s"),
        "run_s": r.get("run_s"),
        "package_bytes": r.get("package_bytes"),
        "loader": r.get("loader"),
        "max_abs_err": (r.get("compare") or {}).get("max_abs_err"),
        "symbols": r.get("symbols"),
        "output_types": [t["type"] for t in r.get("output_types", [])],
        "input_types": [t["type"] for t in r.get("input_types", [])],
    }


# --------------------------------------------------------------------------------------------------
# b. aoti-guard build (the command line)
# --------------------------------------------------------------------------------------------------


def _findings(report: dict[str, Any], severities: tuple[str, ...] = ("error", "warning")) -> list[str]:
    codes: list[str] = []
    for phase in report.get("phases", []):
        for f in phase.get("findings", []):
            if f.get("severity") in severities and f.get("code") not in codes:
                codes.append(f["code"])
    return codes


def _first_error(report: dict[str, Any]) -> str | None:
    for phase in report.get("phases", []):
        for f in phase.get("findings", []):
            if f.get("severity") == "error":
                # a tool.* finding's message is generic ("failed unexpectedly"): the exception says what
                exception = (f.get("evidence") or {}).get("exception") if str(f.get("code")).startswith("tool.") else None
                return f"{f.get('code')}: {str(f.get('message'))[:300]}" + (f" ({str(exception)[:300]})" if exception else "")
    return None


def _phase(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next((p for p in report.get("phases", []) if p.get("name") == name), {})


def summarize_build(report: dict[str, Any]) -> dict[str, Any]:
    """What the parity table needs from a build report: samples, coverage, errors."""
    validate = _phase(report, "validate")
    detail = validate.get("detail") or {}
    coverage = detail.get("coverage") or {}
    symbols = {}
    for sym, c in coverage.items():
        tested = c.get("tested") or []
        symbols[sym] = {
            "min": c.get("min"),
            "max": c.get("max"),
            "tested": tested,
            "at_min": c.get("min") in tested,
            "at_max": c.get("max") is None or c.get("max") in tested,
        }
    table = detail.get("table") or []
    # the twin's check: debug_twin.detail.check since it runs after validation (2026-11-25), before
    # that validate.detail.twin; a string when it was not run
    check = (_phase(report, "debug_twin").get("detail") or {}).get("check", detail.get("twin"))
    twin = check if isinstance(check, dict) else None

    def worst(key: str) -> float | None:
        values = [row[key] for row in table if isinstance(row.get(key), (int, float))]
        return max(values) if values else None

    return {
        "exit_code": report.get("exit_code"),
        "passed": bool(report.get("passed")),
        "phases": {p["name"]: {"status": p.get("status"), "seconds": p.get("seconds")} for p in report.get("phases", [])},
        "samples": detail.get("samples") or [],
        "validate_timings": detail.get("timings") or [],  # per sample: eager, fp64, compiled, compare seconds
        # the package phase, part by part, and the release entries hashed while validation ran
        "package_timings": (_phase(report, "package").get("detail") or {}).get("timings") or {},
        "early_hashes": (_phase(report, "package").get("detail") or {}).get("early_hashes"),
        # and the constants' digests taken while the release model compiled (builder/compile/constant_digests.py)
        "constant_digests": (_phase(report, "package").get("detail") or {}).get("constant_digests"),
        # the build's twin check: kernels it printed, max |twin - release| on the example, and
        # whose weights it ran on ("release": shared, "own": its own copy)
        "twin": None
        if twin is None
        else {
            "max_abs_vs_release": twin.get("max_abs_vs_release"),
            "kernels": len(twin.get("kernels") or []),
            "weights": ((report.get("extra") or {}).get("manifest_summary") or {}).get("twin_weights"),
            # per golden sample (the non-finite baseline); builds before 2026-11-25 lack it
            **({"seconds": twin["seconds"]} if twin.get("seconds") is not None else {}),
        },
        "symbols": symbols,
        "full_coverage": (bool(symbols) and all(s["at_min"] and s["at_max"] for s in symbols.values())) or not symbols,
        "max_abs_vs_eager": worst("max_abs"),
        "max_abs_vs_fp64": worst("max_abs_vs_fp64"),
        "max_abs_eager_vs_fp64": worst("eager_max_abs_vs_fp64"),
        "codes": _findings(report),
        "error_codes": _findings(report, ("error",)),
        "error": _first_error(report),
        "outputs": (report.get("extra", {}).get("manifest_summary") or {}).get("outputs"),
    }


def build_step(name: str, size: str, device: str, out_dir: str, timeout: float, extra_args: Sequence[str] = ()) -> dict[str, Any]:
    """``aoti-guard build zoo/models.py:NAME [EXTRA_ARGS]`` as a user runs it, cold Inductor cache."""
    pkg = os.path.join(out_dir, f"{name}.pt2")
    report_path = os.path.join(out_dir, f"{name}.build.json")
    for stale in (pkg, report_path):
        if os.path.exists(stale):
            os.remove(stale)
    with tempfile.TemporaryDirectory(prefix=f"zoo-parity-{name}-") as scratch:
        log_path = os.path.join(scratch, "build.events.log")
        cmd = [sys.executable, "-m", "aoti_guard", "build", f"zoo/models.py:{name}", "-o", pkg, "--json", report_path]
        cmd += ["--log-file", log_path]  # its timestamped events: where the build's time went
        if device != "cpu":
            cmd += ["--device", device]
        cmd += list(extra_args)
        rc, seconds, tail = _run(cmd, _env(scratch, size, device), timeout, os.path.join(out_dir, f"{name}.build.log"))
        timeline = build_timeline(log_path)
    out: dict[str, Any] = {"exit_code": rc, "seconds": seconds, "package": pkg if os.path.exists(pkg) else None}
    if timeline:
        out["timeline"] = timeline
    report = _load_json(report_path)
    if report is None:
        out.update(ok=False, error=f"no build report (exit {rc}): {tail.strip().splitlines()[-1] if tail.strip() else ''}"[:400])
        return out
    out.update(summarize_build(report))
    out["ok"] = rc == 0 and out["package"] is not None
    if out["package"] is not None:
        out["package_bytes"] = os.path.getsize(pkg)
    return out


_EVENT = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?) \[([\w.-]+)\] (.*)$")
_TIMELINE_MAX = 80


def build_timeline(log_path: str) -> list[list[Any]]:
    """The build's --log-file as ``[seconds since its first event, phase, event]`` rows (at most
    80, events cut to 160 characters): which note of which phase came when, e.g. how long the
    validation child took to load the package before the first sample ran. Empty when there is
    no log (the build died before writing one)."""
    rows: list[list[Any]] = []
    first: datetime.datetime | None = None
    try:
        with open(log_path, encoding="utf-8", errors="replace") as f:
            for line in f:
                m = _EVENT.match(line.rstrip("\n"))
                if m is None:
                    continue
                try:
                    when = datetime.datetime.fromisoformat(m.group(1))
                except ValueError:
                    continue
                first = first or when
                rows.append([round((when - first).total_seconds(), 3), m.group(2), m.group(3)[:160]])
    except OSError:
        return []
    return rows[:_TIMELINE_MAX]


# --------------------------------------------------------------------------------------------------
# c. aoti-guard probe (the command line)
# --------------------------------------------------------------------------------------------------


def probe_step(name: str, pkg: str, size: str, device: str, out_dir: str, timeout: float) -> dict[str, Any]:
    report_path = os.path.join(out_dir, f"{name}.probe.json")
    if os.path.exists(report_path):
        os.remove(report_path)
    with tempfile.TemporaryDirectory(prefix=f"zoo-probe-{name}-") as scratch:
        cmd = [sys.executable, "-m", "aoti_guard", "probe", pkg, "--json", report_path]
        rc, seconds, tail = _run(cmd, _env(scratch, size, device), timeout, os.path.join(out_dir, f"{name}.probe.log"))
    out: dict[str, Any] = {"exit_code": rc, "seconds": seconds}
    report = _load_json(report_path)
    if report is None:
        out.update(ok=False, verdict="no report", error=f"no probe report (exit {rc}): {tail.strip()[-300:]}")
        return out
    golden = _phase(report, "golden")
    out.update(
        ok=rc == 0 and bool(report.get("passed")),
        verdict="passed" if report.get("passed") else "failed",
        codes=_findings(report),
        error=_first_error(report),
        golden_runs=len((golden.get("detail") or {}).get("runs") or []),
    )
    return out


# --------------------------------------------------------------------------------------------------
# d. the guarded loader, in a child without the model libraries
# --------------------------------------------------------------------------------------------------


class _Blocker:
    """A meta-path finder that refuses the model libraries: the child is a serving process
    where they are not installed."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = tuple(names)
        self.refused: list[str] = []

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname.split(".", 1)[0] in self.names:
            if fullname not in self.refused:
                self.refused.append(fullname)
            raise ModuleNotFoundError(f"No module named {fullname!r} (zoo.parity: blocked in the guard child)", name=fullname)
        return None


def _guard_child(pkg: str, result_path: str) -> int:
    blocker = _Blocker(BLOCKED)
    sys.meta_path.insert(0, blocker)
    result: dict[str, Any] = {"ok": False}
    try:
        result.update(_guard_run(pkg))
    except Exception as exc:  # noqa: BLE001 - every failure is a result
        result.update(ok=False, error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}")
        result["traceback"] = traceback.format_exc(limit=-6)
    result["imported"] = sorted({m.split(".", 1)[0] for m in sys.modules} & set(BLOCKED))
    result["import_refused"] = blocker.refused[:10]
    with open(result_path, "w") as f:
        json.dump(result, f, indent=1)
    return 0 if result.get("ok") else 1


def _guard_run(pkg: str) -> dict[str, Any]:
    from zoo import guard_golden  # every stored sample, whole or compact (zoo/guard_golden.py)

    return guard_golden.run_golden(pkg)


def guard_step(name: str, pkg: str, out_dir: str, timeout: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"zoo-guard-{name}-") as scratch:
        result_path = os.path.join(scratch, "result.json")
        env = _env(scratch, "small", "cpu")
        cmd = [sys.executable, "-m", "zoo.parity", "--guard-child", pkg, "--result", result_path]
        rc, seconds, tail = _run(cmd, env, timeout, os.path.join(out_dir, f"{name}.guard.log"))
        result = _load_json(result_path) or {"ok": False, "error": f"the guard child ended ({rc}) without a result: {tail[-300:]}"}
    result.update(exit_code=rc, seconds=seconds)
    if not result.get("ok"):  # what torch's loader printed (its exception names only the C++ call that failed)
        result["log_tail"] = tail[-1500:]
    if result.get("imported"):
        result["ok"] = False
        result["error"] = f"the guard child imported {', '.join(result['imported'])}"
    return result


# --------------------------------------------------------------------------------------------------
# one model, the zoo
# --------------------------------------------------------------------------------------------------


_MIN_STEP_S = 20.0  # a step is not started with less time than this left before the deadline


def run_model(
    name: str,
    *,
    size: str = "small",
    device: str = "cpu",
    out_dir: str,
    timeout: float = 1800,
    bare: bool = True,
    deadline: float | None = None,
    build_args: Sequence[str] = (),
    steps_wanted: Collection[str] = STEPS,
    paired: bool = False,
) -> dict[str, Any]:
    """The four steps for one model (``bare=False`` skips the bare path, as CI does). Never raises.

    ``steps_wanted``: the steps to run (``--steps``; the ratio's series runs only ``bare`` and
    ``build``); a result without probe and guard has no parity verdict (``parity`` None).

    ``paired``: the bare path and the build start together, side by side (two processes), so
    that both run under the same load by construction, and a model of GBs fits in one call
    (``--paired``); probe and guard follow the build.

    ``build_args`` go on the build's command line (e.g. ``--twin-schedule concurrent``).

    ``deadline`` (a ``time.monotonic()`` value): each step gets at most the time left, and a step
    with less than 20 s left is skipped (``skipped: deadline``; the model is then incomplete).
    """
    from zoo import models

    e = models.entry(name)
    r: dict[str, Any] = {"name": name, "library": e.library, "family": e.family, "dims": e.dims, "size": size, "device": device}
    if set(steps_wanted) != set(STEPS):
        r["steps"] = [s for s in STEPS if s in steps_wanted]

    def budget() -> float:
        return timeout if deadline is None else min(timeout, deadline - time.monotonic())

    def pkg() -> str:
        return str(r["build"]["package"])

    steps: list[tuple[str, Callable[[float], dict[str, Any]]]] = []
    if bare and "bare" in steps_wanted:
        steps.append(("bare", lambda t: bare_step(name, size, device, t)))
    steps.append(("build", lambda t: build_step(name, size, device, out_dir, t, build_args)))
    if "probe" in steps_wanted:
        steps.append(("probe", lambda t: probe_step(name, pkg(), size, device, out_dir, t)))
    if "guard" in steps_wanted:
        steps.append(("guard", lambda t: guard_step(name, pkg(), out_dir, t)))

    def do(step: str, fn: Callable[[float], dict[str, Any]]) -> None:
        if step in ("probe", "guard") and not r["build"].get("package"):
            r[step] = {"ok": False, "skipped": "no package"}
            return
        left = budget()
        if left < _MIN_STEP_S:
            r[step] = {"ok": False, "skipped": "deadline"}
            r["incomplete"] = "deadline"
            if step == "build":
                r["build"]["package"] = None
            return
        _progress(name, step, "start")
        started = time.monotonic()
        try:
            r[step] = fn(left)
        except Exception as exc:  # noqa: BLE001 - the runner's own failure is recorded, never raised
            r[step] = {"ok": False, "error": f"runner: {type(exc).__name__}: {exc}"[:400]}
        if not r[step].get("ok") and left < timeout and time.monotonic() - started >= left - 1:
            r[step]["deadline"] = True  # cut by the run's deadline, not by its own timeout: not a verdict
            r["incomplete"] = "deadline"
        _progress(name, step, _summary(r[step]))

    if paired and steps and steps[0][0] == "bare":
        bare_fn = steps.pop(0)[1]
        beside = threading.Thread(target=do, args=("bare", bare_fn), name=f"{name}-bare")
        beside.start()  # the bare path beside the build; probe and guard wait for both
        try:
            do(*steps.pop(0))
        finally:
            beside.join()
    for step, fn in steps:
        do(step, fn)
    return judge(r)


def judge(r: dict[str, Any]) -> dict[str, Any]:
    """``r`` with its ratios (build / bare) and its verdicts (``aoti_guard_ok``, ``parity``) set
    from its steps; also for a result given an earlier run's bare path (``merge_runs``)."""
    b, g = r.get("bare"), r["build"]
    g.pop("ratio", None)
    g.pop("ratio_process", None)
    if b is not None and b.get("ok") and g.get("ok") and b.get("seconds") and g.get("seconds"):  # a failed or cut build has no ratio
        g["ratio"] = round(g["seconds"] / b["seconds"], 2)
        process = bare_process_s(b)
        if process:
            g["ratio_process"] = round(g["seconds"] / process, 2)
    ours = bool(g.get("ok") and (r.get("probe") or {}).get("ok") and (r.get("guard") or {}).get("ok"))
    r["aoti_guard_ok"] = ours
    r["catch"] = caught(r)
    # a bare path cut by the run's deadline did not fail: it says nothing about parity
    r["parity"] = ours or r["catch"] or (b is not None and not b.get("ok") and not b.get("skipped") and not b.get("deadline"))
    if r.get("incomplete") and not r["parity"]:
        r["parity"] = None  # not known: the run ran out of time
    if r.get("steps") and not r["catch"] and not (b is not None and not b.get("ok")):
        r["parity"] = None  # probe and guard were not asked for (--steps): not judged
    return r


# Refusals whose cause the build established in the model or its export (not the compiler, not
# the machine): the bare path ships such a package silently, so aoti-guard's refusal is a catch.
CATCH_CODES = ("build.export_specialized", "build.nondeterministic", "build.stateful_model")


def caught(r: dict[str, Any]) -> bool:
    """The bare path packaged the model and aoti-guard refused it for an established cause."""
    b, g = r.get("bare"), r.get("build") or {}
    if g.get("ok") or b is None or not b.get("ok"):
        return False
    return any(code in CATCH_CODES for code in g.get("error_codes") or [])


def bare_process_s(b: dict[str, Any]) -> float | None:
    """The bare child's whole process up to a package on disk: the interpreter, the imports, the
    factory, export and compile, as a user's own script would spend them. The child's wall time
    less what only the zoo does there (the eager reference run, the package's load and run);
    None when the run did not record those (runs before 2026-11-23 evening)."""
    if not b.get("wall_s") or any(b.get(k) is None for k in ("eager_s", "load_s", "run_s")):
        return None
    return round(float(b["wall_s"]) - float(b["eager_s"]) - float(b["load_s"]) - float(b["run_s"]), 2)


def _summary(step: dict[str, Any]) -> str:
    if step.get("skipped"):
        return f"skipped ({step['skipped']})"
    status = "ok" if step.get("ok") else f"FAILED: {step.get('error')}"
    secs = step.get("seconds")
    return f"{status}" + (f" in {secs}s" if secs is not None else "")


def _device_name(device: str) -> str:
    if device.startswith("cuda"):
        try:
            import torch

            return str(torch.cuda.get_device_name(0))
        except Exception:  # noqa: BLE001
            return "cuda (name unavailable)"
    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return name


def environment(device: str) -> dict[str, Any]:
    from importlib import metadata

    env: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "device_name": _device_name(device),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }
    try:
        with open("/proc/meminfo") as f:
            env["memory_gb"] = round(int(f.readline().split()[1]) / 1024 / 1024)
    except (OSError, ValueError, IndexError):
        pass
    for dist in ("torch", "torchvision", "timm", "transformers"):
        try:
            env[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            env[dist] = None
    return env


def run_parity(
    names: Sequence[str],
    *,
    size: str,
    device: str,
    out_dir: str,
    timeout: float,
    jobs: int = 1,
    bare: bool = True,
    deadline: float | None = None,
    on_result: Callable[[list[dict[str, Any]]], None] | None = None,
    build_args: Sequence[str] = (),
    keep_packages: bool = True,
    one_at_a_time: Collection[str] = (),
    bare_done: Collection[str] = (),
    expected: Mapping[str, float] | None = None,
    heavy_lanes: int = 1,
    steps_wanted: Collection[str] = STEPS,
    paired: bool = False,
) -> list[dict[str, Any]]:
    """``run_model`` over ``names``, ``jobs`` at a time; results in ``names``' order (a model
    not started before ``deadline`` is left out). The models in ``one_at_a_time`` (GBs of
    weights: ``models.HEAVY_FULL`` at full size) run one after another, in one of the ``jobs``.
    The models in ``bare_done`` skip the bare path: an earlier run of the series measured it, and
    ``--report`` over the series takes it from there (``merge_runs``).

    ``expected`` (zoo.schedule.expected_seconds, scaled): a model is not started when it is
    expected to take longer than the time left before ``deadline`` (its bare path and its build
    must run in the same call for a fair ratio). ``heavy_lanes``: how many of the ``jobs`` run
    the ``one_at_a_time`` models (each lane one at a time).

    ``paired`` (``run_model``): a model's bare path and build run side by side, so ``jobs``
    processes are ``jobs // 2`` models at a time.

    ``keep_packages=False`` deletes each model's packages once its steps are done: at full size
    they are GBs each, and the GPU run of nine models at once filled its machine's 64 GB disk
    (ENOSPC in three builds and a load). The results keep every figure; the JSON is the record."""
    os.makedirs(out_dir, exist_ok=True)
    done: dict[str, dict[str, Any]] = {}

    def one(name: str) -> None:
        if deadline is not None and deadline - time.monotonic() < _MIN_STEP_S:
            _progress(name, "parity", "not started (deadline)")
            return
        if deadline is not None and expected and name in expected and expected[name] > deadline - time.monotonic():
            left = deadline - time.monotonic()
            _progress(name, "parity", f"not started: expected to take {expected[name]:.0f} s, {left:.0f} s left (the next call's)")
            return
        again = bare and name not in bare_done
        if bare and not again:
            _progress(name, "bare", "measured by an earlier run of the series (--rest-of): not run again")
        r = run_model(
            name,
            size=size,
            device=device,
            out_dir=out_dir,
            timeout=timeout,
            bare=again,
            deadline=deadline,
            build_args=build_args,
            steps_wanted=steps_wanted,
            paired=paired,
        )
        if not keep_packages:
            for path in (os.path.join(out_dir, f"{name}.pt2"), os.path.join(out_dir, f"{name}.rejected.pt2")):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(path)
        with _LOCK:
            done[name] = r
            ordered = [done[n] for n in names if n in done]
        verdict = {True: "yes", False: "NO", None: "unknown (deadline)"}[r["parity"]]
        _progress(name, "parity", "not judged (--steps)" if r.get("steps") and r["parity"] is None else verdict)
        if on_result is not None:
            on_result(ordered)

    # The heavy models in a lane of their own, one at a time; the others share the remaining jobs.
    heavy = [n for n in names if n in one_at_a_time]
    light = [n for n in names if n not in one_at_a_time]
    at_once = max(1, jobs // 2) if paired and bare else jobs
    lanes = max(1, min(heavy_lanes, at_once - 1)) if heavy else 0
    light_jobs = max(1, at_once - lanes)
    with (
        concurrent.futures.ThreadPoolExecutor(max_workers=max(1, lanes)) as heavy_lane,
        concurrent.futures.ThreadPoolExecutor(max_workers=light_jobs) as pool,
    ):
        futures = [heavy_lane.submit(one, n) for n in heavy] + [pool.submit(one, n) for n in light]
        for fut in futures:
            fut.result()
    return [done[n] for n in names if n in done]


# --------------------------------------------------------------------------------------------------
# the tables
# --------------------------------------------------------------------------------------------------


def _g(v: Any, spec: str = ".1f") -> str:
    return "-" if v is None else format(v, spec)


def _coverage_cell(b: dict[str, Any]) -> str:
    samples = ", ".join(b.get("samples") or []) or "-"
    syms = []
    for sym, c in (b.get("symbols") or {}).items():
        lo = f"{c['min']}{'' if c['at_min'] else ' (missing)'}"
        hi = f"{c['max']}{'' if c['at_max'] else ' (missing)'}"
        syms.append(f"{sym} {lo}..{hi}")
    return samples + (f" ({'; '.join(syms)})" if syms else " (static)")


def _bare_cell(r: dict[str, Any]) -> str:
    b = r.get("bare")
    if b is None:
        return "not run"
    if b.get("ok"):
        return f"ok {_g(b.get('seconds'))} s" + (f" (run of {b['from_run']})" if b.get("from_run") else "")
    return f"failed at {b.get('phase')}: {(b.get('error') or '')[:120]}"


def _build_cell(r: dict[str, Any]) -> str:
    g = r.get("build") or {}
    if g.get("ok"):
        twin = ((g.get("phases") or {}).get("debug_twin") or {}).get("seconds")
        return f"ok {_g(g.get('seconds'))} s" + (f" (twin {twin:.0f} s)" if isinstance(twin, (int, float)) else "")
    codes = ", ".join(g.get("codes") or []) or (g.get("error") or "")[:120]
    return f"failed ({codes}) {_g(g.get('seconds'))} s"


def _step_cell(s: dict[str, Any] | None, what: str) -> str:
    if s is None:
        return "-"
    if s.get("skipped"):
        return "not run"
    if what == "probe":
        return f"{s.get('verdict')} {_g(s.get('seconds'))} s" + ("" if s.get("ok") else f" ({', '.join(s.get('codes') or [])})")
    if s.get("ok"):
        leaf = s.get("leaf_names") or []
        kind = (s.get("output_type") or "").rsplit(".", 1)[-1]
        shown = ", ".join(leaf[:3]) + (f", +{len(leaf) - 3}" if len(leaf) > 3 else "")
        compact = sum(1 for run in s.get("runs") or [] if run.get("stored") == "compact")
        count = f"{s.get('samples')} samples" + (f" ({compact} compact)" if compact else "")
        return f"ok, {count}; {kind}" + (f" [{shown}]" if kind != "Tensor" and shown else "")
    return f"failed: {(s.get('error') or '')[:140]}"


def public_command(command: str) -> str:
    """The run's command with its file arguments reduced to their names (no machine paths)."""
    try:
        words = shlex.split(command)
    except ValueError:
        return command
    out: list[str] = []
    option = ""  # the option whose arguments these words are (--expect and --report take several)
    for i, w in enumerate(words):
        prev = words[i - 1] if i else ""
        if w.startswith("-"):
            option = w
            out.append(w)
        elif prev == "--out":
            out.append("OUT")
        elif prev in ("--json", "--markdown", "--rest-of") or option in ("--expect", "--report"):
            out.append(os.path.basename(w))
        else:
            out.append(w)
    return shlex.join(out)


def public_run(run: dict[str, Any]) -> dict[str, Any]:
    """A saved run without this machine's paths (the runs are committed under docs/zoo-runs/):
    the command's file arguments and each package by their names only."""
    out = {**run, "command": public_command(str(run.get("command", "")))}
    results = []
    for r in run.get("results", []):
        build = r.get("build")
        if isinstance(build, dict) and isinstance(build.get("package"), str):
            r = {**r, "build": {**build, "package": os.path.basename(build["package"])}}
        results.append(r)
    out["results"] = results
    return out


def merge_runs(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Several saved runs as one (the GPU run is split over calls): results in order, a later
    run's result for a model replacing an earlier one's, unless the later one was cut by its
    run's deadline and the earlier one was complete and at parity; every command kept. A later result
    without the bare path (``--no-bare``) keeps the earlier one's bare path as its baseline, marked
    with the run it came from, and its ratios and parity are judged against it."""
    if len(runs) == 1:
        return dict(runs[0])
    merged = dict(runs[0])
    by_name: dict[str, dict[str, Any]] = {}
    for run in runs:
        for r in run.get("results", []):
            before = by_name.get(r["name"])
            if r.get("incomplete") and before is not None and not before.get("incomplete") and before.get("parity"):
                # a later call's deadline cut it: the earlier result, complete and at parity, stands;
                # but a bare path the later call packaged is the newer measure (and the one taken
                # in the same conditions as the series' later builds)
                if (r.get("bare") or {}).get("ok"):
                    by_name[r["name"]] = judge(
                        {**before, "build": dict(before["build"]), "bare": {**r["bare"], "from_run": run.get("started")}}
                    )
                continue
            earlier = by_name.pop(r["name"], None)
            if r.get("bare") is None and earlier is not None and earlier.get("bare") is not None:
                # a --no-bare rerun (the GPU session re-running only aoti-guard's steps): the
                # earlier run's bare path stays the baseline, and says where it came from
                measured = earlier["bare"].get("from_run") or earlier.get("run_started")  # a chain of reruns: the first
                r = judge({**r, "build": dict(r["build"]), "bare": {**earlier["bare"], "from_run": measured}})
            by_name[r["name"]] = {**r, "run_started": r.get("run_started") or run.get("started")}
    names = [n for run in runs for n in run.get("names", [])]
    merged["results"] = list(by_name.values())
    merged["not_run"] = [n for n in dict.fromkeys(names) if n not in by_name]
    merged["commands"] = [str(run.get("command", "")) for run in runs]
    jobs = sorted({int(run.get("jobs") or 1) for run in runs})
    merged["jobs"] = jobs[0] if len(jobs) == 1 else f"{jobs[0]} to {jobs[-1]} (per command, below)"
    merged["started"] = min(str(run.get("started")) for run in runs)
    merged["finished"] = max(str(run.get("finished") or run.get("started")) for run in runs)
    return merged


def header(run: dict[str, Any]) -> str:
    """Where and how the run was made, in words."""
    env = run.get("environment") or {}
    device = str(run.get("device") or "cpu")
    if device.startswith("cuda"):
        host = f"{env.get('device_name')} GPU ({env.get('cpu_count')} CPU cores, {env.get('memory_gb')} GB memory)"
    else:
        arch = str(env.get("machine") or "").replace("_", "-")
        host = f"{env.get('cpu_count')}-core {arch} CPU host ({env.get('device_name')}, {env.get('memory_gb')} GB memory)"
    versions = ", ".join(f"{k} {env.get(k)}" for k in ("torch", "torchvision", "timm", "transformers"))
    finished = run.get("finished")
    when = f"{run.get('started')} to {finished}" if finished else f"started {run.get('started')} (not finished)"
    return (
        f"Run: {when}, on a {host}; Python {env.get('python')}, {versions}; size `{run.get('size')}`, "
        f"{run.get('jobs', 1)} model(s) at a time"
        + (
            ", the bare path loading with torch's C++ loader directly (`--bare-loader direct`)"
            if run.get("bare_loader") == "direct"
            else ""
        )
        + (f", builds with `{' '.join(run['build_args'])}`" if run.get("build_args") else "")
        + ".\n\n"
        "```bash\n" + "\n".join(public_command(c) for c in run.get("commands") or [str(run.get("command", ""))]) + "\n```"
    )


def markdown(run: dict[str, Any]) -> str:
    """docs/zoo.md's section for a saved run: where and how, the table, the summary."""
    return header(run) + "\n\n" + table(run) + "\n\n" + summary(run)


def table(run: dict[str, Any]) -> str:
    """One row per model (issue 12's columns)."""
    results = run.get("results", [])
    rows = [
        "| model | library | family | dynamic dims | bare | build (ratio) | golden samples (symbol min..max reached) |"
        " max err vs eager | max err vs fp64 | probe | guarded loader |",
        "| --- | --- | --- | --- | --- | --- | --- | ---: | ---: | --- | --- |",
    ]
    for r in results:
        g = r.get("build") or {}
        ratio = ""
        if g.get("ratio") and g.get("ok"):
            ratio = f" ({g['ratio']:.2f}x" + (f"; {g['ratio_process']:.2f}x process" if g.get("ratio_process") else "") + ")"
        rows.append(
            f"| {r['name']} | {r.get('library')} | {r.get('family')} | {r.get('dims')} | {_bare_cell(r)} | {_build_cell(r)}{ratio} | "
            f"{_coverage_cell(g)} | {_g(g.get('max_abs_vs_eager'), '.1e')} | {_g(g.get('max_abs_vs_fp64'), '.1e')} | "
            f"{_step_cell(r.get('probe'), 'probe')} | {_step_cell(r.get('guard'), 'guard')} |"
        )
    return "\n".join(rows)


def summary(run: dict[str, Any]) -> str:
    results = [r for r in run.get("results", []) if not (r.get("steps") and r.get("parity") is None)]  # not judged: --steps
    unjudged = len(run.get("results", [])) - len(results)
    if unjudged and not results:
        built = sum(1 for r in run["results"] if (r.get("build") or {}).get("ok"))
        return (
            f"No parity judged: --steps left out probe and guard for all {unjudged} model(s) run; {built} built. "
            "Their build / bare table: python -m zoo.ratios RUN.json."
        )
    parity = [r for r in results if r.get("parity")]
    catches = [r["name"] for r in results if r.get("catch")]
    incomplete = [r["name"] for r in results if r.get("incomplete")]
    timed = [r for r in results if (r.get("build") or {}).get("ratio") and r["build"].get("ok")]  # older runs kept cut builds' ratios
    ratios = [r["build"]["ratio"] for r in timed]
    bare_run = [r for r in results if r.get("bare") is not None]
    bare_ok = [r for r in bare_run if r["bare"].get("ok")]
    bare = f"Bare path packaged {len(bare_ok)}/{len(bare_run)}; " if bare_run else "Bare path not run; "
    lines = [
        f"**Parity {len(parity)}/{len(results)}** (a model has parity when the bare path fails, or aoti-guard builds, probes and "
        f"guard-loads it, or aoti-guard refuses a package the bare path shipped, for a cause it established: {', '.join(CATCH_CODES)}). "
        f"{bare}"
        f"aoti-guard built, probed and guard-loaded {sum(1 for r in results if r.get('aoti_guard_ok'))}/{len(results)}"
        + (f"; caught {len(catches)} ({', '.join(catches)})." if catches else "."),
    ]
    narrowed = [r["name"] for r in results if "build.range_narrowed" in ((r.get("build") or {}).get("codes") or [])]
    if narrowed:
        lines.append(
            f"`build.range_narrowed` (AOTInductor compiled a narrower range than the export's; the contract follows it): {', '.join(narrowed)}."
        )
    if ratios:
        walls = [r["build"]["seconds"] / r["bare"]["wall_s"] for r in timed if r["bare"].get("wall_s")]
        processes = [r["build"]["ratio_process"] for r in timed if r["build"].get("ratio_process")]
        twins = [
            r["build"]["phases"]["debug_twin"]["seconds"] / r["bare"]["seconds"]
            for r in timed
            if isinstance(((r["build"].get("phases") or {}).get("debug_twin") or {}).get("seconds"), (int, float))
        ]
        lines.append(
            f"Build (the whole command, debug twin included) / bare (export + compile), median over {len(ratios)} models: "
            f"**{statistics.median(ratios):.2f}** (min {min(ratios):.2f}, max {max(ratios):.2f})"
            + (f"; the twin's compile alone is {statistics.median(twins):.2f} of the bare time (median)" if twins else "")
            + "."
        )
        sizes = [
            r["build"]["package_bytes"] / r["bare"]["package_bytes"]
            for r in timed
            if r["build"].get("package_bytes") and r["bare"].get("package_bytes")
        ]
        if sizes:
            shared = sum(1 for r in timed if ((r["build"].get("twin") or {}).get("weights")) == "release")
            lines.append(
                f"Package bytes / the bare package's, median over {len(sizes)} models: **{statistics.median(sizes):.2f}** "
                f"(min {min(sizes):.2f}, max {max(sizes):.2f}); the debug twin shared the release model's weights in "
                f"{shared} of them (`--twin-weights`)."
            )
        if processes:
            lines.append(
                f"Build / the bare script's whole process up to its package (interpreter, imports, factory, export, compile; "
                f"`process` in the table), median over {len(processes)} models: **{statistics.median(processes):.2f}** "
                f"(min {min(processes):.2f}, max {max(processes):.2f})."
            )
        elif walls:  # older runs: the bare child's wall time, its eager run, load and run included
            lines.append(
                f"Against the bare child's whole process (imports, factory, and the zoo's own eager run, load and run of the package "
                f"included, so this flatters the build): {statistics.median(walls):.2f}."
            )
    missing = run.get("not_run") or []
    if missing:
        lines.append(f"Not run: {', '.join(missing)}.")
    if incomplete:
        lines.append(f"Stopped by the run's deadline before every step ran: {', '.join(incomplete)}.")
    failed = [r for r in results if r.get("parity") is False]
    for r in failed:
        for step in ("build", "probe", "guard"):
            s = r.get(step) or {}
            if not s.get("ok") and not s.get("skipped"):
                lines.append(f"- {r['name']}: {step} failed: {s.get('error')}")
                break
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------
# the command line
# --------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zoo.parity", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="zoo models (default: all)")
    parser.add_argument("--size", choices=("small", "full"), default="small")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--json", help="write every result and the environment here (rewritten after each model)")
    parser.add_argument("--markdown", metavar="FILE", help="write the parity table and summary here at the end")
    parser.add_argument("--out", help="keep packages and reports in this folder (default: a temporary one, removed)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per step of one model (default 1800)")
    parser.add_argument("--jobs", type=int, default=1, help="models run concurrently (default 1)")
    parser.add_argument("--no-bare", action="store_true", help="skip the bare path (no ratio, no parity baseline)")
    parser.add_argument(
        "--build-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="one more argument for every `aoti-guard build` (repeat), e.g. --build-arg=--twin-schedule --build-arg=concurrent",
    )
    parser.add_argument(
        "--bare-loader",
        choices=("torch", "direct"),
        default="torch",
        help="how the bare path loads its package to compare with eager (not timed): torch's aoti_load_package (default) "
        "or the C++ AOTIModelPackageLoader it wraps (the lent GPU image spends 87-105 s in aoti_load_package)",
    )
    parser.add_argument(
        "--rest-of",
        metavar="JSON",
        action="append",
        help="run only the models the saved run(s) did not finish (not started, or stopped by its deadline); repeat it for a "
        "series of calls",
    )
    parser.add_argument("--deadline", type=float, help="seconds for the whole run: no step starts with less than 20 s left")
    parser.add_argument(
        "--same-call",
        action="store_true",
        help="for a fair build / bare ratio over a series of calls (--rest-of): a model's bare path and its build run in the "
        "same call (a bare path from an earlier call is measured again), longest first by --expect, and a model is not "
        "started unless --expect says it fits in the --deadline's time left",
    )
    parser.add_argument(
        "--paired",
        action="store_true",
        help="a model's bare path and its build start together, side by side, under the same load by construction; "
        "--jobs then counts processes (--jobs 8: 4 models at a time), and --expect takes the longer of the two",
    )
    parser.add_argument(
        "--expect",
        metavar="JSON",
        nargs="+",
        default=[],
        help="saved runs whose step times estimate each model's (zoo.schedule; with --same-call)",
    )
    parser.add_argument(
        "--expect-scale", type=float, default=1.0, help="the estimates times this (the machine's load differs: default 1.0)"
    )
    parser.add_argument(
        "--steps",
        default=",".join(STEPS),
        help="the steps to run, comma-separated (default all: bare,build,probe,guard); the ratio's series runs bare,build "
        "(without probe and guard no parity is judged)",
    )
    parser.add_argument(
        "--heavy-lanes",
        type=int,
        default=1,
        help="of the --jobs, how many run the models of GBs of weights (zoo.models.HEAVY_FULL, each lane one at a time; default 1)",
    )
    parser.add_argument(
        "--report",
        metavar="JSON",
        nargs="+",
        help="print the markdown of saved --json runs and exit (several: one table, in order; a later run's result replaces an earlier one's)",
    )
    parser.add_argument("--guard-child", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    ns = parser.parse_args(argv)
    steps_wanted = [s.strip() for s in ns.steps.split(",") if s.strip()]
    unknown = [s for s in steps_wanted if s not in STEPS] + ([] if "build" in steps_wanted else ["(build is always run)"])
    if unknown:
        parser.error(f"--steps: {', '.join(unknown)}; the steps are {','.join(STEPS)}")
    if ns.guard_child:
        return _guard_child(ns.guard_child, ns.result)

    def saved_runs(paths: Sequence[str]) -> list[dict[str, Any]]:
        """The saved runs at ``paths``; a file that cannot be read is a usage error."""
        runs = []
        for path in paths:
            saved = _load_json(path)
            if saved is None:
                parser.error(f"cannot read {path}")
            runs.append(saved)
        return runs

    if ns.report:
        print(markdown(merge_runs(saved_runs(ns.report))))
        return 0
    from zoo import models, schedule

    os.environ.pop("TRITON_CACHE_DIR", None)  # the bare path's children inherit this: cold Triton caches too
    from zoo.bare import LOADER_ENV

    os.environ[LOADER_ENV] = ns.bare_loader
    names = ns.names or models.names()
    finished: set[str] = set()
    bare_done: set[str] = set()  # an earlier call's bare path packaged it: not measured twice
    for previous in saved_runs(ns.rest_of or []):
        finished |= {r["name"] for r in previous.get("results", []) if not r.get("incomplete")}
        bare_done |= {r["name"] for r in previous.get("results", []) if (r.get("bare") or {}).get("ok")}
    names = [n for n in names if n not in finished]
    expected: dict[str, float] = {}
    if ns.same_call:
        bare_done = set()  # a ratio of a bare path and a build from different calls is not fair (zoo/schedule.py)
        estimates = schedule.expected_seconds(saved_runs(ns.expect), steps=steps_wanted, paired=ns.paired and not ns.no_bare)
        expected = {n: s * ns.expect_scale for n, s in estimates.items()}
        names = schedule.longest_first(names, expected)
    for name in names:
        models.entry(name)  # an unknown name fails before any compile
    keep = ns.out is not None
    out_dir = os.path.abspath(ns.out) if keep else tempfile.mkdtemp(prefix="zoo-parity-")
    run: dict[str, Any] = {
        "command": "python -m zoo.parity " + shlex.join(argv if argv is not None else sys.argv[1:]),
        "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "size": ns.size,
        "device": ns.device,
        "jobs": ns.jobs,
        "bare_loader": ns.bare_loader,
        "build_args": ns.build_arg,
        "same_call": ns.same_call,
        "paired": ns.paired and not ns.no_bare,
        "environment": environment(ns.device),
        "names": list(names),
        "results": [],
    }

    def save(results: list[dict[str, Any]]) -> None:
        run["results"] = results
        run["not_run"] = [n for n in names if n not in {r["name"] for r in results}]
        if ns.json:
            tmp = ns.json + ".tmp"
            with open(tmp, "w") as f:
                json.dump(public_run(run), f, indent=1)
            os.replace(tmp, ns.json)

    save([])
    try:
        results = run_parity(
            names,
            size=ns.size,
            device=ns.device,
            out_dir=out_dir,
            timeout=ns.timeout,
            jobs=ns.jobs,
            bare=not ns.no_bare,
            deadline=None if ns.deadline is None else time.monotonic() + ns.deadline,
            on_result=save,
            build_args=ns.build_arg,
            keep_packages=keep,
            one_at_a_time=models.HEAVY_FULL if ns.size == "full" and ns.jobs > 1 else (),
            bare_done=bare_done,
            expected=expected,
            heavy_lanes=ns.heavy_lanes,
            steps_wanted=steps_wanted,
            paired=ns.paired,
        )
    finally:
        if not keep:
            import shutil

            shutil.rmtree(out_dir, ignore_errors=True)
    run["finished"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    save(results)
    if ns.markdown:
        with open(ns.markdown, "w") as f:
            f.write(markdown(run) + "\n")
    print(summary(run))
    judged = [r for r in results if not r.get("steps")]
    return (
        0
        if all(r["parity"] for r in judged)
        and all((r.get("build") or {}).get("ok") or r.get("parity") for r in results)
        and not run["not_run"]
        else 1
    )


if __name__ == "__main__":
    sys.exit(main())

"""Attacks: build_inputs (issue 40). See tests/hostile/attack.py.

The build's inputs: a saved ExportedProgram given as TARGET (findings 3: a payload in the file ran
in the build), the text of a caller's file or a package on the error path (9: a ``--samples``
path or tensor name, a package's path in ``PackageRejected``, reaching a terminal or a serving
log raw) and a stop signal during a lazy import (15: reported as ``build.export_failed``).
Every attack runs the real command line (``python -m aoti_guard``) or the guarded loader in a
child, bounded in time.
"""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import textwrap
import zipfile
from collections.abc import Callable
from pathlib import Path

from tests.hostile.attack import Attack, AttackContext, AttackSucceeded
from tests.hostile.hostile_programs import PAYLOADS, make_program, plant

_REPO = Path(__file__).resolve().parents[3]
HOSTILE = "x\x1b[2J\x1b[32mBUILD PASSED\x1b[0m\r\u202eevil"
_program_bytes: list[bytes] = []  # the tiny saved program, made once per process


def _run(args: list[str], cwd: Path, timeout_s: float = 240) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` with this checkout first on the path; on the time limit the run gets
    SIGTERM (so that it removes its children and staging folder), then SIGKILL."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(_REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    proc = subprocess.Popen(
        [sys.executable, *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        raise AttackSucceeded(f"python {' '.join(args[:3])} ran past {timeout_s:.0f}s: {_text(err)[-300:]!r}") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, _text(out), _text(err))


def _text(data: bytes) -> str:
    # decoded by hand: text mode would turn a raw CR into a line break, which the checks allow
    return data.decode("utf-8", "replace")


def _raw_control(text: str) -> list[str]:
    return sorted({repr(c) for c in text if c != "\n" and not c.isprintable()})


def _base_program(ctx: AttackContext) -> Path:
    path = ctx.tmp / "base.pt2"
    if not _program_bytes:
        _program_bytes.append(make_program(path).read_bytes())
    else:
        path.write_bytes(_program_bytes[0])
    return path


# --- saved programs (finding 3) ------------------------------------------------------------------


def _saved_program(payload: str) -> Callable[[AttackContext], str]:
    def run(ctx: AttackContext) -> str:
        marker = ctx.tmp / "payload-ran"
        target = plant(_base_program(ctx), ctx.tmp / "model.pt2", payload, marker)
        proc = _run(["-m", "aoti_guard", "build", str(target), "-o", str(ctx.tmp / "out.pt2"), "--no-debug-twin"], ctx.tmp)
        if marker.exists():
            raise AttackSucceeded(f"the payload in the saved program ran (exit {proc.returncode}): {PAYLOADS[payload][1]}")
        if proc.returncode != 2 or "pickled code" not in proc.stderr:
            raise AttackSucceeded(f"the program was not refused as code (exit {proc.returncode}): {proc.stderr[-400:]!r}")
        first = next(line for line in proc.stderr.splitlines() if line.startswith("error:"))
        return f"refused, exit 2, nothing ran: {first[:160]}"

    return run


_SAVED = [
    Attack(
        name=f"saved-program-{payload}",
        klass="saved programs",
        what=f"aoti-guard build PROGRAM.pt2, a real torch.export.save file with {what} that runs `touch MARKER`",
        expected="exit 2, 'this file holds pickled code or code in its expressions', the marker never written",
        run=_saved_program(payload),
    )
    for payload, (_, what) in sorted(PAYLOADS.items())
]


# --- terminal injection on the error path (finding 9) --------------------------------------------


def _samples_path(ctx: AttackContext) -> str:
    proc = _run(
        ["-m", "aoti_guard", "build", "-o", str(ctx.tmp / "out.pt2"), "--samples", str(ctx.tmp / f"{HOSTILE}.safetensors")],
        ctx.tmp,
        timeout_s=60,
    )
    raw = _raw_control(proc.stderr)
    if raw:
        raise AttackSucceeded(f"the error printed {', '.join(raw)} raw: {proc.stderr[:200]!r}")
    if proc.returncode != 2:
        raise AttackSucceeded(f"exit {proc.returncode}, not a usage error: {proc.stderr[-300:]!r}")
    return f"exit 2, the path printed escaped: {proc.stderr.splitlines()[0][:120]}"


def _safetensors(path: Path, names: list[str]) -> Path:
    """A valid safetensors file: one float32 scalar per name."""
    header = {name: {"dtype": "F32", "shape": [], "data_offsets": [4 * i, 4 * i + 4]} for i, name in enumerate(names)}
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * (4 * len(names)))
    return path


def _samples_tensor_name(ctx: AttackContext) -> str:
    # the bundled example's inputs are x and mask: a file with one more, named to drive the terminal
    samples = _safetensors(ctx.tmp / "req.safetensors", ["x", "mask", HOSTILE])
    proc = _run(["-m", "aoti_guard", "build", "-o", str(ctx.tmp / "out.pt2"), "--no-debug-twin", "--samples", str(samples)], ctx.tmp)
    raw = _raw_control(proc.stderr)
    if raw:
        raise AttackSucceeded(f"the error printed {', '.join(raw)} raw: {proc.stderr[-300:]!r}")
    if proc.returncode != 2 or "\\x1b[2J" not in proc.stderr:
        raise AttackSucceeded(f"exit {proc.returncode}, the name not reported: {proc.stderr[-300:]!r}")
    line = next(line for line in proc.stderr.splitlines() if "\\x1b" in line)
    return f"exit 2, the name printed escaped: {line[:140]}"


_SERVE = textwrap.dedent(
    """
    import sys
    import runtime_probe
    try:
        runtime_probe.load(sys.argv[1])
    except runtime_probe.PackageRejected as exc:
        sys.stdout.write(f"ERROR serving: {exc}\\n")  # what a serving process logs
    """
)


def _package_rejected(ctx: AttackContext) -> str:
    pkg = ctx.package_copy(f"{HOSTILE}.pt2")
    with zipfile.ZipFile(pkg, "a") as archive:
        archive.writestr("outside/entry", b"")  # refused by the archive checks before anything loads
    proc = _run(["-c", _SERVE, str(pkg)], ctx.tmp, timeout_s=120)
    if "ERROR serving:" not in proc.stdout:
        raise AttackSucceeded(f"no PackageRejected (exit {proc.returncode}): {proc.stderr[-300:]!r}")
    raw = _raw_control(proc.stdout)
    if raw:
        raise AttackSucceeded(f"PackageRejected carried {', '.join(raw)} raw into the log: {proc.stdout[:200]!r}")
    return f"PackageRejected, printable: {proc.stdout.splitlines()[0][:140]}"


_TERMINAL = [
    Attack(
        name="build-error-samples-path-escapes",
        klass="terminal injection",
        what="aoti-guard build --samples PATH, the path holding ESC[2J, a green 'BUILD PASSED', CR and U+202E",
        expected="exit 2; the error names the path with each control character escaped (\\x1b, \\r, \\u202e)",
        run=_samples_path,
    ),
    Attack(
        name="build-error-samples-tensor-name-escapes",
        klass="terminal injection",
        what="aoti-guard build --samples FILE, one tensor in FILE named with ESC[2J, 'BUILD PASSED', CR and U+202E",
        expected="exit 2; 'has tensors the model does not take' with the name escaped",
        run=_samples_tensor_name,
    ),
    Attack(
        name="package-rejected-message-escapes",
        klass="terminal injection",
        what="runtime_probe.load of a rejected package whose file name holds ESC, CR and U+202E; the serving code logs str(exc)",
        expected="PackageRejected whose message and hint are printable (the name escaped)",
        run=_package_rejected,
    ),
]


# --- signals (finding 15) ------------------------------------------------------------------------

_LAZY_HELPER = """
import os, signal
os.kill(os.getpid(), signal.SIGTERM)  # the stop signal lands while this module is being imported
SCALE = 2.0
"""

_MODEL = """
import sys
import torch

calls = []


class M(torch.nn.Module):
    def forward(self, x):
        calls.append(1)
        if len(calls) == 2:  # export's trace (the first call is the build's eager run)
            try:
                import lazy_helper  # noqa: F401 - a lazy import, as torch and transformers make them
            finally:
                # a cleanup that fails on the half-done state: its error replaces the signal's
                if "lazy_helper" not in sys.modules:
                    raise RuntimeError("lazy_helper was not initialised")
        return x * 2


def make():
    return M(), (torch.randn(2, 3),)
"""


def _sigterm_during_lazy_import(ctx: AttackContext) -> str:
    (ctx.tmp / "lazy_helper.py").write_text(_LAZY_HELPER)
    (ctx.tmp / "model.py").write_text(_MODEL)
    report = ctx.tmp / "build.json"
    args = ["-m", "aoti_guard", "build", "model.py:make", "-o", "out.pt2", "--no-debug-twin", "--json", str(report)]
    proc = _run(args, ctx.tmp)
    codes = [f["code"] for p in json.loads(report.read_text())["phases"] for f in p["findings"]] if report.exists() else []
    if proc.returncode != 3 or "env.terminated" not in codes or "build.export_failed" in codes:
        raise AttackSucceeded(f"the stopped build was reported as exit {proc.returncode} with {codes}")
    return "exit 3, env.terminated in the export phase (no build.export_failed)"


_SIGNALS = [
    Attack(
        name="sigterm-during-lazy-import-in-export",
        klass="signals",
        what="SIGTERM while export's trace lazily imports a module, and a cleanup then fails on the half-done import",
        expected="exit 3 and env.terminated, not build.export_failed (exit 1)",
        run=_sigterm_during_lazy_import,
    ),
]

ATTACKS: list[Attack] = [*_SAVED, *_TERMINAL, *_SIGNALS]

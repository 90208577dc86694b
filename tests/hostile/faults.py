"""Faults around the probe's child process, run through the real CLI on a real package.

Shared by tests/integration/test_faults.py (which asserts) and the reliability report (which
tabulates). The child's misbehaviour is injected with a ``sitecustomize`` module on PYTHONPATH
that replaces the worker's ``load`` op, so runtime_probe itself carries no test hook: the child
really hangs (with a grandchild), really fills a memory cgroup until the kernel kills it, really
prints megabytes. Then a package on a real read-only mount, and several probes at once.

Each scenario returns a ``Fault``: what was observed, and the list of checks that failed (empty
when the probe behaved), or why the scenario could not run here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["SCENARIOS", "Fault", "inject_env"]

SITECUSTOMIZE = """
import os, subprocess, sys, time
fault = os.environ.get("AOTI_GUARD_TEST_FAULT")
if fault:
    from runtime_probe.child import ops as _ops

    _real_load = _ops.OPS["load"]

    def faulty_load(state, **kw):
        if fault == "cxx":
            # A C++ runtime mismatch as the GPU machine shows it: a SIGSEGV inside libstdc++'s
            # std::locale, that goes away when a libstdc++ is preloaded (the ladder's remedy).
            if "libstdc++" in os.environ.get("LD_PRELOAD", ""):
                return _real_load(state, **kw)
            import ctypes

            ctor = ctypes.CDLL("libstdc++.so.6")._ZNSt6localeC1EPKc
            ctor.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
            ctor(None, b"C")
        if fault == "hang":
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
            with open(os.environ["AOTI_GUARD_TEST_PIDFILE"], "w") as fh:
                fh.write(str(child.pid))
            time.sleep(600)
        if fault == "oom":
            with open(os.path.join(os.environ["AOTI_GUARD_TEST_CGROUP"], "cgroup.procs"), "w") as fh:
                fh.write(str(os.getpid()))
            hog = []
            for _ in range(256):  # up to 16 GiB, every page touched; the cgroup allows 256 MiB
                hog.append(bytearray(b"\\x01") * (64 << 20))
        if fault == "flood":
            line = "x" * 1023 + "\\n"
            for _ in range(40 * 1024):  # 40 MiB on each stream
                sys.stdout.write(line)
                sys.stderr.write("Error: " + line)
            sys.stdout.flush()
            raise RuntimeError("flooded")
        raise RuntimeError(f"unknown fault {fault}")

    _ops.OPS["load"] = faulty_load
"""


@dataclass
class Fault:
    name: str
    what: str
    observed: str = ""
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)
    skipped: str | None = None

    def check(self, condition: bool, problem: str) -> None:
        if not condition:
            self.problems.append(problem)


def inject_env(work: Path, fault: str | None) -> dict[str, str]:
    """The environment that makes every child interpreter started under it misbehave as ``fault``
    says (the sitecustomize above): used by the probe's and the build's fault tests alike."""
    inject = work / "inject"
    inject.mkdir(exist_ok=True)
    (inject / "sitecustomize.py").write_text(SITECUSTOMIZE)
    pythonpath = os.pathsep.join(p for p in (str(inject), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": pythonpath, "AOTI_GUARD_TEST_FAULT": fault or ""}


def _probe(
    pkg: Path, work: Path, fault: str | None, *args: str, **env: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any], float]:
    report = work / f"{fault}.json"
    extra = {**inject_env(work, fault), **env}
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "runtime_probe", str(pkg), "--json", str(report), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **extra},
    )
    data = json.loads(report.read_text()) if report.exists() else {"phases": []}
    return proc, data, time.monotonic() - started


def _finding(report: dict[str, Any], code: str) -> dict[str, Any]:
    return next((f for p in report["phases"] for f in p["findings"] if f["code"] == code), {})


def _codes(report: dict[str, Any]) -> str:
    return ", ".join(f["code"] for p in report["phases"] for f in p["findings"] if f["severity"] == "error") or "none"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except OSError:
        return False


def _common(f: Fault, proc: subprocess.CompletedProcess[str], report: dict[str, Any], seconds: float) -> None:
    f.seconds = seconds
    f.observed = f"exit {proc.returncode}; {_codes(report)}"
    f.check("Traceback" not in proc.stdout + proc.stderr, "a traceback was printed")


def hang(pkg: Path, work: Path) -> Fault:
    f = Fault("child hangs", "load never returns and starts a grandchild; --timeout 10")
    pidfile = work / "grandchild.pid"
    proc, report, seconds = _probe(pkg, work, "hang", "--timeout", "10", AOTI_GUARD_TEST_PIDFILE=str(pidfile))
    _common(f, proc, report, seconds)
    f.check(proc.returncode == 1, f"exit {proc.returncode}, expected 1")
    f.check("killed" in _finding(report, "load.timeout").get("message", ""), "no load.timeout finding saying the child was killed")
    f.check(seconds < 120, f"took {seconds:.0f}s")
    if pidfile.exists():
        grandchild = int(pidfile.read_text())
        deadline = time.monotonic() + 10
        while _alive(grandchild) and time.monotonic() < deadline:
            time.sleep(0.1)
        f.check(not _alive(grandchild), "the grandchild survived")
        f.observed += "; grandchild killed" if not _alive(grandchild) else "; grandchild ALIVE"
    else:
        f.problems.append("the hang never started (the child timed out before load?)")
    return f


def oom(pkg: Path, work: Path) -> Fault:
    f = Fault("child killed for memory", "load allocates inside a 256 MiB memory cgroup until the kernel's OOM killer ends it")
    base = Path("/sys/fs/cgroup/memory")
    if not (base / "cgroup.procs").exists():
        f.skipped = f"no cgroup v1 memory controller at {base} (a cgroup v2-only host would need memory.max)"
        return f
    group = base / f"aoti-guard-test-{uuid.uuid4().hex[:8]}"
    try:
        group.mkdir()
        (group / "memory.limit_in_bytes").write_text(str(256 << 20))
    except OSError as exc:
        f.skipped = f"cannot create a memory cgroup under {base}: {exc.strerror}"
        return f
    try:
        proc, report, seconds = _probe(pkg, work, "oom", AOTI_GUARD_TEST_CGROUP=str(group))
        _common(f, proc, report, seconds)
        crash = _finding(report, "load.crash")
        f.check(proc.returncode == 1, f"exit {proc.returncode}, expected 1")
        f.check(crash.get("found") == "SIGKILL", f"load.crash found {crash.get('found')!r}, expected SIGKILL")
        f.check("OOM killer" in (crash.get("hint") or ""), "the hint does not name the OOM killer")
        f.check(int((group / "memory.failcnt").read_text()) > 0, "the cgroup limit was never hit")
        f.observed += f"; {crash.get('found')}"
    finally:
        for _ in range(50):
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.1)
    return f


def flood(pkg: Path, work: Path) -> Fault:
    f = Fault("child prints megabytes", "load writes 40 MiB to stdout and 40 MiB to stderr, then raises")
    proc, report, seconds = _probe(pkg, work, "flood")
    _common(f, proc, report, seconds)
    error = _finding(report, "load.error")
    evidence = error.get("evidence", {})
    size = (work / "flood.json").stat().st_size if (work / "flood.json").exists() else 0
    f.check(proc.returncode == 1 and bool(error), "no load.error finding")
    f.check(len(evidence.get("stderr_tail", "")) <= 6000 and len(evidence.get("stdout_tail", "")) <= 3000, "evidence not bounded")
    f.check(0 < size < 200_000, f"JSON report is {size} bytes")
    f.check(len(proc.stdout) + len(proc.stderr) < 200_000, "the probe's own output is not bounded")
    f.observed += f"; report {size // 1024} KiB"
    return f


def read_only(pkg: Path, work: Path) -> Fault:
    f = Fault(
        "package on a read-only mount",
        "a signed package on `mount --bind -o ro` in a private mount namespace; then `aoti-guard sign` on it",
    )
    if shutil.which("unshare") is None:
        f.skipped = "no unshare(1) to make a private mount namespace"
        return f
    src, ro = work / "src", work / "ro"
    src.mkdir()
    ro.mkdir()
    shutil.copy(pkg, src / "model.pt2")
    key = work / "release.key"
    for argv in (["keygen", str(key)], ["sign", str(src / "model.pt2"), "--key", str(key)]):
        subprocess.run([sys.executable, "-m", "aoti_guard", *argv], check=True, capture_output=True)
    before = sorted(os.listdir(src))
    report = work / "ro.json"
    script = (
        f"mount --bind -o ro {src} {ro} || exit 97\n"
        f"touch {ro}/probe-write-test 2>/dev/null && exit 98\n"
        f"{sys.executable} -m runtime_probe {ro}/model.pt2 --public-key {key}.pub --fast --json {report} || exit $?\n"
        f"{sys.executable} -m aoti_guard sign {ro}/model.pt2 --key {key}; echo sign-exit=$?\n"
    )
    started = time.monotonic()
    proc = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=300)
    f.seconds = time.monotonic() - started
    if proc.returncode == 97 or "Operation not permitted" in proc.stderr or "unshare failed" in proc.stderr:
        f.skipped = f"the sandbox forbids a read-only bind mount (tried unshare -m + mount --bind -o ro): {proc.stderr.strip()[:200]}"
        return f
    f.check(proc.returncode != 98, "the mount is not read-only")
    f.check(proc.returncode == 0, f"probe exit {proc.returncode}: {proc.stderr[-500:]}")
    passed = report.exists() and json.loads(report.read_text())["passed"]
    f.check(passed, "the probe did not pass")
    f.check(
        "sign-exit=2" in proc.stdout and "cannot write next to" in proc.stderr, "sign on the read-only package was not a clean usage error"
    )
    f.check("Traceback" not in proc.stdout + proc.stderr, "a traceback was printed")
    f.check(sorted(os.listdir(src)) == before, "something was written next to the package")
    f.observed = f"probe exit {proc.returncode} ({'passed' if passed else 'failed'}); sign exit 2 (cannot write next to the package)"
    return f


def concurrent(pkg: Path, work: Path) -> Fault:
    f = Fault("concurrent probes", "3 probes of one package at once, sharing one TMPDIR")
    tmpdir = work / "tmp"
    tmpdir.mkdir()
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    started = time.monotonic()
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "runtime_probe", str(pkg), "--json", str(work / f"c{i}.json"), "-q"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(3)
    ]
    outputs = [p.communicate(timeout=300) for p in procs]
    f.seconds = time.monotonic() - started
    codes = [p.returncode for p in procs]
    for i, (out, err) in enumerate(outputs):
        report = work / f"c{i}.json"
        f.check(report.exists() and json.loads(report.read_text())["passed"], f"probe {i} did not pass: {(out + err)[-300:]}")
        f.check("Traceback" not in out + err, f"probe {i} printed a traceback")
    left = [n for n in os.listdir(tmpdir) if n.startswith("runtime-probe-")]
    f.check(not left, f"temp dirs left behind: {left}")
    f.observed = f"exit codes {codes}; {len(left)} temp dir(s) left"
    return f


SCENARIOS: dict[str, Callable[[Path, Path], Fault]] = {
    "hang": hang,
    "oom": oom,
    "flood": flood,
    "read_only": read_only,
    "concurrent": concurrent,
}

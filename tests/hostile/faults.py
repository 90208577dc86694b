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
import signal
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
        if fault == "crash_grandchild":
            # a package that starts a helper process, then crashes: under gdb the program runs in a
            # process group of its own (in gdb's session), and its helper with it
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
            import signal

            os.kill(os.getpid(), signal.SIGSEGV)
        if fault == "crash_after_load":
            # torch has extracted the package to TMPDIR; a crash skips the loader's cleanup
            _real_load(state, **kw)
            import signal

            os.kill(os.getpid(), signal.SIGSEGV)
        if fault == "warn":
            # torch's noise as a build or load makes it: a Python warning and a torch._logging record
            import logging
            import warnings

            import torch._inductor.compile_fx  # noqa: F401 - torch._logging's handlers

            warnings.warn("isinstance(treespec, LeafSpec) is deprecated", FutureWarning)
            logging.getLogger("torch._inductor.fake").warning("an injected torch log record")
            return _real_load(state, **kw)
        if fault == "rlimit":
            # an address-space limit 64 MiB above what the child maps now: the load runs out
            import resource

            mapped = int(open("/proc/self/statm").read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
            resource.setrlimit(resource.RLIMIT_AS, (mapped + (64 << 20), resource.RLIM_INFINITY))
            hog = [bytearray(16 << 20) for _ in range(64)]
            return _real_load(state, **kw)
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
        tmpdir = work / "tmp"
        tmpdir.mkdir(parents=True, exist_ok=True)
        proc, report, seconds = _probe(pkg, work, "oom", AOTI_GUARD_TEST_CGROUP=str(group), TMPDIR=str(tmpdir))
        _common(f, proc, report, seconds)
        f.check(seconds < 300, f"took {seconds:.0f}s")
        f.check(not _left_behind(tmpdir), f"left in TMPDIR: {_left_behind(tmpdir)[:5]}")
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


def _left_behind(tmpdir: Path) -> list[str]:
    return sorted(os.listdir(tmpdir)) if tmpdir.exists() else []


def leak_after_crash(pkg: Path, work: Path) -> Fault:
    f = Fault("child crashes after torch extracted the package", "load extracts to TMPDIR, then SIGSEGV; the ladder reruns it")
    tmpdir = work / "tmp"
    tmpdir.mkdir(parents=True)
    proc, report, seconds = _probe(pkg, work, "crash_after_load", "--escalate-timeout", "120", TMPDIR=str(tmpdir))
    _common(f, proc, report, seconds)
    f.check(proc.returncode == 1, f"exit {proc.returncode}, expected 1")
    f.check(_finding(report, "load.crash").get("found") == "SIGSEGV", "no load.crash SIGSEGV finding")
    left = _left_behind(tmpdir)
    f.check(not left, f"left in TMPDIR: {left[:5]}")
    f.observed += f"; TMPDIR after: {len(left)} entries"
    return f


def tmpdir_full(pkg: Path, work: Path) -> Fault:
    f = Fault("TMPDIR full", "no file in TMPDIR may grow past 256 KiB (RLIMIT_FSIZE): the private copy of the package fails")
    tmpdir = work / "tmp"
    tmpdir.mkdir(parents=True)

    def limit() -> None:
        import resource
        import signal

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # write() fails with EFBIG, as on a full disk
        resource.setrlimit(resource.RLIMIT_FSIZE, (256 << 10, 256 << 10))

    report = work / "full.json"
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "runtime_probe", str(pkg), "--json", str(report)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TMPDIR": str(tmpdir)},
        preexec_fn=limit,
    )
    data = json.loads(report.read_text()) if report.exists() else {"phases": []}
    _common(f, proc, data, time.monotonic() - started)
    f.check(proc.returncode == 3, f"exit {proc.returncode}, expected 3 (the tool could not run)")
    f.check(bool(_finding(data, "env.tmpdir_unusable")), "no env.tmpdir_unusable finding")
    left = _left_behind(tmpdir)
    f.check(not left, f"left in TMPDIR: {left[:5]}")
    return f


def tmpdir_read_only(pkg: Path, work: Path) -> Fault:
    f = Fault("TMPDIR read-only", "TMPDIR on `mount --bind -o ro` in a private mount namespace (tempfile alone would fall back to /tmp)")
    tmpdir = work / "tmp-ro"
    tmpdir.mkdir(parents=True)
    report = work / "tmp-ro.json"  # outside the read-only mount: the report itself must still be written
    script = (
        f"mount --bind -o ro {tmpdir} {tmpdir} || exit 97\n"
        f"touch {tmpdir}/probe-write-test 2>/dev/null && exit 98\n"
        f"TMPDIR={tmpdir} exec {sys.executable} -m runtime_probe {pkg} --json {report}\n"
    )
    started = time.monotonic()
    proc = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=300)
    if proc.returncode == 97 or "Operation not permitted" in proc.stderr or "unshare failed" in proc.stderr:
        f.skipped = f"the sandbox forbids a read-only bind mount (tried unshare -m + mount --bind -o ro): {proc.stderr.strip()[:200]}"
        return f
    data = json.loads(report.read_text()) if report.exists() else {"phases": []}
    _common(f, proc, data, time.monotonic() - started)
    f.check(proc.returncode != 98, "the mount is not read-only")
    f.check(proc.returncode == 3, f"exit {proc.returncode}, expected 3 (the tool could not run)")
    finding = _finding(data, "env.tmpdir_unusable")
    f.check(bool(finding), "no env.tmpdir_unusable finding")
    f.check("read-only" in finding.get("message", ""), "the finding does not say the TMPDIR is read-only")
    f.check(time.monotonic() - started < 60, "took over 60 s")
    f.check(not _left_behind(tmpdir), "files left in TMPDIR")
    return f


def memory_limit(pkg: Path, work: Path) -> Fault:
    f = Fault("child out of memory", "load runs under an address-space limit (RLIMIT_AS) 64 MiB above its size")
    tmpdir = work / "tmp"
    tmpdir.mkdir(parents=True)
    proc, report, seconds = _probe(pkg, work, "rlimit", "--no-escalate", TMPDIR=str(tmpdir))
    _common(f, proc, report, seconds)
    failed = _finding(report, "load.error") or _finding(report, "load.crash")
    f.check(proc.returncode == 1 and bool(failed), f"exit {proc.returncode}, no load.error/load.crash")
    f.check("memory" in (failed.get("hint") or ""), "the hint does not name memory")
    f.check(seconds < 120, f"took {seconds:.0f}s")
    f.check(not _left_behind(tmpdir), "files left in TMPDIR")
    return f


def sigterm(pkg: Path, work: Path) -> Fault:
    return _stop_signal(pkg, work, signal.SIGTERM)


def sighup(pkg: Path, work: Path) -> Fault:
    return _stop_signal(pkg, work, signal.SIGHUP)


def _stop_signal(pkg: Path, work: Path, signum: signal.Signals) -> Fault:
    f = Fault(f"{signum.name} to the probe", "the probe is stopped while its child hangs in load (with a grandchild)")
    tmpdir = work / "tmp"
    tmpdir.mkdir(parents=True)
    pidfile, report = work / "grandchild.pid", work / "sigterm.json"
    env = {**os.environ, **inject_env(work, "hang"), "TMPDIR": str(tmpdir), "AOTI_GUARD_TEST_PIDFILE": str(pidfile)}
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "runtime_probe", str(pkg), "--json", str(report)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    while not pidfile.exists() and time.monotonic() - started < 120 and proc.poll() is None:
        time.sleep(0.2)
    proc.send_signal(signum)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        f.problems.append(f"the probe did not end within 60 s of {signum.name}")
    data = json.loads(report.read_text()) if report.exists() else {"phases": []}
    _common(f, subprocess.CompletedProcess(proc.args, proc.returncode, out.decode(), err.decode()), data, time.monotonic() - started)
    f.check(proc.returncode == 3, f"exit {proc.returncode}, expected 3")
    f.check(_finding(data, "env.terminated").get("found") == signum.name, f"no env.terminated finding naming {signum.name}")
    if pidfile.exists():
        grandchild = int(pidfile.read_text())
        deadline = time.monotonic() + 10
        while _alive(grandchild) and time.monotonic() < deadline:
            time.sleep(0.1)
        f.check(not _alive(grandchild), "the child's process group survived")
    else:
        f.problems.append("the child never reached load")
    f.check(not _left_behind(tmpdir), "files left in TMPDIR")
    return f


def _marked(marker: str) -> list[int]:
    """Live processes whose environment carries ``marker`` (every descendant of a run inherits it)."""
    found = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                if pid.isdigit() and marker.encode() in fh.read():
                    found.append(int(pid))
        except OSError:
            continue
    return found


def gdb_grandchild(pkg: Path, work: Path) -> Fault:
    f = Fault("a crash under gdb with a helper process", "load starts a helper process, then SIGSEGV; the ladder reruns it under gdb")
    if shutil.which("gdb") is None:
        f.skipped = "gdb is not installed (.ci/run installs it)"
        return f
    marker = uuid.uuid4().hex
    proc, report, seconds = _probe(pkg, work, "crash_grandchild", "--escalate-timeout", "300", AOTI_GUARD_TEST_MARKER=marker)
    _common(f, proc, report, seconds)
    deadline = time.monotonic() + 5
    while _marked(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = _marked(marker)
    steps = {s["step"]: s for p in report["phases"] if p["name"] == "escalate" for s in p["detail"].get("steps", [])}
    native = steps.get("native", {}).get("outcome")
    f.check(proc.returncode == 1, f"exit {proc.returncode}, expected 1")
    f.check(not left, f"{len(left)} process(es) of the package outlived the probe")
    f.check(native == "crashed (SIGSEGV, under gdb)", f"the native step says {native!r}")
    f.observed += f"; native step: {native}; {len(left)} process(es) left"
    return f


def cwd_modules(pkg: Path, work: Path) -> Fault:
    f = Fault("modules in the working directory", "the probe runs in a folder holding torch.py and runtime_probe.py that exit at import")
    cwd = work / "cwd"
    cwd.mkdir(parents=True)
    (cwd / "torch.py").write_text("raise SystemExit(99)\n")
    (cwd / "runtime_probe.py").write_text("raise SystemExit(98)\n")
    report = work / "cwd.json"
    started = time.monotonic()
    # -P: as the console script starts the probe; the child is what is checked
    argv = [sys.executable, "-P", "-m", "runtime_probe", str(pkg), "--fast", "--json", str(report)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=cwd)
    data = json.loads(report.read_text()) if report.exists() else {"phases": []}
    _common(f, proc, data, time.monotonic() - started)
    f.check(proc.returncode == 0, f"exit {proc.returncode}, expected 0: {_codes(data)}")
    return f


def torch_broken(pkg: Path, work: Path) -> Fault:
    f = Fault("torch crashes at import", "the child's torch (first on PYTHONPATH) dies with SIGSEGV while importing")
    broken = work / "broken" / "torch"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("import ctypes\nctypes.string_at(0)\n")
    proc, report, seconds = _probe(pkg, work, None, PYTHONPATH=str(broken.parent))
    _common(f, proc, report, seconds)
    f.check(proc.returncode == 1, f"exit {proc.returncode}, expected 1")
    f.check(_codes(report) == "env.torch_broken", f"found {_codes(report)}, expected env.torch_broken alone")
    return f


def fifo_package(pkg: Path, work: Path) -> Fault:
    f = Fault("package on a stalling filesystem", "the package path is a FIFO nobody writes to (reads would block forever)")
    work.mkdir(parents=True, exist_ok=True)
    fifo = work / "model.pt2"
    os.mkfifo(fifo)
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "runtime_probe", str(fifo)], capture_output=True, text=True, timeout=120)
    seconds = time.monotonic() - started
    _common(f, proc, {"phases": []}, seconds)
    f.observed = f"exit {proc.returncode}; {proc.stderr.strip().splitlines()[-1][:120] if proc.stderr.strip() else ''}"
    f.check(proc.returncode == 2, f"exit {proc.returncode}, expected 2 (usage error)")
    f.check("not a regular file" in proc.stderr + proc.stdout, "the error does not say the path is not a regular file")
    f.check(seconds < 60, f"took {seconds:.0f}s")
    return f


SCENARIOS: dict[str, Callable[[Path, Path], Fault]] = {
    "hang": hang,
    "oom": oom,
    "flood": flood,
    "read_only": read_only,
    "concurrent": concurrent,
    "leak_after_crash": leak_after_crash,
    "tmpdir_full": tmpdir_full,
    "tmpdir_read_only": tmpdir_read_only,
    "memory_limit": memory_limit,
    "sigterm": sigterm,
    "sighup": sighup,
    "gdb_grandchild": gdb_grandchild,
    "cwd_modules": cwd_modules,
    "torch_broken": torch_broken,
    "fifo_package": fifo_package,
}

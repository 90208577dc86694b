"""Attacks: scripts (issue 40). See tests/hostile/attack.py.

What ``aoti-guard fleet`` renders for the nodes, and ``runtime_probe.node_check`` that it runs on
each: hostile values in every flag that reaches a Slurm script (the scripts are then run under
bash with stub commands, tests/hostile/script_stubs.py: a payload leaves a file named PWNED), the
prolog and a Kubernetes pod's command against a really failing package, the submit script when
pinning a task fails, node_check stopped by SIGTERM while the probe starts or with nowhere to
print its verdict, and ``fleet k8s`` inputs the API server would reject.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tests.hostile.attack import Attack, AttackContext, AttackSucceeded
from tests.hostile.script_stubs import argv_of, calls, payloads_ran, run_script, stub_bin

TIMEOUT = 120  # one CLI run or one real --fast probe (a few seconds here)
_NODE_CHECK = (sys.executable, "-m", "runtime_probe.node_check")


def _run(argv: Sequence[str], cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv), capture_output=True, text=True, timeout=TIMEOUT, cwd=cwd, env={**os.environ, **env}, stdin=subprocess.DEVNULL
    )


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return _run([sys.executable, "-m", "aoti_guard", *args], **env)


def _crashed(proc: subprocess.CompletedProcess[str], what: str) -> None:
    if "Traceback" in proc.stderr or "this is a bug" in proc.stderr:
        raise AttackSucceeded(f"{what}: a traceback (exit {proc.returncode}): {proc.stderr.strip().splitlines()[-1][:200]}")


def _first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0][:160]


def _failing_copy(ctx: AttackContext, name: str) -> Path:
    """A copy of the real package with one byte flipped in the middle (inside its .so): the probe fails it."""
    path = ctx.package_copy(name)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x20
    path.write_bytes(bytes(data))
    return path


# --- generated scripts: hostile values in fleet slurm's flags ------------------------------------


def _run_slurm_scripts(ctx: AttackContext, out: Path) -> list[str]:
    """Every script fleet slurm wrote, under bash with stubs; the names of those a payload ran in."""
    stubs = stub_bin(ctx.tmp / "stubs")
    ran = []
    for name in ("probe.sbatch", "submit.sh", "prolog.sh"):
        before = set(payloads_ran(ctx.tmp))
        run_script(out / name, stubs, ctx.tmp / "run", timeout=60)
        if set(payloads_ran(ctx.tmp)) - before:
            ran.append(name)
    return ran


def _slurm_value(flag: str, value: Callable[[Path], str], refused: bool) -> Callable[[AttackContext], str]:
    """fleet slurm with ``flag`` given ``value(tmp)``: refused (exit 2, naming the flag) when
    ``refused``, else accepted and quoted: the value reaches node_check literally and no payload runs."""

    def run(ctx: AttackContext) -> str:
        hostile = value(ctx.tmp)
        args = {"PKG": str(ctx.tmp / "m.pt2"), "--reports": str(ctx.tmp / "reports")}
        if flag in args:
            args[flag] = hostile
        extra = [] if flag in args else [flag, hostile]
        out = ctx.tmp / "out"
        proc = _cli("fleet", "slurm", args["PKG"], "--reports", args["--reports"], "--nodelist", "node01", "-o", str(out), *extra)
        _crashed(proc, f"fleet slurm {flag}")
        if proc.returncode == 0:
            ran = _run_slurm_scripts(ctx, out)
            if ran:
                raise AttackSucceeded(f"exit 0, and the payload in {flag} ran in {', '.join(ran)} (the prolog runs as root)")
            if refused:
                raise AttackSucceeded(f"{flag} with a control character was accepted (exit 0) into the scripts")
            argv = argv_of(ctx.tmp / "stubs", "python")  # the prolog's node_check, the last python run
            if args["PKG"] not in argv or args["--reports"] not in argv:
                raise AttackSucceeded(f"no payload ran, but node_check got {argv!r}, not the values given")
            return f"accepted and quoted: no payload ran in any script; node_check got {flag} literally"
        if refused and proc.returncode == 2 and flag in proc.stderr:
            return f"refused, exit 2: {_first_line(proc.stderr)}"
        raise AttackSucceeded(f"exit {proc.returncode} (expected {'2' if refused else '0'}): {_first_line(proc.stderr)}")

    return run


def _submit_pin_fails(ctx: AttackContext) -> str:
    stubs = stub_bin(ctx.tmp / "stubs")
    env = {"PATH": f"{stubs / 'bin'}{os.pathsep}{os.environ['PATH']}", "STUB_LOG": str(stubs / "log"), "STUB_BAD_NODE": "gpu02"}
    proc = _cli(
        "fleet", "slurm", "/shared/m.pt2", "--reports", str(ctx.tmp / "reports"), "--nodelist", "gpu01,gpu02",
        "-o", str(ctx.tmp / "out"), "--submit", **env,
    )  # fmt: skip
    _crashed(proc, "fleet slurm --submit")
    made = calls(stubs)
    if any(c.startswith("scontrol release") for c in made):
        raise AttackSucceeded(f"pinning task 1 failed, then the held array was released with it unpinned: {made}")
    if proc.returncode == 0:
        raise AttackSucceeded("pinning a task failed, yet --submit exited 0")
    if "scancel 4242" not in made or "cancelled while held" not in proc.stderr:
        raise AttackSucceeded(f"the array was neither cancelled nor said to be held: {made}; {_first_line(proc.stderr)}")
    return f"exit {proc.returncode}; the held array was cancelled (scancel 4242), never released, and the command says so"


# --- verdicts: the rendered commands against a really failing package -----------------------------


def _prolog_drains(ctx: AttackContext) -> str:
    results = []
    for name, pkg, expected in (("bad", _failing_copy(ctx, "bad.pt2"), 1), ("good", ctx.package_copy("good.pt2"), 0)):
        out = ctx.tmp / f"out-{name}"
        proc = _cli(
            "fleet", "slurm", str(pkg), "--reports", str(ctx.tmp / f"reports-{name}"), "--nodelist", "node01",
            "--python", sys.executable, "-o", str(out),
        )  # fmt: skip
        if proc.returncode != 0:
            raise AttackSucceeded(f"fleet slurm refused an honest plan (exit {proc.returncode}): {_first_line(proc.stderr)}")
        stubs = stub_bin(ctx.tmp / f"stubs-{name}")
        done = run_script(out / "prolog.sh", stubs, ctx.tmp / "run", timeout=TIMEOUT)
        log = (stubs / "log" / "logger").read_text() if (stubs / "log" / "logger").exists() else ""
        if done.returncode != expected:
            what = "kept a node the package fails on" if expected else "drained a node the package passes on"
            raise AttackSucceeded(f"the prolog {what} (exit {done.returncode}): {log.strip() or done.stderr.strip()[-200:]}")
        if "no verdict" in log:
            raise AttackSucceeded(f"the prolog gave no verdict on the {name} package: {log.strip()}")
        results.append(f"{name}: exit {done.returncode}")
    return "the real node_check ran under the prolog: " + ", ".join(results) + " (drained, kept)"


def _probe_args_dash(ctx: AttackContext) -> str:
    proc = _run([*_NODE_CHECK, str(ctx.package_copy()), "--node", "node01", "--probe-args", "--fast"])
    if proc.returncode != 0:
        raise AttackSucceeded(f"node_check --probe-args --fast on a passing package: exit {proc.returncode}: {_first_line(proc.stderr)}")
    return "exit 0: --fast reached the probe"


def _k8s_pod_command(ctx: AttackContext) -> str:
    pkg, out = ctx.package_copy(), ctx.tmp / "fleet.yaml"
    proc = _cli("fleet", "k8s", str(pkg), "--image", "img:1", "--select", "a=b", "--count", "1", "--probe-args=--fast", "-o", str(out))
    if proc.returncode != 0:
        raise AttackSucceeded(f"fleet k8s refused an honest plan (exit {proc.returncode}): {_first_line(proc.stderr)}")
    job = json.loads(out.read_text().split("\n---\n", 1)[1])
    command: list[str] = job["spec"]["template"]["spec"]["containers"][0]["command"]
    # as the kubelet would run it: $(NODE_NAME) from the downward API, $$ one $; this host's python
    argv = [sys.executable if i == 0 else w.replace("$(NODE_NAME)", "node01").replace("$$", "$") for i, w in enumerate(command)]
    done = _run(argv)
    if done.returncode != 0:
        raise AttackSucceeded(f"the pod's command exits {done.returncode} on a passing package (no verdict): {_first_line(done.stderr)}")
    return "the rendered pod command exits 0 on a passing package: --probe-args=--fast reached the probe"


def _stdout_closed(ctx: AttackContext) -> str:
    pkg = ctx.package_copy()
    closed = _run(["bash", "-c", 'exec "$@" >&-', "bash", *_NODE_CHECK, str(pkg), "--probe-args=--fast"])
    piped = _run(["bash", "-c", '"$@" | true; exit "${PIPESTATUS[0]}"', "bash", *_NODE_CHECK, str(pkg), "--probe-args=--fast"])
    for what, proc in (("closed", closed), ("a broken pipe", piped)):
        _crashed(proc, f"node_check with stdout {what}")
        if proc.returncode != 2:
            raise AttackSucceeded(f"node_check with stdout {what}: exit {proc.returncode}, not 2 (no verdict, retry)")
    return "exit 2 (no verdict) with stdout closed and with a broken pipe, no traceback"


# --- signals: SIGTERM while node_check starts the probe -------------------------------------------

_SIGTERM_IN_POPEN = """
import os, signal, subprocess, sys
real_init = subprocess.Popen.__init__
def init(self, *a, **k):
    real_init(self, *a, **k)  # the probe is forked; Popen has not returned yet
    open(os.environ["PIDFILE"], "w").write(str(self.pid))
    os.kill(os.getpid(), signal.SIGTERM)
subprocess.Popen.__init__ = init
from runtime_probe import node_check
sys.exit(node_check.main(sys.argv[1:]))
"""


def _sigterm_in_popen(ctx: AttackContext) -> str:
    pidfile = ctx.tmp / "probe.pid"
    proc = _run([sys.executable, "-c", _SIGTERM_IN_POPEN, str(ctx.package_copy()), "--probe-args=--fast"], PIDFILE=str(pidfile))
    _crashed(proc, "SIGTERM while node_check starts the probe")
    if proc.returncode != 2:
        raise AttackSucceeded(f"SIGTERM while the probe started: exit {proc.returncode}, not 2 (1 drains the node)")
    pid = int(pidfile.read_text()) if pidfile.exists() else 0
    try:
        if pid:
            os.kill(pid, 0)
            os.killpg(pid, signal.SIGKILL)
            raise AttackSucceeded(f"exit 2, but the probe (pid {pid}) was left running in its own session")
    except ProcessLookupError:
        pass
    return "exit 2 (no verdict), the probe killed, no traceback"


# --- fleet inputs: fleet k8s ----------------------------------------------------------------------


def _k8s_refused(args: Callable[[Path], list[str]], message: str) -> Callable[[AttackContext], str]:
    def run(ctx: AttackContext) -> str:
        proc = _cli("fleet", "k8s", *args(ctx.tmp), "--image", "img:1", "--run-id", "r1", "-o", str(ctx.tmp / "fleet.yaml"))
        _crashed(proc, "fleet k8s")
        if proc.returncode == 0:
            raise AttackSucceeded("rendered (exit 0) a manifest the API server or the runtime refuses")
        if proc.returncode != 2 or message not in proc.stderr or "hint:" not in proc.stderr:
            raise AttackSucceeded(f"exit {proc.returncode}, expected a usage error saying {message!r}: {_first_line(proc.stderr)}")
        return f"refused, exit 2: {_first_line(proc.stderr)}"

    return run


def _deep_nodes(tmp: Path) -> list[str]:
    path = tmp / "nodes.json"
    path.write_text('{"items": ' + "[" * 100_000 + "]" * 100_000 + "}")
    return ["/models/m.pt2", "--nodes-json", str(path)]


def _slug_collision(ctx: AttackContext) -> str:
    products = ("NVIDIA-H100", "nvidia-h100", "NVIDIA_H100")
    items = [{"metadata": {"name": f"n{i}", "labels": {"nvidia.com/gpu.product": p}}} for i, p in enumerate(products)]
    (ctx.tmp / "nodes.json").write_text(json.dumps({"items": items}))
    out = ctx.tmp / "fleet.yaml"
    proc = _cli("fleet", "k8s", "/models/m.pt2", "--image", "img:1", "--nodes-json", str(ctx.tmp / "nodes.json"), "-o", str(out))
    _crashed(proc, "fleet k8s")
    if proc.returncode != 0:
        return f"refused, exit {proc.returncode}: {_first_line(proc.stderr)}"
    docs: list[dict[str, Any]] = [json.loads(d) for d in out.read_text().split("\n---\n")[1:]]
    names = [d["metadata"]["name"] for d in docs]
    if len(set(names)) != len(products):
        raise AttackSucceeded(f"{len(products)} node classes, Job names {names}: kubectl apply keeps one Job per name")
    return f"{len(products)} classes, {len(set(names))} Jobs with distinct names"


def _a(name: str, klass: str, what: str, expected: str, run: Callable[[AttackContext], str]) -> Attack:
    return Attack(name=name, klass=klass, what=what, expected=expected, run=run)


_REFUSED = "refused: usage error (exit 2) naming the flag; no script written"
_QUOTED = "accepted and quoted: no payload runs in any script; the value reaches node_check literally"
GS, FI, VD, SG = "generated scripts", "fleet inputs", "verdicts", "signals"

ATTACKS: list[Attack] = [
    _a("slurm-pkg-newline", GS, "PKG=$'/shared/m.pt2\\ntouch PWNED\\n#'", _REFUSED,
       _slurm_value("PKG", lambda t: f"{t}/m.pt2\ntouch PWNED\n#", refused=True)),
    _a("slurm-reports-command-substitution", GS, "--reports '/shared/$(touch PWNED)'", _QUOTED,
       _slurm_value("--reports", lambda t: f"{t}/shared/$(touch PWNED)", refused=False)),
    _a("slurm-reports-double-quote", GS, "--reports '/shared/r\"; touch PWNED; echo \"'", _QUOTED,
       _slurm_value("--reports", lambda t: f'{t}/r"; touch PWNED; echo "', refused=False)),
    _a("slurm-mem-newline", GS, "--mem $'8G\\ntouch PWNED'", _REFUSED,
       _slurm_value("--mem", lambda t: "8G\ntouch PWNED", refused=True)),
    _a("slurm-partition-newline", GS, "--partition $'p\\ntouch PWNED'", _REFUSED,
       _slurm_value("--partition", lambda t: "p\ntouch PWNED", refused=True)),
    _a("slurm-python-newline", GS, "--python $'python3\\ntouch PWNED'", _REFUSED,
       _slurm_value("--python", lambda t: "python3\ntouch PWNED", refused=True)),
    _a("slurm-submit-pin-fails", GS, "--submit, one node misspelt: scontrol update fails for task 1",
       "the held array is cancelled (never released unpinned); exit 3 saying so", _submit_pin_fails),
    _a("slurm-prolog-failing-package", VD, "the rendered prolog, real node_check, a package with a flipped byte",
       "prolog exits 1 (drain) for the failing package, 0 (keep) for the passing one", _prolog_drains),
    _a("node-check-probe-args-dash", VD, "node_check PKG --probe-args --fast", "exit 0: --fast reaches the probe",
       _probe_args_dash),
    _a("k8s-probe-args-fast", VD, "fleet k8s --probe-args=--fast; the pod's command run here",
       "exit 0 on a passing package (was 2 on every pod: retried, no verdict)", _k8s_pod_command),
    _a("node-check-stdout-closed", VD, "node_check with stdout closed, and into a broken pipe",
       "exit 2 (no verdict, retry), never 1 (the node drained)", _stdout_closed),
    _a("node-check-sigterm-in-popen", SG, "SIGTERM to node_check after the probe's fork, before Popen returns",
       "exit 2 (no verdict), the probe killed, no traceback", _sigterm_in_popen),
    _a("k8s-nodes-json-100k-deep", FI, "--nodes-json: 100,000 nested arrays", "usage error (exit 2), no traceback",
       _k8s_refused(_deep_nodes, "nested too deeply")),
    _a("k8s-class-slug-collision", FI, "nodes labelled NVIDIA-H100, nvidia-h100, NVIDIA_H100",
       "one Job per class, names distinct", _slug_collision),
    _a("k8s-namespace-not-dns-label", FI, "--namespace Prod_NS", "usage error (exit 2) with a hint",
       _k8s_refused(lambda t: ["/models/m.pt2", "--daemonset", "--namespace", "Prod_NS"], "not a Kubernetes namespace")),
    _a("k8s-host-path-relative", FI, "--host-path models", "usage error (exit 2) with a hint",
       _k8s_refused(lambda t: ["/models/m.pt2", "--daemonset", "--host-path", "models"], "must be an absolute folder")),
    _a("k8s-package-mounted-at-root", FI, "PKG /model.pt2 --pvc models (its volume mounted at /)", "usage error (exit 2) with a hint",
       _k8s_refused(lambda t: ["/model.pt2", "--daemonset", "--pvc", "models"], "mounted at its folder, /,")),
]  # fmt: skip

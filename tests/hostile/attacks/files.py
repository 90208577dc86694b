"""Attacks: files (issue 40). See tests/hostile/attack.py.

Findings 6, 11 and 14 of the issue: outputs that replace inputs (the pre-flight's report over the
package or its key, ``$GITHUB_STEP_SUMMARY`` over the package, ``sign LINK``), commands racing for
one file (keygen, sign), a pre-flight that passes without probing, and outputs and signals that
hang the probe (a FIFO without a reader as ``--log-file`` or the step summary, two SIGTERMs).

Every attack runs the real command line in a child process, bounded by a timeout: a hang is the
attack succeeding, never a hung suite. The races start their racers together (each waits at a
gate after its imports) and slow the step that the race is about (key generation, the signing) by
0.3 s, as a loaded machine would: without a lock every racer overlaps every other.
"""

from __future__ import annotations

import hashlib
import os
import re
import select
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

from tests.hostile.attack import Attack, AttackContext, AttackSucceeded

REPO = Path(__file__).resolve().parents[3]
TIMEOUT_S = 60.0


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_STEP_SUMMARY", "AOTI_PREFLIGHT_ARGS", "AOTI_PREFLIGHT_REPORT")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    return {**env, **extra}


def _run(ctx: AttackContext, module: str, *args: str, timeout: float = TIMEOUT_S, **env: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=timeout, cwd=ctx.tmp, env=_env(**env)
        )
    except subprocess.TimeoutExpired:
        raise AttackSucceeded(f"python -m {module} {' '.join(args)} was still running after {timeout:g}s: it hung") from None


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _verifies(ctx: AttackContext, pkg: Path, pub: Path) -> bool:
    return _run(ctx, "runtime_probe", str(pkg), "--verify-only", "--public-key", str(pub), "-q").returncode == 0


def _server(ctx: AttackContext) -> tuple[list[str], Path]:
    flag = ctx.tmp / "server-ran"
    return ["--", sys.executable, "-c", f"open({str(flag)!r}, 'w')"], flag


# --- lost files ---------------------------------------------------------------------------


def preflight_report_over_the_package(ctx: AttackContext) -> str:
    pkg = ctx.package_copy()
    before = _sha(pkg)
    server, ran = _server(ctx)
    proc = _run(ctx, "runtime_probe.preflight", *server, AOTI_PACKAGE=str(pkg), AOTI_PREFLIGHT_REPORT=str(pkg))
    if not pkg.exists():
        raise AttackSucceeded(f"the package was deleted (pre-flight exit {proc.returncode})")
    if _sha(pkg) != before:
        raise AttackSucceeded("the package was overwritten by the pre-flight's report")
    if proc.returncode == 0 or ran.exists():
        raise AttackSucceeded("the pre-flight passed and started the server")
    return f"refused (exit {proc.returncode}), package intact: {proc.stderr.strip().splitlines()[0][:120]}"


def preflight_report_over_the_public_key(ctx: AttackContext) -> str:
    from aoti_guard.pt2.signing import generate_key

    pkg = ctx.package_copy()
    keys = generate_key(ctx.tmp / "release.key")
    pub = Path(keys.public)
    before = _sha(pub)
    proc = _run(
        ctx,
        "runtime_probe.preflight",
        AOTI_PACKAGE=str(pkg),
        AOTI_PREFLIGHT_REPORT=str(pub),
        AOTI_PREFLIGHT_ARGS=f"--fast --public-key {pub}",
    )
    if not pub.exists() or _sha(pub) != before:
        raise AttackSucceeded(f"release.pub was {'deleted' if not pub.exists() else 'replaced by the report'} (exit {proc.returncode})")
    if proc.returncode == 0:
        raise AttackSucceeded("the pre-flight passed")
    return f"refused (exit {proc.returncode}), release.pub intact"


def step_summary_over_the_package(ctx: AttackContext) -> str:
    pkg = ctx.package_copy()
    before = _sha(pkg)
    proc = _run(ctx, "runtime_probe", str(pkg), "--verify-only", "-q", GITHUB_STEP_SUMMARY=str(pkg))
    if _sha(pkg) != before:
        raise AttackSucceeded(f"the Markdown summary was appended to the package (exit {proc.returncode})")
    if "summary was not appended" not in proc.stderr:
        raise AttackSucceeded(f"the summary was skipped without a word: {proc.stderr[-300:]!r}")
    return f"summary refused with a warning, package intact (exit {proc.returncode})"


def sign_through_a_symlink(ctx: AttackContext) -> str:
    from aoti_guard.pt2.signing import generate_key

    (ctx.tmp / "releases").mkdir()
    target = ctx.package_copy("releases/model-1.pt2")
    link = ctx.tmp / "current.pt2"
    link.symlink_to("releases/model-1.pt2")
    keys = generate_key(ctx.tmp / "release.key")
    proc = _run(ctx, "aoti_guard", "sign", str(link), "--key", keys.private)
    if not link.is_symlink():
        raise AttackSucceeded(f"the link was replaced by a signed copy (exit {proc.returncode}); the release it named is unsigned")
    if proc.returncode == 0 and not _verifies(ctx, target, Path(keys.public)):
        raise AttackSucceeded("sign said it signed, but the file the link names does not verify")
    if proc.returncode != 0 and "hint:" not in proc.stderr:
        raise AttackSucceeded(f"refused without a hint: {proc.stderr[-300:]!r}")
    return f"exit {proc.returncode}: the link stays a link and its target {'is signed' if proc.returncode == 0 else 'is untouched'}"


# --- concurrency --------------------------------------------------------------------------

RACER = """
import os, sys, time
what, gate, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
if what == "keygen":
    from cryptography.hazmat.primitives.asymmetric import ed25519
    generate = ed25519.Ed25519PrivateKey.generate
    ed25519.Ed25519PrivateKey.generate = staticmethod(lambda: (time.sleep(0.3), generate())[1])
else:
    from aoti_guard.pt2 import signing
    sign_manifest = signing.sign_manifest
    signing.sign_manifest = lambda *a, **k: (time.sleep(0.3), sign_manifest(*a, **k))[1]
from aoti_guard.cli import main
print("ready", flush=True)
while not os.path.exists(gate):
    time.sleep(0.001)
sys.exit(main(argv))
"""


def _race(ctx: AttackContext, what: str, argvs: list[list[str]]) -> list[tuple[int, str, str]]:
    """Run ``aoti-guard ARGV`` for each argv at once; (exit code, stdout, stderr) of each."""
    gate = ctx.tmp / f"{what}.go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, what, str(gate), *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ctx.tmp,
            env=_env(),
        )
        for argv in argvs
    ]
    try:
        for p in procs:
            assert p.stdout is not None
            ready, _, _ = select.select([p.stdout], [], [], TIMEOUT_S)
            if not ready or p.stdout.readline() != "ready\n":
                raise AttackSucceeded(f"a racer did not start: {p.communicate(timeout=5)[1][-300:]!r}")
        gate.touch()
        results = []
        for p in procs:
            out, err = p.communicate(timeout=TIMEOUT_S)
            results.append((p.returncode, out, err))
        return results
    except subprocess.TimeoutExpired:
        raise AttackSucceeded(f"a racing {what} was still running after {TIMEOUT_S:g}s") from None
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def concurrent_keygens(ctx: AttackContext) -> str:
    from cryptography.hazmat.primitives import serialization

    key = ctx.tmp / "k"
    results = _race(ctx, "keygen", [["keygen", "--key", str(key)]] * 6)
    winners = [out for code, out, _ in results if code == 0]
    if len(winners) != 1:
        raise AttackSucceeded(f"{len(winners)} of 6 concurrent keygens said they wrote {key.name}")
    losers = [err for code, _, err in results if code != 0]
    if not all(("wrote nothing" in err or "already exists" in err) and "hint:" in err for err in losers):
        raise AttackSucceeded(f"a losing keygen did not say why: {losers!r}"[:400])
    private = serialization.load_pem_private_key(key.read_bytes(), None)
    public = serialization.load_pem_public_key((ctx.tmp / "k.pub").read_bytes())
    raw = serialization.Encoding.Raw, serialization.PublicFormat.Raw
    if private.public_key().public_bytes(*raw) != public.public_bytes(*raw):  # type: ignore[union-attr]
        raise AttackSucceeded("k.pub is not k's public key: the pair comes from two runs")
    kid = "sha256:" + hashlib.sha256(public.public_bytes(*raw)).hexdigest()
    if kid not in winners[0]:
        raise AttackSucceeded(f"the winner reported another key than the one in k: {winners[0]!r}")
    return "one keygen of 6 wrote k and k.pub (a matching pair); the other 5 said they wrote nothing (exit 2)"


_SIGNED = re.compile(r"signed .* with key (sha256:[0-9a-f]+)(?: \(replaced a signature by (sha256:[0-9a-f]+)\))?")


def concurrent_signs(ctx: AttackContext) -> str:
    from aoti_guard.pt2.signing import generate_key

    pkg = ctx.package_copy()
    keys = [generate_key(ctx.tmp / f"k{i}") for i in range(5)]
    results = _race(ctx, "sign", [["sign", str(pkg), "--key", k.private] for k in keys])
    said: list[tuple[str, str | None]] = []
    for code, out, err in results:
        if code == 0:
            m = _SIGNED.search(out)
            if not m:
                raise AttackSucceeded(f"a sign succeeded without saying what it signed: {out!r}")
            said.append((m.group(1), m.group(2)))
        elif "signed nothing" not in err or "hint:" not in err:
            raise AttackSucceeded(f"a losing sign did not say it lost: {err[-300:]!r}")
    # every success but the last one must have been replaced, and said so by the one that replaced it
    replaced = [r for _, r in said if r is not None]
    standing = [k for k, _ in said if k not in replaced]
    if len(standing) != 1 or len(replaced) != len(said) - 1:
        raise AttackSucceeded(f"{len(said)} signs said they signed, {len(replaced)} said they replaced one: a success was lost silently")
    last = next(k for k in keys if k.key_id == standing[0])
    if not _verifies(ctx, pkg, Path(last.public)):
        raise AttackSucceeded(f"the package does not verify with {standing[0]}, the signature the signs say is there")
    return f"{len(said)} of 5 signs succeeded ({len(replaced)} replaced earlier ones, said so); the others said they signed nothing"


# --- verdicts -----------------------------------------------------------------------------


def preflight_args_that_do_not_probe(ctx: AttackContext) -> str:
    pkg = ctx.package_copy()
    seen = []
    for args in ("--version", "--vers", "--help", "--verify-only"):
        server, ran = _server(ctx)
        report = ctx.tmp / "pf" / "report.json"
        proc = _run(
            ctx, "runtime_probe.preflight", *server, AOTI_PACKAGE=str(pkg), AOTI_PREFLIGHT_REPORT=str(report), AOTI_PREFLIGHT_ARGS=args
        )
        if proc.returncode == 0 or ran.exists():
            raise AttackSucceeded(f"AOTI_PREFLIGHT_ARGS={args}: the pre-flight passed (exit {proc.returncode}) without probing")
        if Path(str(report) + ".ok").exists():
            raise AttackSucceeded(f"AOTI_PREFLIGHT_ARGS={args}: a passing marker was written")
        seen.append(f"{args}: exit {proc.returncode}")
    return "; ".join(seen)


# --- FIFOs and signals --------------------------------------------------------------------


def _fifo(ctx: AttackContext) -> Path:
    path = ctx.tmp / "no-reader.fifo"
    os.mkfifo(path)
    return path


def step_summary_fifo_without_reader(ctx: AttackContext) -> str:
    pkg, fifo = ctx.package_copy(), _fifo(ctx)
    started = time.monotonic()
    proc = _run(ctx, "runtime_probe", str(pkg), "--verify-only", "-q", timeout=40, GITHUB_STEP_SUMMARY=str(fifo))
    if proc.returncode != 0:
        raise AttackSucceeded(f"the probe's verdict changed: exit {proc.returncode}: {proc.stderr[-300:]!r}")
    if not stat.S_ISFIFO(os.lstat(fifo).st_mode):
        raise AttackSucceeded("the FIFO was replaced")
    return f"exit 0 in {time.monotonic() - started:.0f}s, with a warning: {proc.stderr.strip().splitlines()[-1][:100]}"


def log_file_fifo_without_reader(ctx: AttackContext) -> str:
    pkg, fifo = ctx.package_copy(), _fifo(ctx)
    started = time.monotonic()
    proc = _run(ctx, "runtime_probe", str(pkg), "--verify-only", "-q", "--log-file", str(fifo), timeout=40)
    if proc.returncode != 0:
        raise AttackSucceeded(f"the probe's verdict changed: exit {proc.returncode}: {proc.stderr[-300:]!r}")
    if "log" not in proc.stderr:
        raise AttackSucceeded("the log was dropped without a warning")
    return f"exit 0 in {time.monotonic() - started:.0f}s, with a warning: {proc.stderr.strip().splitlines()[0][:100]}"


def two_sigterms_while_a_fifo_blocks(ctx: AttackContext) -> str:
    pkg, fifo = ctx.package_copy(), _fifo(ctx)
    proc = subprocess.Popen(
        [sys.executable, "-m", "runtime_probe", str(pkg), "--verify-only"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ctx.tmp,
        env=_env(GITHUB_STEP_SUMMARY=str(fifo)),
    )
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + TIMEOUT_S
        while "[archive]" not in proc.stderr.readline():  # the stop signals' handlers are installed by now
            if time.monotonic() > deadline or proc.poll() is not None:
                raise AttackSucceeded(f"the probe never started its archive phase (exit {proc.poll()})")
        time.sleep(1.5)  # the archive phase is done: the report goes to the step summary, the FIFO
        proc.send_signal(signal.SIGTERM)
        time.sleep(1.0)  # the first signal's cleanup writes the error report: to the FIFO again
        proc.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        try:
            proc.wait(timeout=40)
        except subprocess.TimeoutExpired:
            raise AttackSucceeded("two SIGTERMs did not end the probe within 40s: only SIGKILL would") from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if proc.returncode != 3:
        raise AttackSucceeded(f"the probe ended with {proc.returncode}, not the terminated exit code 3")
    return f"exit 3, {time.monotonic() - sent:.0f}s after the second SIGTERM"


ATTACKS: list[Attack] = [
    Attack(
        "preflight-report-over-package",
        "lost files",
        "AOTI_PREFLIGHT_REPORT names the package itself",
        "refused before anything is removed (exit 2), package intact, server not started",
        preflight_report_over_the_package,
    ),
    Attack(
        "preflight-report-over-public-key",
        "lost files",
        "AOTI_PREFLIGHT_REPORT names the release.pub the probe verifies with",
        "refused (exit 2), release.pub intact",
        preflight_report_over_the_public_key,
    ),
    Attack(
        "step-summary-over-package",
        "lost files",
        "$GITHUB_STEP_SUMMARY names the package being probed",
        "the summary is not appended (a warning), package intact",
        step_summary_over_the_package,
    ),
    Attack(
        "sign-through-symlink",
        "lost files",
        "aoti-guard sign LINK, LINK a symlink to the release",
        "the link's target is signed in place, the link stays a link",
        sign_through_a_symlink,
    ),
    Attack(
        "keygen-race",
        "concurrency",
        "6 concurrent keygen --key k (key generation slowed by 0.3 s)",
        "exactly one succeeds; k.pub is k's public key; the others say they wrote nothing (exit 2)",
        concurrent_keygens,
    ),
    Attack(
        "sign-race",
        "concurrency",
        "5 concurrent sign of one package, 5 keys (signing slowed by 0.3 s)",
        "every success is the signature in the file or said it was replaced; losers say they signed nothing; it verifies",
        concurrent_signs,
    ),
    Attack(
        "preflight-args-no-probe",
        "verdicts",
        "AOTI_PREFLIGHT_ARGS=--version / --vers / --help / --verify-only",
        "the pre-flight fails closed (exit 2), no server, no .ok marker",
        preflight_args_that_do_not_probe,
    ),
    Attack(
        "step-summary-fifo",
        "FIFOs",
        "$GITHUB_STEP_SUMMARY is a FIFO without a reader",
        "the probe ends with its verdict (exit 0) and a warning, in bounded time",
        step_summary_fifo_without_reader,
    ),
    Attack(
        "log-file-fifo",
        "FIFOs",
        "--log-file is a FIFO without a reader",
        "the probe runs without the log (a warning) and ends with its verdict, in bounded time",
        log_file_fifo_without_reader,
    ),
    Attack(
        "two-sigterms-fifo-cleanup",
        "signals",
        "two SIGTERMs while the report's write to a reader-less FIFO blocks",
        "the probe ends with exit 3 (terminated) within a bound",
        two_sigterms_while_a_fifo_blocks,
    ),
]

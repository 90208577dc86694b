"""Attacks: parsers (issue 40). See tests/hostile/attack.py.

Each builds a hostile package (or report) from the real ``static`` package and runs the real
product on it in a process of its own, under a time limit: ``python -m runtime_probe``
(--verify-only), ``python -m runtime_probe.inspect``, ``python -m aoti_guard diff``, and
``runtime_probe.load`` in a child. A parser that hangs is killed at its bound and the attack
succeeds; so does a traceback, a verdict for another version of the file, or raw control
characters on the terminal.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime_probe.runtime import layout
from tests.hostile.attack import Attack, AttackContext, AttackSucceeded
from tests.hostile.make_corpus import rewrite
from tests.unit.fakepkg import replacing, write_key_pair

REPO = Path(__file__).resolve().parents[3]
HUGE = "1" + "0" * 400  # json reads it as an exact int; float() of it raised OverflowError
_RAW = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u200e\u200f\u202a-\u202e\u2066-\u2069]")  # raw controls and bidi


@dataclass(frozen=True)
class Ran:
    argv: Sequence[str]
    code: int
    out: str
    err: str
    seconds: float

    def json(self) -> Any:
        try:
            return json.loads(self.out)
        except ValueError:
            raise AttackSucceeded(f"{' '.join(self.argv[:2])} wrote no JSON report (exit {self.code}): {self.err[-300:]}") from None


def _run(
    argv: Sequence[str],
    *,
    timeout: float,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    fsize: int | None = None,
    label: str | None = None,
) -> Ran:
    """``python ARGV`` in a session of its own, killed (with anything it started) past ``timeout``;
    a timeout or a traceback is the attack's success. ``label`` names it in messages."""
    label = label or " ".join(map(str, argv[:2]))
    environ = {**os.environ, **(env or {})}
    environ["PYTHONPATH"] = os.pathsep.join([*((env or {}).get("PYTHONPATH", "").split(os.pathsep)), str(REPO)]).strip(os.pathsep)

    def limits() -> None:
        if fsize is not None:  # a file-size limit: the copy of a file that is no zip hits it
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        cwd=cwd,
        env=environ,
        start_new_session=True,
        preexec_fn=limits,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise AttackSucceeded(f"{label} was still running after {timeout:g} s (killed)") from None
    ran = Ran(list(map(str, argv)), proc.returncode, out, err, time.monotonic() - started)
    if "Traceback (most recent call last)" in out + err:
        last = (err or out).strip().splitlines()[-1:]
        raise AttackSucceeded(f"{label} crashed: {last[0][:200] if last else '?'}")
    return ran


def _manifest(pkg: Path) -> dict[str, Any]:
    with zipfile.ZipFile(pkg) as zf:
        name = next(n for n in zf.namelist() if n.endswith(layout.MANIFEST))
        doc: dict[str, Any] = json.loads(zf.read(name))
    return doc


def _with_manifest(ctx: AttackContext, name: str, raw: bytes) -> Path:
    """A copy of the static package whose manifest is ``raw`` (CRCs consistent: only the reader objects)."""
    return rewrite(ctx.static_package, ctx.tmp / name, lambda n, data: raw if n.endswith(layout.MANIFEST) else data)


def _number_in_manifest(ctx: AttackContext, name: str, place: Callable[[dict[str, Any]], None], number: str) -> Path:
    """The manifest with ``place`` setting one value to a marker, the marker then replaced by the
    raw JSON number text ``number`` (json.dumps cannot write 400 digits as a float)."""
    m = copy.deepcopy(_manifest(ctx.static_package))
    place(m)
    return _with_manifest(ctx, name, json.dumps(m, indent=1).replace('"@@NUMBER@@"', number).encode())


def _huge_atol(m: dict[str, Any]) -> None:
    m["golden"]["tolerances"][0]["atol"] = "@@NUMBER@@"


def _codes(report: Mapping[str, Any]) -> list[str]:
    return [f["code"] for p in report.get("phases", []) for f in p.get("findings", []) if f.get("severity") == "error"]


def _verify_only(ctx: AttackContext, pkg: Path, *, timeout: float = 60, **kw: Any) -> tuple[Ran, dict[str, Any]]:
    ran = _run(["-m", "runtime_probe", str(pkg), "--verify-only", "--json", "-", "-q"], timeout=timeout, cwd=ctx.tmp, **kw)
    report: dict[str, Any] = ran.json()
    return ran, report


def _expect_finding(ran: Ran, report: Mapping[str, Any], code: str, words: str = "") -> str:
    codes = _codes(report)
    message = next((f["message"] for p in report["phases"] for f in p["findings"] if f["code"] == code), "")
    if code not in codes or words not in message:
        raise AttackSucceeded(f"expected {code} ({words!r}), the probe said exit {ran.code}: {codes}")
    if ran.code != 1:
        raise AttackSucceeded(f"{code} found but exit {ran.code} (expected 1: the package fails)")
    return f"{code} in {ran.seconds:.1f} s: {message[:140]}"


# ---- parse-time bounds ----------------------------------------------------------------------


def _twin_wrapper(ctx: AttackContext, payload: str) -> Path:
    """The static package with a debug twin whose wrapper.cpp is ``payload``: the archive phase
    reads a twin's wrapper (does its .so hold the weights?) before any hash is compared."""
    m = _manifest(ctx.static_package)
    m["debug_twin"] = {
        "model_name": "debug_twin",
        "entry_prefix": "aoti_guard/twin/",
        "nan_asserts": True,
        "intermediate_value_printer": "3",
    }
    raw = json.dumps(m, indent=1).encode()

    def edit(name: str, data: bytes) -> list[tuple[str, bytes]] | bytes:
        if name.endswith(layout.MANIFEST):
            root = name.split("/", 1)[0]
            return [(name, raw), (f"{root}/aoti_guard/twin/t.wrapper.cpp", payload.encode())]
        return data

    return rewrite(ctx.static_package, ctx.tmp / "twin.pt2", edit)


def wrapper_heads_verify_only(ctx: AttackContext) -> str:
    pkg = _twin_wrapper(ctx, "constants_info_[0].a = " * (400_000 // 23))
    ran, report = _verify_only(ctx, pkg, timeout=30)
    return f"verify-only read the 400 KB wrapper in {ran.seconds:.1f} s, exit {ran.code}: {', '.join(_codes(report)[:3])}"


def wrapper_heads_inspect(ctx: AttackContext) -> str:
    # a plain package (no manifest, nothing hashed): inspect parses every model's wrapper.cpp
    def edit(name: str, data: bytes) -> bytes | None:
        if name.endswith(layout.MANIFEST):
            return None
        if name.endswith(".wrapper.cpp"):
            # before the real call (a first match ends the search) and a shape line that ends
            return (
                b"AOTInductorModelBase(0,0,0," * (400_000 // 27) + b"\n" + data + b"constants_info_[0].shape = " + b"{" * 400_000 + b";\n"
            )
        return data

    pkg = rewrite(ctx.static_package, ctx.tmp / "plain.pt2", edit)
    ran = _run(["-m", "runtime_probe.inspect", str(pkg), "--json", "-"], timeout=30, cwd=ctx.tmp)
    data = ran.json()
    model = data["models"].get("model", {})
    return f"inspect read 800 KB of hostile wrapper in {ran.seconds:.1f} s; {len(model.get('constants', []))} constant(s) listed"


def sparse_file_not_copied(ctx: AttackContext) -> str:
    pkg = ctx.tmp / "sparse.pt2"
    with open(pkg, "wb") as fh:
        fh.truncate(5 << 30)  # 5 GB of hole: costs no disk; the old probe copied it whole to TMPDIR
    tmpdir = ctx.tmp / "tmp"
    tmpdir.mkdir()
    ran, report = _verify_only(ctx, pkg, timeout=60, env={"TMPDIR": str(tmpdir)}, fsize=64 << 20)
    if "env.tmpdir_unusable" in _codes(report):
        raise AttackSucceeded("the probe copied a 5 GB file that is no zip into TMPDIR (env.tmpdir_unusable under a 64 MB file-size limit)")
    return _expect_finding(ran, report, "archive.unreadable", "end-of-archive")


def input_name_unclosed_keys(ctx: AttackContext) -> str:
    # a leaf name of 100,000 "['" with no end: the guarded loader's dotted() rescanned the rest of
    # the name from each one when a caller passes the argument as a mapping of leaf names
    m = _manifest(ctx.static_package)
    name = "x" + "['" * 100_000
    m["io"]["inputs"][0]["name"] = name
    for sample in m["golden"]["samples"]:  # the samples name their inputs by the same name
        sample["inputs"] = {name: next(iter(sample["inputs"].values()))}
    pkg = _with_manifest(ctx, "names.pt2", json.dumps(m).encode())
    script = """
        import sys, torch, runtime_probe
        from runtime_probe.reporting.errors import InputContractError
        model = runtime_probe.load(sys.argv[1])
        try:
            model(x={"a": torch.randn(8, 16)})
        except InputContractError as exc:
            print("refused:", exc.code)
        else:
            print("called")
    """
    ran = _run(["-c", textwrap.dedent(script), str(pkg)], timeout=60, cwd=ctx.tmp, label="a call by leaf names")
    return f"the guarded model answered a call by leaf names in {ran.seconds:.1f} s: {ran.out.strip()[-80:]}"


# ---- numeric overflow -----------------------------------------------------------------------


def huge_atol_verify_only(ctx: AttackContext) -> str:
    pkg = _number_in_manifest(ctx, "atol.pt2", _huge_atol, HUGE)
    ran, report = _verify_only(ctx, pkg)
    return _expect_finding(ran, report, "manifest.invalid", "golden.tolerances[0].atol")


def huge_seconds_in_manifest_inspect(ctx: AttackContext) -> str:
    pkg = _number_in_manifest(ctx, "measured.pt2", lambda m: m["golden"]["tolerances"][0].update(measured_abs="@@NUMBER@@"), HUGE)
    ran = _run(["-m", "runtime_probe.inspect", str(pkg), "--json", "-"], timeout=60, cwd=ctx.tmp)
    problems = [p for p in ran.json()["problems"] if p["code"] == "manifest.invalid"]
    if ran.code != 1 or not problems:
        raise AttackSucceeded(f"inspect exit {ran.code} without manifest.invalid")
    return f"inspect: manifest.invalid: {problems[0]['message'][:140]}"


def huge_atol_diff(ctx: AttackContext) -> str:
    pkg = _number_in_manifest(ctx, "atol.pt2", _huge_atol, HUGE)
    ran = _run(["-m", "aoti_guard", "diff", str(ctx.static_package), str(pkg)], timeout=60, cwd=ctx.tmp)
    if ran.code != 2 or "golden.tolerances[0].atol" not in ran.err:
        raise AttackSucceeded(f"diff exit {ran.code}: {ran.err[-200:]}")
    return f"diff: exit 2, {ran.err.strip().splitlines()[0][-140:]}"


def huge_atol_load(ctx: AttackContext) -> str:
    pkg = _number_in_manifest(ctx, "atol.pt2", _huge_atol, HUGE)
    script = """
        import sys, runtime_probe
        try:
            runtime_probe.load(sys.argv[1])
        except runtime_probe.PackageRejected as exc:
            print("rejected:", ", ".join(f.code for f in exc.findings), "|", exc.findings[0].message)
        else:
            print("loaded")
    """
    ran = _run(["-c", textwrap.dedent(script), str(pkg)], timeout=60, cwd=ctx.tmp, label="runtime_probe.load")
    if not ran.out.startswith("rejected: manifest.invalid"):
        raise AttackSucceeded(f"runtime_probe.load did not reject it with manifest.invalid: {ran.out.strip()[-200:]}")
    return f"runtime_probe.load: PackageRejected ({ran.out.strip()[10:150]})"


def huge_report_seconds(ctx: AttackContext) -> str:
    # a node's report read back (the fleet, the container probe): a phase's seconds of 401 digits
    report = {"schema_version": "1.1", "kind": "probe", "package": {}, "phases": [{"name": "archive", "status": "passed", "seconds": 0}]}
    path = ctx.tmp / "node.json"
    path.write_text(json.dumps(report).replace('"seconds": 0', f'"seconds": {HUGE}'))
    script = """
        import json, sys
        from runtime_probe.reporting.errors import GuardError
        from runtime_probe.reporting.report import Report
        try:
            Report.from_dict(json.loads(open(sys.argv[1]).read()))
        except GuardError as exc:
            print("refused:", exc)
        else:
            print("read")
    """
    ran = _run(["-c", textwrap.dedent(script), str(path)], timeout=30, cwd=ctx.tmp, label="Report.from_dict")
    if not ran.out.startswith("refused:"):
        raise AttackSucceeded(f"Report.from_dict accepted or crashed: {ran.out.strip()[-200:]}")
    return f"Report.from_dict: {ran.out.strip()[:160]}"


def power_tower_guard(ctx: AttackContext) -> str:
    # an export guard of 110 characters whose value is 2**(8**10): evaluated on every call
    expr = "2"
    for _ in range(10):
        expr = f"({expr})**8"
    m = _manifest(ctx.static_package)
    m["io"]["guards"] = [{"text": "hostile", "expr": f"{expr} == 1", "words": "a tower of powers"}]
    pkg = _with_manifest(ctx, "tower.pt2", json.dumps(m).encode())
    script = """
        import sys, torch, runtime_probe
        from runtime_probe.reporting.errors import InputContractError
        model = runtime_probe.load(sys.argv[1])
        try:
            model(torch.randn(8, 16))
        except InputContractError as exc:
            print("refused:", exc.code, exc)
        else:
            print("called")
    """
    ran = _run(["-c", textwrap.dedent(script), str(pkg)], timeout=45, cwd=ctx.tmp, label="a guarded call")
    if not ran.out.startswith("refused: input.guard"):
        raise AttackSucceeded(f"the guarded call was not refused: {ran.out.strip()[-200:]}")
    return f"the call was refused in {ran.seconds:.1f} s: {ran.out.strip()[:150]}"


# ---- Unicode digits -------------------------------------------------------------------------


def superscript_schema_version(ctx: AttackContext) -> str:
    m = _manifest(ctx.static_package)
    m["schema_version"] = "\u00b9.6"  # isdigit() says yes; int() raised ValueError
    ran, report = _verify_only(ctx, _with_manifest(ctx, "schema.pt2", json.dumps(m).encode()))
    return _expect_finding(ran, report, "manifest.invalid", "ASCII digits")


def schema_version_as_number(ctx: AttackContext) -> str:
    m = _manifest(ctx.static_package)
    m["schema_version"] = 1.6  # read as "no usable schema_version ('1.6')": it looks right
    ran, report = _verify_only(ctx, _with_manifest(ctx, "schema.pt2", json.dumps(m).encode()))
    return _expect_finding(ran, report, "manifest.invalid", 'must be a string like "')


def superscript_signature_schema(ctx: AttackContext) -> str:
    entry = {
        "format": "aoti-guard.signature",
        "schema_version": "\u00b9.0",
        "algorithm": "ed25519",
        "key_id": "k",
        "manifest_sha256": "0" * 64,
        "signature": "AA==",
    }

    def edit(name: str, data: bytes) -> list[tuple[str, bytes]] | bytes:
        if name.endswith(layout.MANIFEST):
            return [(name, data), (f"{name.split('/', 1)[0]}/{layout.SIGNATURE}", json.dumps(entry).encode())]
        return data

    pkg = rewrite(ctx.static_package, ctx.tmp / "signed.pt2", edit)
    public = write_key_pair(ctx.tmp / "release.key")  # with a key the entry is parsed first
    ran = _run(
        ["-m", "runtime_probe", str(pkg), "--verify-only", "--public-key", str(public), "--json", "-", "-q"], timeout=60, cwd=ctx.tmp
    )
    return _expect_finding(ran, ran.json(), "archive.signature_invalid", "ASCII digits")


# ---- concurrency ----------------------------------------------------------------------------


def _versions(ctx: AttackContext) -> tuple[dict[str, Path], dict[str, str]]:
    """Two versions of the package that differ in the manifest's tool version only (a difference
    diff reports), and their sha256."""
    paths = {}
    for v in ("A", "B"):
        m = _manifest(ctx.static_package)
        m["tool"]["version"] = f"version {v}"
        paths[v] = _with_manifest(ctx, f"{v}.pt2", json.dumps(m, indent=1).encode())
    return paths, {v: hashlib.sha256(p.read_bytes()).hexdigest() for v, p in paths.items()}


def _under_writer(ctx: AttackContext, runs: int, one: Callable[[Path], str]) -> list[str]:
    paths, _ = _versions(ctx)
    live = ctx.tmp / "live.pt2"
    shutil.copyfile(paths["A"], live)
    with replacing(live, [paths["A"], paths["B"]]):  # the unit tests' one atomic writer
        return [one(live) for _ in range(runs)]


def inspect_under_atomic_writer(ctx: AttackContext) -> str:
    _, digest = _versions(ctx)

    def one(live: Path) -> str:
        data = _run(["-m", "runtime_probe.inspect", str(live), "--json", "-"], timeout=60, cwd=ctx.tmp).json()
        if "manifest" not in data:
            raise AttackSucceeded(f"inspect read no manifest from a file replaced atomically: {data['problems'][:1]}")
        version = str(data["manifest"]["tool"]["version"]).split()[-1]
        if data["sha256"] != digest[version]:
            raise AttackSucceeded(f"inspect paired version {version}'s manifest with the other version's sha256")
        return version

    seen = _under_writer(ctx, 8, one)
    return f"8 inspect --json runs under an atomic writer: each sha256 matched its manifest (versions {''.join(seen)})"


def diff_under_atomic_writer(ctx: AttackContext) -> str:
    paths, digest = _versions(ctx)

    def one(live: Path) -> str:
        ran = _run(["-m", "aoti_guard", "diff", str(live), str(paths["A"]), "--json", "-"], timeout=60, cwd=ctx.tmp)
        data = ran.json()
        version = "A" if data["same"] else "B"
        if data["a"]["sha256"] != digest[version]:
            raise AttackSucceeded(f"diff compared version {version}'s manifest but reported the other version's sha256")
        return version

    seen = _under_writer(ctx, 8, one)
    return f"8 diff --json runs under an atomic writer: each sha256 matched the manifest compared (versions {''.join(seen)})"


# ---- terminal injection ---------------------------------------------------------------------


def diff_error_with_control_key(ctx: AttackContext) -> str:
    m = _manifest(ctx.static_package)
    m["hashes"]["\x1b[2J\x1b[31m\rOK \u202eelif"] = 5  # a key the reader's error quotes
    pkg = _with_manifest(ctx, "key.pt2", json.dumps(m).encode())
    ran = _run(["-m", "aoti_guard", "diff", str(pkg), str(pkg)], timeout=60, cwd=ctx.tmp)
    raw = _RAW.findall(ran.out + ran.err)
    if raw:
        raise AttackSucceeded(f"diff printed {len(raw)} raw control or bidi character(s): {sorted({hex(ord(c)) for c in raw})}")
    if ran.code != 2:
        raise AttackSucceeded(f"diff exit {ran.code} (expected 2: nothing to compare)")
    return f"diff: exit 2, the key shown escaped: {ran.err.strip().splitlines()[0][-100:]}"


# ---- verdicts -------------------------------------------------------------------------------

_EIO = """
import errno, os
_real = os.pread
_target = os.environ["ATTACK_EIO_FILE"]

def pread(fd, n, offset):
    try:
        if os.readlink(f"/proc/self/fd/{fd}") == _target:
            raise OSError(errno.EIO, "Input/output error")
    except OSError as exc:
        if exc.errno == errno.EIO:
            raise
    return _real(fd, n, offset)

os.pread = pread
"""


def read_error_is_not_tmpdir(ctx: AttackContext) -> str:
    # a disk that fails under the package: its reads (not the copy's writes) raise EIO
    pkg = ctx.package_copy()
    inject = ctx.tmp / "inject"
    inject.mkdir()
    (inject / "sitecustomize.py").write_text(_EIO)
    ran, report = _verify_only(ctx, pkg, env={"PYTHONPATH": str(inject), "ATTACK_EIO_FILE": str(pkg)})
    if "env.tmpdir_unusable" in _codes(report):
        raise AttackSucceeded("a read error on the package was reported as an unusable TMPDIR")
    return _expect_finding(ran, report, "archive.unreadable", "Input/output error")


ATTACKS: list[Attack] = [
    Attack(
        "wrapper-cpp-assignment-heads",
        "parse-time bounds",
        "a debug twin's wrapper.cpp of 400 KB of 'constants_info_[0].a = ' (no ';')",
        "--verify-only reads it in linear time and gives its verdict (the old regex: minutes)",
        wrapper_heads_verify_only,
    ),
    Attack(
        "wrapper-cpp-model-base-and-braces",
        "parse-time bounds",
        "a plain package's wrapper.cpp with 400 KB of 'AOTInductorModelBase(0,0,0,' and a shape of 400 KB of '{'",
        "inspect --json reads it in linear time",
        wrapper_heads_inspect,
    ),
    Attack(
        "sparse-5gb-no-zip",
        "parse-time bounds",
        "a 5 GB sparse file as the package, TMPDIR under a 64 MB file-size limit",
        "archive.unreadable from its end record, read in place; nothing copied (not env.tmpdir_unusable)",
        sparse_file_not_copied,
    ),
    Attack(
        "input-name-unclosed-keys",
        "parse-time bounds",
        'a manifest input name of 100,000 "[\'" without an end; a call by leaf names',
        "the guarded loader answers at once (the old pattern rescanned the name from each one)",
        input_name_unclosed_keys,
    ),
    Attack(
        "atol-401-digits-verify-only",
        "numeric overflow",
        "a tolerance's atol of 401 digits in the manifest",
        "--verify-only: manifest.invalid naming the field, exit 1 (was an OverflowError traceback)",
        huge_atol_verify_only,
    ),
    Attack(
        "measured-abs-401-digits-inspect",
        "numeric overflow",
        "a tolerance's measured_abs of 401 digits",
        "inspect: a manifest.invalid problem, exit 1",
        huge_seconds_in_manifest_inspect,
    ),
    Attack(
        "atol-401-digits-diff",
        "numeric overflow",
        "diff against a package whose atol has 401 digits",
        "diff: exit 2 with the field named, no traceback",
        huge_atol_diff,
    ),
    Attack(
        "atol-401-digits-load",
        "numeric overflow",
        "runtime_probe.load of a package whose atol has 401 digits",
        "PackageRejected with manifest.invalid",
        huge_atol_load,
    ),
    Attack(
        "report-seconds-401-digits",
        "numeric overflow",
        "a probe report read back whose phase took 10**400 seconds",
        "Report.from_dict raises ToolError (a GuardError), not OverflowError",
        huge_report_seconds,
    ),
    Attack(
        "guard-power-tower",
        "numeric overflow",
        "an export guard '((2)**8)**8...' ten levels deep (2**(8**10))",
        "the guarded call is refused (input.guard: beyond 64 bits) at once",
        power_tower_guard,
    ),
    Attack(
        "schema-version-superscript",
        "Unicode digits",
        "schema_version '\\u00b9.6' (isdigit() is true, int() fails)",
        "manifest.invalid: not MAJOR.MINOR in ASCII digits",
        superscript_schema_version,
    ),
    Attack(
        "schema-version-json-number",
        "Unicode digits",
        "schema_version 1.6 as a JSON number",
        'manifest.invalid saying it must be a string like "MAJOR.MINOR"',
        schema_version_as_number,
    ),
    Attack(
        "signature-schema-superscript",
        "Unicode digits",
        "a signature entry whose schema_version is '\\u00b9.0', checked with --public-key",
        "archive.signature_invalid saying it is not MAJOR.MINOR in ASCII digits (was int()'s 'invalid literal')",
        superscript_signature_schema,
    ),
    Attack(
        "inspect-under-atomic-writer",
        "concurrency",
        "inspect --json 8 times while another process replaces the file atomically with two versions",
        "every report's sha256 is that of the version whose manifest it shows",
        inspect_under_atomic_writer,
    ),
    Attack(
        "diff-under-atomic-writer",
        "concurrency",
        "diff --json 8 times while another process replaces A atomically with two versions",
        "every diff's A sha256 is that of the version whose manifest it compared",
        diff_under_atomic_writer,
    ),
    Attack(
        "diff-error-control-key",
        "terminal injection",
        "a manifest key with ESC sequences, CR and U+202E that the reader's error quotes",
        "diff's error shows it escaped; no raw control or bidi character on the terminal",
        diff_error_with_control_key,
    ),
    Attack(
        "read-error-not-tmpdir",
        "verdicts",
        "every read of the package fails with EIO (a failing disk), TMPDIR fine",
        "archive.unreadable with the OS error, not env.tmpdir_unusable",
        read_error_is_not_tmpdir,
    ),
]

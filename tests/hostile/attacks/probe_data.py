"""Attacks: probe_data (issue 40 findings 4 and 13). See tests/hostile/attack.py.

Each attack edits the manifest or the golden file of a private copy of the real ``static``
package, records the golden file's new SHA-256 in the manifest (an unsigned package: nothing else
stands between such an edit and the probe), and runs the real probe CLI on it in a subprocess.

- sample ids: a golden sample id becomes ``--save-inputs DIR/ID.inputs.safetensors``; an id that
  is not a plain name must be refused with the manifest (``manifest.invalid`` naming it), before
  any file is written, never written outside DIR, never ``run.error``;
- golden data: stored data that breaks the package's own contract, or that the tensor reader
  refuses, is ``golden.invalid`` (a package finding), never ``run.error`` escalated to
  ``escalate.no_verdict``, and never a pass of a package ``runtime_probe.load()`` refuses;
- verdicts: a record that leaves an output unchecked must not read as a checked, passed sample.
"""

from __future__ import annotations

import hashlib
import json
import struct
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.hostile.attack import Attack, AttackContext, AttackSucceeded

TIMEOUT_S = 180  # one probe run of the static package takes a few seconds (its host phase imports torch)
MANIFEST = "extra/aoti_guard/manifest.json"

Edit = Callable[[dict[str, Any]], None]


def _craft(ctx: AttackContext, name: str, manifest: Edit | None = None, golden: Callable[[bytes], bytes] | None = None) -> Path:
    """A copy of the real package with its manifest (and golden file) edited, the golden file's
    hash recomputed so the archive checks pass."""
    source = ctx.package_copy(f"{name}.source.pt2")
    with zipfile.ZipFile(source) as zf:
        infos = zf.infolist()
        data = {i.filename: zf.read(i) for i in infos}
    m_name = next(n for n in data if n.endswith("/" + MANIFEST))
    root = m_name[: -len(MANIFEST)]
    m = json.loads(data[m_name])
    if golden is not None:
        entry = root + m["golden"]["entry"]
        data[entry] = golden(data[entry])
        m["hashes"][m["golden"]["entry"]] = hashlib.sha256(data[entry]).hexdigest()
        m["golden"]["nbytes"] = len(data[entry])
    if manifest is not None:
        manifest(m)
    data[m_name] = json.dumps(m, indent=1).encode()
    out = ctx.tmp / f"{name}.pt2"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as zf:
        for i in infos:
            zf.writestr(zipfile.ZipInfo(i.filename, date_time=i.date_time), data[i.filename])
    source.unlink()
    return out


def _probe(ctx: AttackContext, package: Path, *args: str, cwd: Path | None = None) -> tuple[int, dict[str, Any], str]:
    """(exit code, JSON report, output) of the real probe CLI; AttackSucceeded when it hangs or crashes."""
    report = ctx.tmp / f"{package.stem}.report.json"
    cmd = [sys.executable, "-m", "runtime_probe", str(package), "--json", str(report), "-q", *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, cwd=cwd or ctx.tmp)
    except subprocess.TimeoutExpired:
        raise AttackSucceeded(f"the probe ran past {TIMEOUT_S} s on {package.name}") from None
    output = proc.stdout + proc.stderr
    if proc.returncode not in (0, 1) or "Traceback (most recent call last)" in output or not report.exists():
        raise AttackSucceeded(f"the probe crashed (exit {proc.returncode}): {output[-600:]}")
    return proc.returncode, json.loads(report.read_text()), output


def _errors(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for p in report["phases"] for f in p.get("findings", []) if f["severity"] == "error"]


def _codes(report: dict[str, Any]) -> list[str]:
    return [f["code"] for f in _errors(report)]


def _not_a_model_failure(report: dict[str, Any], what: str) -> None:
    """The run errors and the ladder's no-verdict that bad data used to cause."""
    wrong = [c for c in _codes(report) if c.startswith("run.") or c == "escalate.no_verdict"]
    if wrong:
        raise AttackSucceeded(f"{what} was reported as a failure of the model: {', '.join(wrong)}")


def _files_under(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*") if p.is_file()}


# --- sample ids -------------------------------------------------------------------------------


def _sample_id_attack(sample_id: Callable[[AttackContext], str], label: str) -> Callable[[AttackContext], str]:
    def run(ctx: AttackContext) -> str:
        hostile = sample_id(ctx)

        def edit(m: dict[str, Any]) -> None:
            m["golden"]["samples"][0]["id"] = hostile

        package = _craft(ctx, label, edit)
        work = ctx.tmp / "work" / "a" / "b"  # '../../x' from work/a/b/save lands in work/a
        save = work / "save"
        save.mkdir(parents=True)
        before = _files_under(ctx.tmp)
        code, report, _ = _probe(ctx, package, "--save-inputs", "save", "--save-outputs", "save", cwd=work)
        written = sorted(str(p.relative_to(ctx.tmp)) for p in _files_under(ctx.tmp) - before if "report.json" not in p.name)
        if written:
            raise AttackSucceeded(f"golden sample id {hostile!r} made the probe write {', '.join(ascii(w) for w in written)}")
        named = [f for f in _errors(report) if f["code"] == "manifest.invalid" and repr(hostile[:80]) in f["message"]]
        _not_a_model_failure(report, f"golden sample id {hostile!r}")
        if code != 1 or not named:
            raise AttackSucceeded(f"golden sample id {hostile!r} was not refused with the manifest: exit {code}, errors {_codes(report)}")
        return f"refused with the manifest before anything ran (manifest.invalid: {named[0]['message'][:120]}); nothing written"

    return run


def _absolute(ctx: AttackContext) -> str:
    target = ctx.tmp / "elsewhere"  # an existing folder: the old code wrote (and replaced) files there
    target.mkdir()
    return str(target / "x")


# --- golden data ------------------------------------------------------------------------------


def _with_tensor(blob: bytes, name: str, dtype: str, shape: list[int], raw: bytes) -> bytes:
    """A safetensors file with one more tensor appended (its header rewritten)."""
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8 : 8 + n])
    data = blob[8 + n :]
    header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data + raw


def _golden_invalid(
    ctx: AttackContext, label: str, what: str, manifest: Edit | None = None, golden: Callable[[bytes], bytes] | None = None
) -> str:
    code, report, _ = _probe(ctx, _craft(ctx, label, manifest, golden))
    _not_a_model_failure(report, what)
    found = [f for f in _errors(report) if f["code"] == "golden.invalid"]
    if code != 1 or not found:
        verdict = "PASSED" if code == 0 else f"exit {code} with {_codes(report)}"
        raise AttackSucceeded(f"{what}: the probe said {verdict}, not golden.invalid")
    escalated = next((p for p in report["phases"] if p["name"] == "escalate"), {}).get("status")
    if escalated not in (None, "skipped"):
        raise AttackSucceeded(f"{what}: the escalation ladder ran ({escalated}) for data that is no failure of the model")
    return f"golden.invalid ({found[0]['message'][:140]}); not escalated"


def _input_dtype(m: dict[str, Any]) -> None:
    m["io"]["inputs"][0]["tensor"]["dtype"] = "int64"


def _input_rank(m: dict[str, Any]) -> None:
    t = m["io"]["inputs"][0]["tensor"]
    t["shape"], t["stride"] = [1] * 100_000, [1] * 100_000


def _golden_is_the_so(m: dict[str, Any]) -> None:
    m["golden"]["entry"] = next(rel for rel in m["hashes"] if rel.endswith(".so"))


def _no_input_record(m: dict[str, Any]) -> None:
    m["golden"]["samples"][0]["inputs"] = {}


def _verdict_without_reference(ctx: AttackContext) -> str:
    def edit(m: dict[str, Any]) -> None:
        m["golden"]["samples"][0]["outputs"] = {}

    code, report, _ = _probe(ctx, _craft(ctx, "no-reference", edit))
    if code == 0:
        golden = next(p for p in report["phases"] if p["name"] == "golden")
        raise AttackSucceeded(f"a sample with no output reference passed as checked: {golden.get('detail', {}).get('checked')}")
    if "golden.invalid" not in _codes(report):
        raise AttackSucceeded(f"a sample with no output reference was not golden.invalid: {_codes(report)}")
    return "golden.invalid: the sample's record gives no reference for its output, so it is not counted as checked"


ATTACKS: list[Attack] = [
    Attack(
        "sample-id-parent-traversal",
        "sample ids",
        "a golden sample id '../../x' with --save-inputs/--save-outputs",
        "manifest.invalid naming the id; no file written outside (or inside) the folder",
        _sample_id_attack(lambda ctx: "../../x", "id-parent"),
    ),
    Attack(
        "sample-id-absolute-path",
        "sample ids",
        "a golden sample id that is an absolute path",
        "manifest.invalid naming the id; nothing written at that path",
        _sample_id_attack(_absolute, "id-absolute"),
    ),
    Attack(
        "sample-id-subfolder",
        "sample ids",
        "a golden sample id 'sub/dir/x' (a folder that does not exist)",
        "manifest.invalid naming the id, not run.error and escalate.no_verdict",
        _sample_id_attack(lambda ctx: "sub/dir/x", "id-subfolder"),
    ),
    Attack(
        "sample-id-control-characters",
        "sample ids",
        "a golden sample id holding ESC and a newline ('ok\\x1b[2J\\nPASSED')",
        "manifest.invalid naming the id; no file name with control characters",
        _sample_id_attack(lambda ctx: "ok\x1b[2J\nPASSED", "id-control"),
    ),
    Attack(
        "sample-id-probe-run-name",
        "sample ids",
        "a golden sample named 'inputs', the probe's own --inputs run (its saved files and report lines)",
        "manifest.invalid naming the id",
        _sample_id_attack(lambda ctx: "inputs", "id-inputs"),
    ),
    Attack(
        "golden-input-dtype-changed",
        "golden data",
        "the manifest's input dtype changed to int64, the stored float32 inputs kept",
        "golden.invalid naming the sample and argument (the loader refuses every such call), not PASSED",
        lambda ctx: _golden_invalid(ctx, "dtype-int64", "stored inputs of another dtype than the contract", _input_dtype),
    ),
    Attack(
        "golden-input-rank-100000",
        "golden data",
        "the manifest's input given rank 100000",
        "golden.invalid within seconds, not PASSED",
        lambda ctx: _golden_invalid(ctx, "rank-100000", "stored inputs of another rank than the contract", _input_rank),
    ),
    Attack(
        "golden-bool-bytes",
        "golden data",
        "a BOOL tensor holding the byte 2 added to the golden file (hash recomputed)",
        "golden.invalid naming the entry, not run.error escalated to escalate.no_verdict",
        lambda ctx: _golden_invalid(
            ctx, "bool-bytes", "BOOL bytes other than 0/1", golden=lambda blob: _with_tensor(blob, "zz.flag", "BOOL", [2], b"\x01\x02")
        ),
    ),
    Attack(
        "golden-entry-is-the-so",
        "golden data",
        "the manifest's golden entry pointed at the model's .so",
        "golden.invalid naming the entry, not run.error escalated to escalate.no_verdict",
        lambda ctx: _golden_invalid(ctx, "golden-so", "a golden entry that is the .so", _golden_is_the_so),
    ),
    Attack(
        "golden-sample-without-inputs",
        "golden data",
        "a whole golden sample whose record gives no stored input",
        "golden.invalid naming the sample and input, not run.error (KeyError) escalated",
        lambda ctx: _golden_invalid(ctx, "no-inputs", "a sample record without its inputs", _no_input_record),
    ),
    Attack(
        "golden-sample-without-reference",
        "verdicts",
        "a whole golden sample whose record gives no output reference",
        "golden.invalid, never a sample 'checked' and PASSED with nothing compared",
        _verdict_without_reference,
    ),
]

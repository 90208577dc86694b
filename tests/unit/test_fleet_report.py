"""fleet report: node classes from reports' host facts, one verdict per class, hostile report files."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

import pytest

from aoti_guard.cli import main
from aoti_guard.fleet.classes import FAIL, NO_VERDICT, PASS, Issue, NodeClass, NodeResult, cpu_isa_level, node_result, unreadable
from aoti_guard.fleet.report import aggregate, render_json, render_markdown, render_text
from aoti_guard.fleet.sources import Limits, read_report
from aoti_guard.fleet.trust import gather
from runtime_probe.node_check import report_file_name as node_file_name
from runtime_probe.reporting.findings import error
from runtime_probe.reporting.report import Report, make_phase
from tests.gfm import markup_added, references, render
from tests.unit.test_markdown_escaping import ALL

H100 = {"name": "NVIDIA H100 80GB HBM3", "capability": "90", "total_memory": 85_000_000_000}
A10 = {"name": "NVIDIA A10G", "capability": "86", "total_memory": 24_000_000_000}
V3 = ["avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "cx16", "lahf_lm", "popcnt", "sse4_1", "sse4_2", "ssse3"]


def host(node: str, devices: list[dict[str, Any]] | None = None, torch: str = "2.11.0+cu130", driver: str = "580.95.05") -> dict[str, Any]:
    h: dict[str, Any] = {
        "hostname": node,
        "machine": "x86_64",
        "cpu_flags": V3,
        "torch": torch,
        "libstdcxx": "/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.33",
        "devices": devices or [],
    }
    if devices:
        h["driver"] = {"version": driver, "cuda_version": "13.0"}
    return h


def probe_report(
    node: str, devices: list[dict[str, Any]] | None = None, *, fail: str | None = None, tool: bool = False, **kw: Any
) -> dict[str, Any]:
    findings = []
    if fail:
        findings.append(error(fail, "host", f"{fail} on {node}", expected="sm_90", found="sm_86", hint="rebuild with --cuda-arch"))
    if tool:
        findings.append(error("tool.failed", "host", "the probe could not run"))
    phase = make_phase("host", 0.1, findings)
    device = "cuda" if devices else "cpu"
    rep = Report(
        kind="probe",
        package={"path": "/m/model.pt2", "sha256": "ab" * 32},
        phases=(phase,),
        host=host(node, devices, **kw),
        extra={"device": device},
    )
    return rep.to_dict()


def write(folder: Path, name: str, doc: object) -> Path:
    path = folder / name
    path.write_text(json.dumps(doc))
    return path


def test_classes_split_by_gpu_driver_torch_and_cpu_hosts(tmp_path: Path) -> None:
    write(tmp_path, "h1.json", probe_report("h1", [H100]))
    write(tmp_path, "h2.json", probe_report("h2", [H100]))
    write(tmp_path, "h3.json", probe_report("h3", [H100], driver="570.1.2"))  # another driver major: another class
    write(tmp_path, "a1.json", probe_report("a1", [A10], fail="env.arch_mismatch"))
    write(tmp_path, "a2.json", probe_report("a2", [A10], fail="env.arch_mismatch"))
    write(tmp_path, "c1.json", probe_report("c1"))
    write(tmp_path, "c2.json", probe_report("c2", torch="2.13.0+cpu"))
    fleet = aggregate(gather([str(tmp_path)]))
    by_label = {c.label: c for c in fleet.classes}
    assert len(by_label) == 5, list(by_label)
    h100 = next(c for c in fleet.classes if c.node_class and c.node_class.gpu == H100["name"] and c.node_class.driver == "580")
    assert (h100.verdict, h100.passed, h100.node_class.capability, h100.node_class.cuda) == (PASS, ("h1", "h2"), "9.0", "13.0")
    a10 = next(c for c in fleet.classes if c.node_class and c.node_class.gpu == "NVIDIA A10G")
    assert a10.verdict == FAIL and a10.failed == ("a1", "a2")
    (issue, nodes) = a10.issues[0]
    assert issue.code == "env.arch_mismatch" and nodes == ("a1", "a2") and issue.expected == "sm_90"
    cpu = [c for c in fleet.classes if c.node_class and c.node_class.gpu == "cpu"]
    assert {c.node_class.torch for c in cpu if c.node_class} == {"2.11.0+cu130", "2.13.0+cpu"}
    assert all(c.node_class and c.node_class.machine == "x86_64 x86-64-v3" for c in cpu)
    assert fleet.exit_code == 1 and fleet.classes[0].verdict == FAIL  # failing classes first
    text = render_text(fleet)
    assert "FAIL       NVIDIA A10G (sm 8.6)" in text and "env.arch_mismatch" in text and "[2 node(s)]" in text
    assert text.rstrip().endswith("FAILED: 4 class(es) pass, 1 fail, 0 without a verdict (7 report(s))")


def test_hostile_files_are_no_verdict_never_pass(tmp_path: Path) -> None:
    good = write(tmp_path, "g1.json", probe_report("g1"))
    (tmp_path / "truncated.json").write_text(good.read_text()[:300])
    (tmp_path / "empty.json").write_text("")
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe\x00garbage")
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (tmp_path / "huge.json").write_text(" " * 2048 + "{}")
    write(tmp_path, "build.json", {**probe_report("b1"), "kind": "build"})
    write(tmp_path, "list.json", [1, 2])
    edited = probe_report("e1", fail="env.arch_mismatch")
    edited["exit_code"] = 0  # a report edited to pass: its findings still fail it
    write(tmp_path, "edited.json", edited)
    os.symlink(good, tmp_path / "link.json")
    os.mkfifo(tmp_path / "fifo.json")
    results = {Path(r.source).name: r for r in gather([str(tmp_path)], Limits(max_bytes=500))}
    assert results["g1.json"].outcome == NO_VERDICT and "over the 500-byte limit" in results["g1.json"].reason
    results = {Path(r.source).name: r for r in gather([str(tmp_path)], Limits(max_bytes=1 << 20))}
    assert results["g1.json"].outcome == PASS
    expect = {
        "truncated.json": "not valid JSON",
        "empty.json": "empty",
        "binary.json": "not UTF-8",
        "deep.json": "nested too deeply",
        "build.json": "not a probe report (kind build)",
        "list.json": "not a JSON object",
        "edited.json": "disagrees with its findings",
        "link.json": "a symlink",
        "fifo.json": "not a regular file",
    }
    for name, why in expect.items():
        assert results[name].outcome == NO_VERDICT and why in results[name].reason, (name, results[name].reason)
    huge = read_report(str(tmp_path / "huge.json"), Limits(max_bytes=1024))
    assert "over the 1024-byte limit" in huge.reason
    fleet = aggregate(results.values())
    assert fleet.exit_code == 2  # one class passes, but reports that name no class give no verdict
    assert {c.verdict for c in fleet.classes} == {PASS, NO_VERDICT}


def test_latest_report_of_a_node_wins_and_partial_silence_still_passes(tmp_path: Path) -> None:
    old = probe_report("n1", [H100], tool=True)
    old["created"] = "2026-11-25T01:00:00+00:00"
    new = probe_report("n1", [H100])
    new["created"] = "2026-11-25T02:00:00+00:00"
    write(tmp_path, "n1--pod-b.json", old)  # a retried pod: fleet k8s --apply names its log NODE--POD.json
    write(tmp_path, "n1--pod-a.json", new)
    died = {"kind": "fleet.no_verdict", "node": "n2", "reason": "the probe did not finish within 60 s"}
    write(tmp_path, "n2.json", died)
    write(tmp_path, "n3.json", probe_report("n3", [H100], tool=True))  # exit 3: no verdict, in its class
    fleet = aggregate(gather([str(tmp_path)]))
    assert fleet.superseded == 1
    gpu = next(c for c in fleet.classes if c.node_class)
    assert gpu.verdict == PASS and gpu.passed == ("n1",) and [n for n, _ in gpu.no_verdict] == ["n3"]
    silent = next(c for c in fleet.classes if c.node_class is None)
    assert silent.no_verdict == (("n2", "the probe left no report on the node: the probe did not finish within 60 s"),)
    data = json.loads(render_json(fleet))
    assert data["schema_version"] == "1.0" and data["counts"]["nodes"] == {"pass": 1, "fail": 0, "no_verdict": 2}
    assert data["verdict"] == NO_VERDICT and data["exit_code"] == 2
    md = render_markdown(fleet)
    assert md.startswith("### Fleet probe: NO VERDICT") and "| PASS | NVIDIA H100 80GB HBM3" in md


def test_class_of_a_hostile_host_is_bounded_and_printable() -> None:
    doc = probe_report("x", [{"name": "\x1b[31mEVIL" + "A" * 5000, "capability": "90"}])
    r = node_result(doc, "x.json")
    assert r.node_class is not None and "\x1b" not in r.node_class.gpu and len(r.node_class.gpu) <= 200
    assert cpu_isa_level(["avx512f"]) == "x86-64"  # v4 flags without v2/v3's: not v4
    assert cpu_isa_level(None) == "?"


def test_cli_exit_codes_and_formats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reports = tmp_path / "r"
    reports.mkdir()
    write(reports, "h1.json", probe_report("h1", [H100]))
    assert main(["fleet", "report", str(reports)]) == 0
    assert "PASSED: 1 class(es) pass" in capsys.readouterr().out
    write(reports, "a1.json", probe_report("a1", [A10], fail="env.arch_mismatch"))
    out_json = tmp_path / "fleet.json"
    assert main(["fleet", "report", str(reports), "--json", str(out_json), "--markdown", "-"]) == 1
    assert capsys.readouterr().out.startswith("### Fleet probe: FAILED")
    assert json.loads(out_json.read_text())["counts"]["classes"] == {"pass": 1, "fail": 1, "no_verdict": 0}
    assert main(["fleet", "report", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert "no report at" in err and "hint:" in err
    other = probe_report("o1", [H100])
    other["package"]["sha256"] = "cd" * 32
    write(reports, "o1.json", other)
    assert main(["fleet", "report", str(reports)]) == 2
    assert "2 different packages" in capsys.readouterr().err
    assert main(["fleet", "report", str(reports), "--any-package"]) == 1


@pytest.mark.parametrize("command", [["fleet"], ["fleet", "report"], ["fleet", "k8s"], ["fleet", "slurm"]])
def test_help_teaches(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*command, "--help"]) == 0
    out = capsys.readouterr().out
    assert "Usage:" in out and (command == ["fleet"] or "examples:" in out)


def hostile_fleet(text: str) -> list[NodeResult]:
    """A fleet whose every node-given text is ``text``: class facts, node names, findings, reasons."""
    cls = NodeClass(gpu=text, capability="9.0", driver=text, cuda="13.0", torch=text, libstdcxx=text, machine="x86_64")
    other = NodeClass(gpu="NVIDIA H100", capability="9.0", driver="580", cuda="13.0", torch=text, libstdcxx="6.0.33", machine="x86_64")
    issue = Issue(code=text, message=text, expected=text, found=text, hint=text)
    now = "2026-11-27T11:00:00+00:00"

    def node(name: str, c: NodeClass, outcome: str, **kw: Any) -> NodeResult:
        code = {PASS: 0, FAIL: 1}.get(outcome, 2)
        return NodeResult(f"/r/{node_file_name(name)}", name, c, outcome, code, created=now, **kw)

    return [
        node(f"{text}-1", cls, FAIL, issues=(issue,)),
        node(f"{text}-2", cls, PASS),
        node(f"{text}-3", other, PASS),
        node(f"{text}-4", other, NO_VERDICT, reason=text),
        unreadable(f"/r/{text}.json", text),
    ]


def test_markdown_of_hostile_node_reports_adds_no_markup() -> None:
    # a node's report renders as text: no link, image, bold, HTML, row, cell, mention or issue reference
    now = dt.datetime(2026, 11, 27, 12, tzinfo=dt.UTC)
    hostile = render_markdown(aggregate(hostile_fleet(ALL), now=now))
    benign = render_markdown(aggregate(hostile_fleet("word"), now=now))
    assert hostile.startswith("### Fleet probe: FAILED") and benign.startswith("### Fleet probe: FAILED")
    assert markup_added(hostile, benign) == {}, render(hostile)
    assert references(render(hostile)) == [], render(hostile)
    assert "\x1b" not in hostile and "\u202e" not in hostile

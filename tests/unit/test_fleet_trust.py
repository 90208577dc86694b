"""What fleet report believes of a node's report (aoti_guard/fleet/trust.py): its own node's file, a
time that is a date and not in the future, one package digest; one report that crashes its reader
is that node's no verdict; a reports folder given through a symlink is read."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pytest

from aoti_guard.cli import main
from aoti_guard.fleet import trust
from aoti_guard.fleet.classes import FAIL, NO_VERDICT, PASS, NodeResult
from aoti_guard.fleet.report import aggregate
from aoti_guard.fleet.sources import Limits
from runtime_probe.reporting.errors import UsageError
from tests.unit.test_fleet_report import A10, H100, probe_report, write

NOW = dt.datetime(2026, 11, 27, 12, 0, tzinfo=dt.UTC)


def at(minutes: float) -> str:
    """A report's ``created``, ``minutes`` after NOW."""
    return (NOW + dt.timedelta(minutes=minutes)).isoformat(timespec="seconds")


def recent() -> str:
    """A ``created`` for a report the CLI reads (its clock is the real one)."""
    return (dt.datetime.now(dt.UTC) - dt.timedelta(minutes=1)).isoformat(timespec="seconds")


def report(node: str, *, fail: bool = False, created: str | None = None, gpu: dict[str, object] = H100) -> dict[str, object]:
    doc = probe_report(node, [gpu], fail="env.arch_mismatch" if fail else None)
    doc["created"] = at(-60) if created is None else created
    doc["extra"]["fleet"] = {"node": node}
    return doc


def by_node(folder: Path) -> dict[str, tuple[str, str]]:
    fleet = aggregate(trust.gather([str(folder)]), now=NOW)
    out = {}
    for c in fleet.classes:
        out.update({n: (PASS, "") for n in c.passed})
        out.update({n: (FAIL, "") for n in c.failed})
        out.update({Path(n).name: (NO_VERDICT, why) for n, why in c.no_verdict})
    return out


def test_a_report_counts_only_in_its_own_nodes_file(tmp_path: Path) -> None:
    write(tmp_path, "gpu01.json", report("gpu01", fail=True))
    # gpu02's file claims to be gpu01, later, passing: it must not hide gpu01's failure
    write(tmp_path, "gpu02.json", report("gpu01", created=at(-1)))
    write(tmp_path, "gpu03--aoti-guard-r1-x-0-abcde.json", report("gpu03"))  # fleet k8s --apply: NODE--POD.json
    nodes = by_node(tmp_path)
    assert nodes["gpu01"] == (FAIL, "") and nodes["gpu03"] == (PASS, "")
    outcome, why = nodes["gpu02.json"]
    assert outcome == NO_VERDICT and "names node gpu01, whose reports are gpu01.json or gpu01--POD.json" in why
    assert "it says the package passes" in why
    fleet = aggregate(trust.gather([str(tmp_path)]), now=NOW)
    assert fleet.exit_code == 1 and fleet.superseded == 0


@pytest.mark.parametrize(
    ("created", "why"),
    [
        ("9999-12-31T23:59:59+00:00", "more than 5 minutes ahead of this machine's clock"),
        (at(6), "more than 5 minutes ahead"),
        ("yesterday", "is not an ISO 8601 date"),
        ("2026-11-27T11:00:00", "has no time zone"),
        ("", "has no created time"),
    ],
)
def test_a_time_that_cannot_be_believed_supersedes_nothing(tmp_path: Path, created: str, why: str) -> None:
    write(tmp_path, "n1.json", report("n1", fail=True))
    write(tmp_path, "n1--retry.json", report("n1", created=created))
    fleet = aggregate(trust.gather([str(tmp_path)]), now=NOW)
    (cls,) = fleet.classes
    assert cls.failed == ("n1",) and fleet.superseded == 1 and fleet.exit_code == 1
    (tmp_path / "n1.json").unlink()  # alone, it is the node's no verdict, never a pass
    (cls,) = aggregate(trust.gather([str(tmp_path)]), now=NOW).classes
    assert cls.verdict == NO_VERDICT and cls.no_verdict[0][0] == "n1" and why in cls.no_verdict[0][1], cls.no_verdict


def test_a_clock_a_little_ahead_is_believed_and_a_tie_goes_to_the_failure(tmp_path: Path) -> None:
    write(tmp_path, "n1.json", report("n1", fail=True, created=at(-10)))
    write(tmp_path, "n1--retry.json", report("n1", created=at(4)))  # within the 5-minute skew: the latest
    (cls,) = aggregate(trust.gather([str(tmp_path)]), now=NOW).classes
    assert cls.passed == ("n1",)
    write(tmp_path, "n1.json", report("n1", fail=True, created=at(4)))  # the same second: the failure counts
    (cls,) = aggregate(trust.gather([str(tmp_path)]), now=NOW).classes
    assert cls.failed == ("n1",)


def test_a_report_without_a_digest_is_another_package(tmp_path: Path) -> None:
    write(tmp_path, "h1.json", report("h1"))
    write(tmp_path, "a1.json", report("a1", fail=True, gpu=A10))
    trust.check_one_package(trust.gather([str(tmp_path)]))  # one package
    bare = report("h2")
    del bare["package"]["sha256"]
    write(tmp_path, "h2.json", bare)
    with pytest.raises(UsageError) as info:
        trust.check_one_package(trust.gather([str(tmp_path)]))
    assert "2 different packages" in info.value.message and "1 report(s) naming no package digest" in info.value.message
    assert "h2.json" in info.value.message and "--any-package" in (info.value.hint or "")
    odd = report("h3")
    odd["package"]["sha256"] = "not a digest"
    write(tmp_path, "h3.json", odd)
    with pytest.raises(UsageError, match="3 different packages"):
        trust.check_one_package(trust.gather([str(tmp_path)]))
    (tmp_path / "h1.json").unlink()
    (tmp_path / "a1.json").unlink()
    (tmp_path / "h3.json").unlink()
    trust.check_one_package(trust.gather([str(tmp_path)]))  # one report: nothing to differ from
    (tmp_path / "h4.json").write_text("{cut")  # a report without a verdict clears nothing: not counted
    trust.check_one_package(trust.gather([str(tmp_path)]))


def test_cli_refuses_a_report_without_a_digest_unless_any_package(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, "h1.json", report("h1", created=recent()))
    bare = report("h2", created=recent())
    del bare["package"]["sha256"]
    write(tmp_path, "h2.json", bare)
    assert main(["fleet", "report", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "2 different packages" in err and "h2.json" in err and "Traceback" not in err
    assert main(["fleet", "report", str(tmp_path), "--any-package"]) == 0  # grouped anyway: both pass


def test_one_report_that_crashes_its_reader_is_that_nodes_no_verdict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "h1.json", report("h1"))
    write(tmp_path, "h2.json", report("h2"))
    real = trust.read_report

    def flaky(path: str, limits: Limits) -> NodeResult:
        if path.endswith("h2.json"):
            raise RuntimeError("reader bug\x1b[2J")
        return real(path, limits)

    monkeypatch.setattr(trust, "read_report", flaky)
    results = {Path(r.source).name: r for r in trust.gather([str(tmp_path)], Limits())}
    assert results["h1.json"].outcome == PASS
    h2 = results["h2.json"]
    assert h2.outcome == NO_VERDICT and "its reader failed on it (RuntimeError: reader bug\\x1b[2J)" in h2.reason


def test_a_huge_number_in_one_report_leaves_the_rest_judged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # issue 40 item 7: a 401-digit integer where a float belongs raised OverflowError: exit 3 for the whole fleet
    write(tmp_path, "h1.json", report("h1", fail=True, created=recent()))
    bad = report("h2", created=recent())
    bad["phases"][0]["seconds"] = int("9" * 401)
    write(tmp_path, "h2.json", bad)
    code = main(["fleet", "report", str(tmp_path), "--json", "-"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and out["exit_code"] == 1  # h1's failure is still the fleet's verdict
    silent = [n["node"] for c in out["classes"] for n in c["nodes"]["no_verdict"]]
    assert len(silent) == 1 and (silent[0] == "h2" or silent[0].endswith("h2.json")), out  # that node: no verdict


def test_a_reports_folder_through_a_symlink_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    real = tmp_path / "real"
    real.mkdir()
    write(real, "h1.json", report("h1", created=recent()))
    os.symlink(real, tmp_path / "reports")
    assert main(["fleet", "report", str(tmp_path / "reports"), "--json", "-"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["reports"] == 1 and out["classes"][0]["nodes"]["pass"] == ["h1"]
    os.symlink(tmp_path / "gone", tmp_path / "dangling")
    assert main(["fleet", "report", str(tmp_path / "dangling")]) == 2
    err = capsys.readouterr().err
    assert "a symlink to" in err and "which does not exist" in err and "hint:" in err
    os.symlink(real / "h1.json", tmp_path / "h1.json")  # a link to one report is still refused, and says why
    (result,) = trust.gather([str(tmp_path / "h1.json")], Limits())
    assert result.outcome == NO_VERDICT and "a symlink" in result.reason

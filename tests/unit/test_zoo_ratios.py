"""The zoo's ratios: build / bare export + compile, build / the bare script's whole process
(``zoo.parity.bare_process_s``), and the twin-schedule A/B table (``zoo.ab``)."""

from __future__ import annotations

from typing import Any

import pytest

from zoo import ab, parity


def _bare(**kw: Any) -> dict[str, Any]:
    base = {"ok": True, "seconds": 100.0, "wall_s": 130.0, "eager_s": 4.0, "load_s": 2.0, "run_s": 1.0}
    return {**base, **kw}


def test_the_bare_process_leaves_out_what_only_the_zoo_does() -> None:
    # the child's wall less the eager reference run, the load and the run of the package
    assert parity.bare_process_s(_bare()) == pytest.approx(123.0)
    # a run that did not record them has no such figure (never the flattering wall time instead)
    assert parity.bare_process_s(_bare(eager_s=None)) is None
    assert parity.bare_process_s(_bare(wall_s=None)) is None


def _result(name: str, bare: dict[str, Any] | None, build_s: float | None, twin_s: float = 10.0) -> dict[str, Any]:
    build: dict[str, Any] = {"ok": build_s is not None, "seconds": build_s}
    if build_s is not None:
        build["phases"] = {"debug_twin": {"status": "passed", "seconds": twin_s}}
    return {"name": name, "bare": bare, "build": build}


def test_ab_rows_divide_both_runs_by_run_as_bare_times() -> None:
    a = {
        "jobs": 2,
        "build_args": ["--twin-schedule", "after"],
        "results": [_result("m1", _bare(), 130.0), _result("m2", _bare(seconds=50.0), None)],
    }
    b = {
        "jobs": 2,
        "build_args": ["--twin-schedule", "concurrent"],
        "results": [_result("m1", None, 110.0, 2.0), _result("m2", None, 60.0)],
    }
    m1, m2 = ab.rows(a, b)
    assert (m1["a_ratio"], m1["b_ratio"]) == (1.3, 1.1)
    assert (m1["a_process"], m1["b_process"]) == (round(130 / 123, 2), round(110 / 123, 2))
    assert (m1["a_twin_s"], m1["b_twin_s"]) == (10.0, 2.0)
    # a build that did not finish has no ratio; the other run's still does
    assert m2["a_ratio"] is None and m2["b_ratio"] == 1.2
    text = ab.markdown(a, b)
    assert "`--twin-schedule after`: build / bare median 1.30 over 1 model(s)" in text
    assert "`--twin-schedule concurrent`: build / bare median 1.15 over 2 model(s)" in text


def _full(name: str, bare: dict[str, Any] | None, build_s: float | None, *, ok: bool = True) -> dict[str, Any]:
    r = _result(name, bare, build_s)
    r["probe"] = {"ok": ok}
    r["guard"] = {"ok": ok}
    if bare is None:
        del r["bare"]
    return parity.judge(r)


def test_a_no_bare_rerun_keeps_the_earlier_bare_as_its_baseline() -> None:
    first = {
        "started": "T1",
        "results": [_full("bert", _bare(), None, ok=False), _full("gpt2", _bare(ok=False, seconds=None), None, ok=False)],
    }
    assert first["results"][0]["parity"] is False  # the bare path packaged it, aoti-guard did not
    rerun = {"started": "T2", "results": [_full("bert", None, 150.0), _full("gpt2", None, 90.0)]}
    assert rerun["results"][0]["build"].get("ratio") is None  # no baseline in the rerun itself
    merged = {r["name"]: r for r in parity.merge_runs([first, rerun])["results"]}
    bert = merged["bert"]
    assert bert["bare"]["from_run"] == "T1" and bert["parity"] is True
    assert bert["build"]["ratio"] == 1.5 and bert["build"]["ratio_process"] == round(150 / 123, 2)
    assert "(run of T1)" in parity._bare_cell(bert)
    assert merged["gpt2"]["parity"] is True and merged["gpt2"]["build"].get("ratio") is None  # bare failed: no ratio
    # a second rerun still names the run that measured the bare path
    again = {"started": "T3", "results": [_full("bert", None, 140.0)]}
    chained = {r["name"]: r for r in parity.merge_runs([first, rerun, again])["results"]}
    assert chained["bert"]["bare"]["from_run"] == "T1" and chained["bert"]["build"]["ratio"] == 1.4
    # the saved runs themselves are left as they were
    assert rerun["results"][0]["build"].get("ratio") is None and "from_run" not in first["results"][0]["bare"]


@pytest.mark.parametrize("keep", [True, False])
def test_packages_go_once_a_model_is_done_unless_kept(tmp_path: Any, monkeypatch: pytest.MonkeyPatch, keep: bool) -> None:
    """The GPU run of nine full-size models filled the machine's disk: without --out each model's
    packages are deleted once its steps are done."""
    import os

    def fake_run_model(name: str, **kw: Any) -> dict[str, Any]:
        for suffix in (".pt2", ".rejected.pt2", ".build.log"):
            (tmp_path / f"{name}{suffix}").write_text("x")
        return {"name": name, "parity": True}

    monkeypatch.setattr(parity, "run_model", fake_run_model)
    results = parity.run_parity(["m1", "m2"], size="small", device="cpu", out_dir=str(tmp_path), timeout=10, jobs=2, keep_packages=keep)
    assert [r["name"] for r in results] == ["m1", "m2"]
    left = sorted(os.listdir(tmp_path))
    if keep:
        assert left == sorted(f"{n}{s}" for n in ("m1", "m2") for s in (".pt2", ".rejected.pt2", ".build.log"))
    else:
        assert left == ["m1.build.log", "m2.build.log"]  # the logs stay with the run's folder


def test_a_tool_failure_keeps_its_exception_in_the_summary() -> None:
    finding = {
        "severity": "error",
        "code": "tool.bug",
        "message": "build failed unexpectedly (a bug)",
        "evidence": {"exception": "OSError: [Errno 28] No space left on device"},
    }
    report = {"phases": [{"name": "cli", "findings": [finding]}]}
    assert parity._first_error(report) == "tool.bug: build failed unexpectedly (a bug) (OSError: [Errno 28] No space left on device)"
    finding["code"] = "build.export_failed"
    assert parity._first_error(report) == "build.export_failed: build failed unexpectedly (a bug)"


def _record_overlaps(monkeypatch: pytest.MonkeyPatch, seconds: float) -> list[set[str]]:
    """run_model replaced by a sleep of ``seconds``; returns, as they start, the models running at once."""
    import threading
    import time

    lock = threading.Lock()
    running: set[str] = set()
    overlaps: list[set[str]] = []

    def fake_run_model(name: str, **kw: Any) -> dict[str, Any]:
        with lock:
            running.add(name)
            overlaps.append(set(running))
        time.sleep(seconds)
        with lock:
            running.discard(name)
        return {"name": name, "parity": True}

    monkeypatch.setattr(parity, "run_model", fake_run_model)
    return overlaps


def test_heavy_models_run_one_at_a_time_beside_the_others(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Four full-size models of GBs of weights at once filled the GPU machine's 64 GB disk: the
    ``one_at_a_time`` models never overlap one another, while the others still run beside them."""
    overlaps = _record_overlaps(monkeypatch, 0.05)
    names = ["big1", "big2", "big3", "a", "b", "c", "d"]
    results = parity.run_parity(
        names, size="full", device="cuda", out_dir=str(tmp_path), timeout=10, jobs=3, one_at_a_time={"big1", "big2", "big3"}
    )
    assert [r["name"] for r in results] == names  # in the order asked for
    assert all(len(seen & {"big1", "big2", "big3"}) <= 1 for seen in overlaps)
    assert any(len(seen) >= 2 for seen in overlaps)  # not simply serial
    assert max(len(seen) for seen in overlaps) <= 3  # jobs still bounds the whole


def test_a_bare_path_cut_by_the_deadline_is_not_a_bare_failure() -> None:
    """bart's bare path was cut by a GPU call's deadline and the run said "parity: yes"."""
    cut = parity.judge({**_result("bart", {"ok": False, "error": "timeout", "deadline": True}, None), "incomplete": "deadline"})
    assert cut["parity"] is None
    failed = parity.judge(_result("bart", {"ok": False, "error": "export failed"}, None))
    assert failed["parity"] is True  # a bare path that really fails leaves nothing to match


def test_a_series_does_not_measure_a_bare_path_twice(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPU call's deadline cut llama's build after its bare path had packaged it: the next call
    of the series builds it without spending the bare path's minutes again, and the report over
    the series takes the earlier bare path (merge_runs)."""
    asked: dict[str, bool] = {}

    def fake_run_model(name: str, **kw: Any) -> dict[str, Any]:
        asked[name] = kw["bare"]
        return {"name": name, "parity": True}

    monkeypatch.setattr(parity, "run_model", fake_run_model)
    parity.run_parity(["llama", "gpt2"], size="full", device="cuda", out_dir=str(tmp_path), timeout=10, bare_done={"llama"})
    assert asked == {"llama": False, "gpt2": True}
    first = {"started": "t1", "results": [{**_result("llama", _bare(), None), "incomplete": "deadline"}]}
    second = {"started": "t2", "results": [_result("llama", None, 150.0)]}
    merged = parity.merge_runs([first, second])["results"][0]
    assert merged["bare"]["from_run"] == "t1" and merged["build"]["ratio"] == 1.5


def test_a_result_cut_by_a_later_deadline_does_not_replace_a_complete_one() -> None:
    """resnet-like models passed in one GPU call and were cut by the next call's deadline: the
    report over the series kept the cut result and counted them as not packaged."""
    done = {**_result("regnet", _bare(), 130.0), "parity": True}
    cut = {**_result("regnet", {"ok": False, "deadline": True}, None), "incomplete": "deadline"}
    merged = parity.merge_runs([{"started": "t1", "results": [done]}, {"started": "t2", "results": [cut]}])
    assert merged["results"][0]["build"]["seconds"] == 130.0 and merged["results"][0]["run_started"] == "t1"
    again = {**_result("regnet", _bare(), 120.0), "parity": True}  # a later complete result still replaces it
    merged = parity.merge_runs([{"started": "t1", "results": [done]}, {"started": "t3", "results": [again]}])
    assert merged["results"][0]["build"]["seconds"] == 120.0


def test_a_cut_rerun_still_brings_its_newer_bare_path() -> None:
    """llama's bare path failed under an older definition of its dims (parity then held, as the
    bare path failed); a later call packaged it and was cut: the bare failure no longer stands."""
    old = parity.judge({**_result("llama", {"ok": False, "error": "export failed"}, None)})
    assert old["parity"] is True
    cut = {**_result("llama", _bare(), None), "incomplete": "deadline"}
    merged = parity.merge_runs([{"started": "t1", "results": [old]}, {"started": "t2", "results": [cut]}])["results"][0]
    assert merged["bare"]["ok"] and merged["bare"]["from_run"] == "t2" and merged["parity"] is False


def test_the_summary_divides_package_bytes_and_counts_shared_twins() -> None:
    def row(name: str, bare_bytes: int, build_bytes: int, weights: str) -> dict[str, Any]:
        r = _full(name, _bare(package_bytes=bare_bytes), 150.0)
        r["build"].update(ratio=1.5, package_bytes=build_bytes, twin={"weights": weights, "kernels": 3, "max_abs_vs_release": 0.0})
        r["parity"] = True
        return r

    run = {"results": [row("a", 100, 110, "release"), row("b", 100, 205, "own"), row("c", 100, 120, "release")]}
    text = parity.summary(run)
    assert "Package bytes / the bare package's, median over 3 models: **1.20** (min 1.10, max 2.05)" in text
    assert "shared the release model's weights in 2 of them" in text
    summarized = parity.summarize_build(
        {
            "phases": [{"name": "validate", "detail": {"twin": {"kernels": ["k1", "k2"], "max_abs_vs_release": 0.0}}}],
            "extra": {"manifest_summary": {"twin_weights": "release"}},
        }
    )
    assert summarized["twin"] == {"max_abs_vs_release": 0.0, "kernels": 2, "weights": "release"}
    package = {
        "timings": {"twin": 0.5, "hashes": 2.0},
        "early_hashes": {"entries": 3, "bytes": 10, "waited_s": 0.1},
        "constant_digests": {"early": 7, "again": 1, "bytes": 99, "waited_s": 0.0},
    }
    with_package = parity.summarize_build({"phases": [{"name": "package", "detail": package}]})
    assert with_package["package_timings"] == {"twin": 0.5, "hashes": 2.0}  # where a GPU run's package phase went
    assert with_package["early_hashes"]["entries"] == 3
    assert with_package["constant_digests"] == package["constant_digests"]  # kept for the next GPU run to read out


def test_a_refusal_for_an_established_cause_is_a_catch_not_a_parity_failure() -> None:
    """timm_vit_tiny on the GPU: the bare path shipped a package wrong at every size but 224 px;
    aoti-guard's refusal for the export guard counts for parity (docs/zoo.md)."""
    refused = _result("timm_vit_tiny", _bare(), None)
    refused["build"]["error_codes"] = ["build.export_specialized", "build.validation_failed", "build.first_divergence"]
    judged = parity.judge(refused)
    assert judged["catch"] is True and judged["parity"] is True and judged["aoti_guard_ok"] is False
    assert "caught 1 (timm_vit_tiny)" in parity.summary({"results": [judged]})
    # a refusal that names no established cause is still a parity failure
    plain = _result("other", _bare(), None)
    plain["build"]["error_codes"] = ["build.validation_failed"]
    assert parity.judge(plain)["catch"] is False and parity.judge(plain)["parity"] is False
    # a bare path that failed too is parity as before, not a catch
    both = _result("x", {"ok": False, "error": "export failed"}, None)
    both["build"]["error_codes"] = ["build.export_specialized"]
    assert parity.judge(both)["catch"] is False and parity.judge(both)["parity"] is True


# --- a fair ratio over a series of calls (zoo/schedule.py, --same-call) -----------------------------


def test_expected_seconds_take_each_step_from_the_latest_run_that_had_it() -> None:
    from zoo import schedule

    old = {
        "results": [
            {"name": "m", "bare": _bare(wall_s=90.0), "build": {"ok": True, "seconds": 100.0}, "probe": {"ok": True, "seconds": 9.0}}
        ]
    }
    new = {"results": [{"name": "m", "bare": None, "build": {"ok": True, "seconds": 120.0}, "guard": {"ok": True, "seconds": 5.0}}]}
    only_build = {"results": [{"name": "n", "build": {"ok": True, "seconds": 50.0}}]}
    failed = {"results": [{"name": "x", "build": {"ok": False, "seconds": 3.0}}]}
    got = schedule.expected_seconds([old, new, only_build, failed])
    # m: the bare child's whole wall (90), the newer build (120), the probe (9) and guard (5)
    assert got == {"m": 224.0, "n": 90.0}  # n: its bare path estimated at 0.8 of its build; x: no estimate
    assert schedule.longest_first(["n", "m", "new"], got) == ["new", "m", "n"]


def test_a_model_that_would_not_finish_in_the_call_is_not_started(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ratio of a bare path from one call and a build from another is not fair: a model whose
    steps would outlast the call's deadline waits for the next call, and a shorter one that fits
    still runs."""
    import time

    started: list[str] = []

    def fake_run_model(name: str, **kw: Any) -> dict[str, Any]:
        started.append(name)
        return {"name": name, "parity": True}

    monkeypatch.setattr(parity, "run_model", fake_run_model)
    results = parity.run_parity(
        ["long", "short", "unknown"],
        size="full",
        device="cuda",
        out_dir=str(tmp_path),
        timeout=10,
        deadline=time.monotonic() + 100,
        expected={"long": 400.0, "short": 60.0},
    )
    assert started == ["short", "unknown"]  # without an estimate it is tried
    assert [r["name"] for r in results] == ["short", "unknown"]


def test_same_call_measures_the_bare_path_again_and_runs_longest_first(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    asked: list[tuple[str, bool]] = []

    def fake_run_model(name: str, **kw: Any) -> dict[str, Any]:
        asked.append((name, kw["bare"]))
        return {"name": name, "parity": True, "build": {"ok": True}}

    monkeypatch.setattr(parity, "run_model", fake_run_model)
    earlier = tmp_path / "call1.json"  # resnet18's bare path packaged, its build cut by the deadline
    earlier.write_text(json.dumps({"results": [{"name": "resnet18", "bare": _bare(), "build": {"ok": False}, "incomplete": "deadline"}]}))
    estimates = tmp_path / "old.json"
    estimates.write_text(
        json.dumps(
            {
                "results": [
                    {"name": "bert", "build": {"ok": True, "seconds": 50.0}},
                    {"name": "resnet18", "build": {"ok": True, "seconds": 90.0}},
                ]
            }
        )
    )
    common = ["bert", "resnet18", "--rest-of", str(earlier), "--json", str(tmp_path / "out.json")]
    parity.main([*common, "--same-call", "--expect", str(estimates)])
    assert asked == [("resnet18", True), ("bert", True)]  # the bare path again, and the longer first
    asked.clear()
    parity.main(common)  # without --same-call, the series keeps the earlier bare path
    assert asked == [("bert", True), ("resnet18", False)]


def test_two_heavy_lanes_let_two_heavy_models_overlap_but_not_three(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    overlaps = _record_overlaps(monkeypatch, 0.1)
    heavy = {"big1", "big2", "big3"}
    parity.run_parity(
        [*sorted(heavy), "a", "b"],
        size="full",
        device="cuda",
        out_dir=str(tmp_path),
        timeout=10,
        jobs=4,
        one_at_a_time=heavy,
        heavy_lanes=2,
    )
    most = max(len(seen & heavy) for seen in overlaps)
    assert most == 2


def test_the_build_timeline_reads_the_log_files_events(tmp_path: Any) -> None:
    log = tmp_path / "build.log"
    log.write_text(
        "2026-11-25T17:09:55.100 [resolve] start\n"
        "2026-11-25T17:09:56.350 [resolve] passed in 0.59s\n"
        "2026-11-25T17:10:13 [validate] validating one sample at a time: eager, float64 and the compiled model in a child\n"
        "2026-11-25T17:10:18.000 DeprecationWarning _script.py:365: torch noise without a phase\n"
        "not a line of the log at all\n"
    )
    rows = parity.build_timeline(str(log))
    assert rows[0] == [0.0, "resolve", "start"]
    assert rows[1] == [1.25, "resolve", "passed in 0.59s"]
    assert rows[2][0] == pytest.approx(17.9) and rows[2][1] == "validate"
    assert len(rows) == 3  # lines without a phase are not events
    assert parity.build_timeline(str(tmp_path / "missing.log")) == []


def test_steps_choose_what_runs_and_without_probe_and_guard_no_parity_is_judged(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[str] = []
    monkeypatch.setattr(parity, "bare_step", lambda *a, **k: ran.append("bare") or _bare())
    monkeypatch.setattr(parity, "build_step", lambda *a, **k: ran.append("build") or {"ok": True, "seconds": 150.0, "package": "m.pt2"})
    monkeypatch.setattr(parity, "probe_step", lambda *a, **k: ran.append("probe") or {"ok": True})
    monkeypatch.setattr(parity, "guard_step", lambda *a, **k: ran.append("guard") or {"ok": True})
    r = parity.run_model("resnet18", out_dir=str(tmp_path), steps_wanted=("bare", "build"))
    assert ran == ["bare", "build"] and r["steps"] == ["bare", "build"]
    assert r["parity"] is None and r["build"]["ratio"] == 1.5  # the ratio is the point of such a run
    text = parity.summary({"results": [r]})
    assert text.startswith("No parity judged: --steps left out probe and guard for all 1 model(s) run; 1 built")
    assert "Parity 0/0" not in text and "Bare path not run" not in text  # it ran: the summary said otherwise
    with pytest.raises(SystemExit):
        parity.main(["resnet18", "--steps", "bare,probes"])  # a typo is refused before anything runs
    with pytest.raises(SystemExit):
        parity.main(["resnet18", "--steps", "bare"])  # the build always runs


def test_a_saved_run_holds_no_machine_paths() -> None:
    run = {
        "command": "python -m zoo.parity bert --json /somewhere/out/gpu.json --expect /home/u/old.json /home/u/x.json docs/zoo-runs/y.json "
        "--out /scratch/o --paired",
        "results": [{"name": "bert", "build": {"ok": True, "package": "/tmp/zoo-parity-abc/bert.pt2"}}],
    }
    public = parity.public_run(run)
    # every file of a list (--expect A B C), not only the first
    assert public["command"] == "python -m zoo.parity bert --json gpu.json --expect old.json x.json y.json --out OUT --paired"
    assert public["results"][0]["build"]["package"] == "bert.pt2"
    assert run["results"][0]["build"]["package"].startswith("/tmp/")  # the run in memory keeps its paths


def test_the_ratio_table_says_where_the_builds_extra_seconds_go() -> None:
    from zoo import ratios

    bare = {**_bare(), "export_s": 10.0, "compile_s": 90.0}  # process 123: 23 s of start-up
    phases = {"export": 11.0, "compile": 100.0, "validate": 5.0, "debug_twin": 4.0, "package": 1.0}
    build = {"ok": True, "seconds": 150.0, "phases": {k: {"seconds": v} for k, v in phases.items()}}
    extra = ratios.extra_seconds(bare, build)
    assert extra == {"startup": 6.0, "export": 1.0, "compile": 10.0, "validate": 5.0, "debug_twin": 4.0, "package": 1.0}
    assert sum(extra.values()) == pytest.approx(150.0 - 123.0)  # the parts add up to build - bare process
    run = {"jobs": 8, "results": [{"name": "m", "bare": bare, "build": build}, {"name": "cut", "bare": bare, "build": {"ok": False}}]}
    (row,) = ratios.rows([run])  # a model whose build did not finish has no row
    assert (row["ratio"], row["ratio_process"]) == (1.5, round(150 / 123, 2))
    text = ratios.markdown([run])
    assert "Build / bare process, median over 1 models: **1.22" in text and "| m | 100.0 | 123.0 | 150.0 | 1.22 | 1.50 |" in text
    assert text.splitlines()[2].endswith("| 8 at a time |")
    assert ratios.markdown([{**run, "paired": True}]).splitlines()[2].endswith("| 4 paired |")  # 8 processes


def test_paired_runs_the_bare_path_beside_the_build_and_probe_after_both(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--paired``: llama_cache's bare path (~220 s) and build (~340 s) one after the other did
    not fit in a 10-minute GPU call; side by side they run under the same load and do."""
    import threading
    import time

    lock = threading.Lock()
    events: list[tuple[str, str]] = []

    def step(kind: str, seconds: float) -> Any:
        def run(*args: Any) -> dict[str, Any]:
            with lock:
                events.append(("start", kind))
            time.sleep(seconds)
            with lock:
                events.append(("end", kind))
            out: dict[str, Any] = {"ok": True, "seconds": seconds}
            return {**out, "package": str(tmp_path / "m.pt2")} if kind == "build" else out

        return run

    monkeypatch.setattr(parity, "bare_step", step("bare", 0.2))
    monkeypatch.setattr(parity, "build_step", step("build", 0.1))
    monkeypatch.setattr(parity, "probe_step", step("probe", 0.0))
    monkeypatch.setattr(parity, "guard_step", step("guard", 0.0))
    r = parity.run_model("resnet18", out_dir=str(tmp_path), timeout=100, paired=True)
    assert events[:2] in ([("start", "bare"), ("start", "build")], [("start", "build"), ("start", "bare")])
    assert events.index(("start", "probe")) > events.index(("end", "bare"))  # probe waits for both
    assert r["bare"]["ok"] and r["build"]["ok"] and r["probe"]["ok"] and r["guard"]["ok"]
    events.clear()
    parity.run_model("resnet18", out_dir=str(tmp_path), timeout=100)  # not paired: one after the other
    assert events[:3] == [("start", "bare"), ("end", "bare"), ("start", "build")]


def test_paired_jobs_count_processes_and_the_estimate_takes_the_longer_step(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from zoo import schedule

    overlaps = _record_overlaps(monkeypatch, 0.05)
    names = ["a", "b", "c", "d", "e"]
    parity.run_parity(names, size="full", device="cuda", out_dir=str(tmp_path), timeout=10, jobs=4, paired=True)
    assert max(len(seen) for seen in overlaps) == 2  # 4 processes: 2 models, each a bare path and a build
    run = {"results": [{"name": "m", "bare": _bare(wall_s=90.0), "build": {"ok": True, "seconds": 120.0}}]}
    assert schedule.expected_seconds([run], steps=("bare", "build")) == {"m": 210.0}
    assert schedule.expected_seconds([run], steps=("bare", "build"), paired=True) == {"m": 120.0}

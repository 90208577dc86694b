"""The debug twin's level-2 printer, read against the build's non-finite baseline (issue 26), on
output recorded on CPU (torch 2.13.0+cpu, 2026-11-25; ``python -m bench.twin_printer``, removed, last in commit e01756b):

- ``masked_nan_*``: tests/integration/models.py ``masked_nan``, an additive causal mask (graph
  input ``arg7_1``, -inf by design, copied into ``buf2`` by baddbmm) and a sqrt that turns NaN on a
  negative input (``bad``: x[0, 1, 2] = -1);
- ``opt_*``: zoo ``opt`` (small), which builds its own -inf mask (``buf11``, ``buf31``); ``nan_weight``
  ran with NaN loaded into model.decoder.layers.1.self_attn.v_proj.weight.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from runtime_probe.ladder import printer, steps
from runtime_probe.ladder.findings import TwinContext, twin_findings
from runtime_probe.ladder.readers import kernel_trace
from runtime_probe.reporting.findings import Severity
from runtime_probe.reporting.report import make_phase

DATA = Path(__file__).parent / "data" / "printer"
MASK_BASELINE = {"arg7_1": ["-inf"], "buf2": ["-inf"]}


def prints(name: str) -> list[printer.Print]:
    return printer.parse_prints((DATA / name).read_text())


def test_the_graph_inputs_are_read_in_order_with_their_kinds() -> None:
    inputs = [p for p in prints("masked_nan_good.stdout") if p.when == "input"]
    assert [(p.name, p.input_index, sorted(p.kinds)) for p in inputs] == [("arg6_1", 0, []), ("arg7_1", 1, ["-inf"])]


def test_the_baseline_is_the_intended_inf_and_nothing_before_a_launch() -> None:
    # the recording's before_launch prints of buf0/buf1 read -nan (memory not yet written): not in it
    assert printer.baseline([prints("masked_nan_good.stdout")]) == MASK_BASELINE
    assert printer.baseline([prints("opt_good.stdout")]) == {"buf11": ["-inf"], "buf31": ["-inf"]}


def test_the_first_nan_past_the_mask_names_the_sqrt_kernel() -> None:
    d = printer.first_departure(prints("masked_nan_bad.stdout"), MASK_BASELINE)
    assert d is not None
    assert (d.name, d.kernel, d.kinds, d.kind) == ("buf7", "cpp_fused_add_mul_sqrt_2", ("nan",), "NaN")


def test_a_nan_weight_in_a_transformer_is_named_past_its_own_mask() -> None:
    base = printer.baseline([prints("opt_good.stdout")])
    d = printer.first_departure(prints("opt_nan_weight.stdout"), base)
    assert d is not None and (d.name, d.kernel, d.kinds) == ("buf29", "aoti_torch_cpu_addmm_out", ("nan",))
    assert printer.first_departure(prints("opt_good.stdout"), base) is None


def test_an_inf_the_baseline_does_not_hold_departs() -> None:
    d = printer.first_departure(prints("masked_nan_good.stdout"), {"arg7_1": ["-inf"]})
    assert d is not None and (d.name, d.kernel, d.kinds, d.kind) == ("buf2", "aoti_torch_cpu_baddbmm_out", ("-inf",), "-Inf")
    d = printer.first_departure(prints("masked_nan_good.stdout"), {})
    assert d is not None and (d.name, d.kernel, d.input_index) == ("arg7_1", None, 1)


def _block(when: str, kernel: str, name: str, lo: str, hi: str) -> str:
    head = f"[  {when} - {kernel} - {name}  ]:" if kernel else f"[  aoti_model_inputs - {name}  ]:"
    return f"{head}\nNumber of elements: 8\nDtype: float32\nMean value: 0\nMin value: {lo}\nMax value: {hi}\nDevice: cpu\n\n"


def test_a_buffer_printed_before_it_is_whole_is_no_departure() -> None:
    # a concatenation's output: the first kernel's print shows the half it has not written
    text = _block("after_launch", "cpp_fused_cat_0", "buf3", "-nan", "-nan") + _block("after_launch", "cpp_fused_cat_1", "buf3", "0", "1")
    text += _block("after_launch", "cpp_fused_log_2", "buf4", "-inf", "inf")
    d = printer.first_departure(printer.parse_prints(text), {})
    assert d is not None and (d.name, d.kernel, d.kinds, d.kind) == ("buf4", "cpp_fused_log_2", ("-inf", "+inf"), "-Inf and +Inf")


def test_the_kernel_trace_reads_level_2_once_per_launch() -> None:
    trace = kernel_trace((DATA / "masked_nan_bad.stdout").read_text())
    assert trace.launched == (
        "aoti_torch_cpu_addmm_out",
        "aoti_torch_cpu_addmm_out",
        "aoti_torch_cpu_baddbmm_out",
        "cpp_fused__softmax_0",
        "aoti_torch_cpu_addmm_out",
        "cpp_fused__softmax_1",
        "aoti_torch_cpu_bmm_out",
        "cpp_fused_add_mul_sqrt_2",
    )
    assert trace.unfinished is None and trace.last_finished == "cpp_fused_add_mul_sqrt_2"


def test_twin_findings_name_the_nan_kernel_not_the_mask() -> None:
    found, evidence = twin_findings(
        (DATA / "masked_nan_bad.stdout").read_text(),
        "",
        replay_kind="nonfinite",
        device_type="cpu",
        crash_signal=None,
        context=TwinContext(baseline=MASK_BASELINE, input_name=lambda i: ["x", "mask"][i], sample="the --inputs"),
    )
    [f] = found
    assert f.severity is Severity.ERROR and f.code == "run.nonfinite"
    assert f.evidence["kernel"] == "cpp_fused_add_mul_sqrt_2" and f.evidence["buffer"] == "buf7"
    assert f.message.startswith("the first NaN appears on the --inputs in buf7, written by kernel cpp_fused_add_mul_sqrt_2")
    assert "mask (arg7_1) (-inf), buf2 (-inf)" in f.message and f.expected == "buf7 finite"
    assert evidence["departure"]["name"] == "buf7"


def test_twin_findings_name_an_input_that_holds_nan_on_entry() -> None:
    text = _block("", "", "arg0_1", "0", "1") + _block("", "", "arg1_1", "nan", "nan")
    found, _ = twin_findings(
        text,
        "",
        replay_kind="nonfinite",
        device_type="cpu",
        crash_signal=None,
        context=TwinContext(baseline={}, input_name=lambda i: ["x", "mask"][i]),
    )
    [f] = found
    assert f.severity is Severity.ERROR and f.evidence["argument"] == "mask" and "before any kernel ran" in f.message


def test_an_old_twins_assert_on_an_inf_is_no_cause() -> None:
    """A twin built with NaN asserts (before issue 26) stops at the mask: a warning, not a verdict."""
    stderr = "RuntimeError: At least one INF in arg1_1\n"
    found, _ = twin_findings("[ before_launch: cpp_fused_0 ]\n", stderr, replay_kind="nonfinite", device_type="cpu", crash_signal=None)
    [f] = found
    assert f.severity is Severity.WARNING and "may be intended" in f.message and "rebuild the package" in (f.hint or "")


def test_no_verdict_is_an_error_naming_what_was_tried() -> None:
    replay = steps.Replay("run", "nonfinite", {}, sample="the --inputs")
    tried = [
        {"step": "strict", "outcome": "non-finite output", "evidence": {}},
        {"step": "twin", "outcome": "skipped", "evidence": {"reason": "no twin"}},
    ]
    f = steps.no_verdict(replay, tried)
    assert f.severity is Severity.ERROR and f.code == "escalate.no_verdict"
    assert "strict (non-finite output), twin (skipped: no twin)" in f.message and "the --inputs" in f.message


def test_a_ladder_whose_twin_names_nothing_does_not_pass(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The twin ran and every value it printed is in the baseline: the phase fails with
    escalate.no_verdict instead of reading as passed."""
    good = (DATA / "masked_nan_good.stdout").read_text()

    def attempt(ctx: Any, replay: Any, target: Any, **kw: Any) -> Any:
        printed = good if target.path.endswith("twin.pt2") else ""  # the twin prints; the strict rerun does not
        return steps._Outcome(False, printed, "", None, {"outputs": {"y": {"nonfinite": 3}}})

    baseline = SimpleNamespace(names={k: tuple(v) for k, v in MASK_BASELINE.items()})
    manifest = SimpleNamespace(
        model_name="model",
        twin=SimpleNamespace(model_name="debug_twin", nonfinite=baseline),
        io=SimpleNamespace(tensor_input_name=lambda i: ["x", "mask"][i]),
    )
    monkeypatch.setattr(steps, "_attempt", attempt)
    monkeypatch.setattr(steps, "materialize_twin", lambda archive, m, folder: str(tmp_path / "twin.pt2"))
    monkeypatch.setattr(steps, "twin_constants_from", lambda path, m: None)
    ctx = steps.LadderContext(
        path=str(tmp_path / "m.pt2"),
        archive=None,  # type: ignore[arg-type]
        manifest=manifest,  # type: ignore[arg-type]
        device_type="cpu",
        device_index=None,
        python=None,
        env={},
        tmp=str(tmp_path),
        host={},
        deadline=time.monotonic() + 60,
        step_timeout=30,
    )
    found = steps.run_ladder(ctx, steps.Replay("run", "nonfinite", {"x": 1}, sample="golden sample example"))
    assert [f.code for f in found] == ["escalate.no_verdict"]
    assert "twin (non-finite output)" in found[0].message
    assert make_phase("escalate", 1.0, found).status == "failed"


def test_the_cuda_printer_is_read_past_its_scalar_arguments() -> None:
    """Recorded on the H100 (torch 2.11, run 15): a Triton kernel's scalar argument prints as
    ``[  after_launch - K - 192L: 192  ]\\n`` with a literal backslash-n, so the next block's header
    follows on the same line. Read as lines, buf8's NaN was never seen and nothing was named."""
    good, bad = prints("cuda_masked_nan_good.stdout"), prints("cuda_masked_nan_bad.stdout")
    base = printer.baseline([good])
    assert base == {"arg7_1": ["-inf"], "buf2": ["-inf"]}
    assert printer.first_departure(good, base) is None
    d = printer.first_departure(bad, base)
    assert d is not None and (d.name, d.kernel, d.kinds) == ("buf8", "triton_poi_fused_add_mul_sqrt_2", ("nan",))

"""Every parser of package content is linear (issue 40, finding 5): megabytes of its worst pattern
within a fixed CPU-time bound.

Each case is the input that made a backtracking pattern rescan the rest of its text from every
start: 370 KB of ``constants_info_[0].a = `` kept the old ``_CONST`` busy for minutes (tenfold
input, about hundredfold time), so 4 MB would take hours there. CPU time, not wall time, is
measured: the bound holds on a loaded machine too.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from runtime_probe.formats.wrapper_cpp import parse_wrapper_cpp, size_checks

MB = 1 << 20
BOUND_S = 2.0


def _repeat(unit: str, size: int = 4 * MB) -> str:
    return unit * (size // len(unit))


def _within_bound(parse: Callable[[], object]) -> float:
    started = time.process_time()
    parse()
    spent = time.process_time() - started
    assert spent < BOUND_S, f"{spent:.1f} s of CPU for 4 MB: not linear"
    return spent


WRAPPER_CASES = {
    # the input: an assignment head repeated on one line, never ended by ";"
    "assignment heads on one line": _repeat("constants_info_[0].a = "),
    "assignment heads, one per line": _repeat("constants_info_[0].a = x\n"),
    "semicolons and spaces after a head": "constants_info_[0].a = " + _repeat("; "),
    "opening braces in a shape": "constants_info_[0].shape = " + _repeat("{") + ";",
    "opening braces, one shape per line": _repeat("constants_info_[0].shape = {{{{{{{{;\n"),
    "model base calls never closed": _repeat("AOTInductorModelBase(0,0,0,"),
    "model base call with commas to the end": "AOTInductorModelBase(1, 1, 2," + _repeat(", tru"),
    "model base digits": "AOTInductorModelBase(" + _repeat("1"),
    "index digits": "constants_info_[" + _repeat("9") + "].name = x;",
    "dtype names": _repeat("constants_info_[0].dtype = cached_torch_dtype_" + "a" * 100 + ";\n"),
    "compile command markers": _repeat("// Compile cmd \n"),
    "size check heads": _repeat('input_handles[0]: dim value is too large at 0, "   '),
    "size check digits": "input_handles[" + _repeat("7") + "]",
}


@pytest.mark.parametrize("text", WRAPPER_CASES.values(), ids=list(WRAPPER_CASES))
def test_the_wrapper_parser_is_linear(text: str) -> None:
    _within_bound(lambda: (parse_wrapper_cpp(text), size_checks([text])))


def test_the_wrapper_parser_reads_what_torch_generates() -> None:
    text = """
AOTInductorModel::AOTInductorModel(std::shared_ptr<ConstantMap> constants_map,
                                   std::optional<std::string> cubin_dir)
    : AOTInductorModelBase(1,
                           1,
                           2,
                           device_str,
                           std::move(cubin_dir),
                           true) {
    constants_info_[0].name = "lin_weight";
    constants_info_[0].dtype = cached_torch_dtype_float32;
    constants_info_[0].from_folded = false;
    constants_info_[0].type = static_cast<int32_t>(torch::aot_inductor::ConstantType::Parameter);
    constants_info_[0].shape = {16, 16};
    constants_info_[0].original_fqn = "lin.weight";
    constants_info_[1].name = "a;b";
    constants_info_[1].shape = {16L};
    constants_info_[1].original_fqn = "lin.bias";
    constants_info_[2].shape = {};
    constants_info_[DIGITS].name = "too_many_digits";
}
// Compile cmd
// g++ x.cpp -march=native -mavx2 -mfma -O3
""".replace("DIGITS", "9" * 5000)
    facts = parse_wrapper_cpp(text)
    assert (facts.num_constants, facts.include_weights) == (2, True)
    assert [(c.index, c.name, c.original_fqn, c.dtype, c.shape) for c in facts.constants] == [
        (0, "lin_weight", "lin.weight", "float32", (16, 16)),
        (1, "a;b", "lin.bias", None, (16,)),
        (2, "", "", None, ()),
    ]
    assert facts.constants[0].type == "Parameter" and not facts.constants[0].from_folded
    assert (facts.compiler, facts.march, facts.isa_flags) == ("g++", "native", ("-mavx2", "-mfma"))


def test_the_first_model_base_call_whose_flag_reads_counts() -> None:
    # a call cut short by ";" (no flag before it) is skipped, the next one read
    text = "AOTInductorModelBase(1, 1, 3, x; AOTInductorModelBase(1, 1, 4, d, c, false) {"
    facts = parse_wrapper_cpp(text)
    assert (facts.num_constants, facts.include_weights) == (4, False)
    assert parse_wrapper_cpp("AOTInductorModelBase(1, 1, 2, true)").num_constants is None  # the flag is a 4th argument

"""Every parser of package content is linear (issue 40, finding 5): megabytes of its worst pattern
within a fixed CPU-time bound.

Each case is the input that makes a parser do more than a constant amount of work per byte: a
backtracking pattern that rescans the rest of its text from every start (370 KB of
``constants_info_[0].a = `` kept the old ``_CONST`` busy for minutes: tenfold input, about
hundredfold time, so 4 MB would take hours), a list searched once per item, a number computed
without a bound. CPU time, not wall time, is measured: the bound holds on a loaded machine too.

The parsers, by what they read: the wrapper.cpp (formats/wrapper_cpp.py), the manifest (JSON,
formats/serde.py, package/manifest_rules.py with formats/symexpr.py), input names
(guard/inputs.py ``dotted``), pytree specs (formats/treespec.py), ELF and fatbin
(formats/elf.py), safetensors headers (formats/safetensors.py), the zip directory
(package/archive.py, formats/zip_layout.py), PEM key files (trust/signature.py).
"""

from __future__ import annotations

import copy
import json
import struct
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runtime_probe.formats import elf, safetensors, symexpr, treespec
from runtime_probe.formats.wrapper_cpp import parse_wrapper_cpp, size_checks
from runtime_probe.guard.inputs import dotted
from runtime_probe.package.archive import open_archive
from runtime_probe.package.manifest import parse_manifest
from runtime_probe.package.manifest_rules import check_manifest
from runtime_probe.trust.signature import public_key_from_pem

from .fakepkg import make_package
from .test_elf import Synth
from .test_manifest import minimal

MB = 1 << 20
BOUND_S = 2.0


def _repeat(unit: str, size: int = 4 * MB) -> str:
    """4 MB of ``unit``: the wrapper's cases (other parsers get 1 to 2 MB: a parser that is
    quadratic goes past the bound well before that, and the suite stays fast)."""
    return unit * (size // len(unit))


def _within_bound(parse: Callable[[], object]) -> float:
    started = time.process_time()
    parse()
    spent = time.process_time() - started
    assert spent < BOUND_S, f"{spent:.1f} s of CPU: not linear"
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
    # kernel loads (loadKernel("PATH", "NAME", ...)): heads never closed, literals that run to
    # their bound, escapes, a head inside a literal, and loads that all parse
    "kernel load heads on one line": _repeat('loadKernel("'),
    "kernel load path of escaped quotes": 'loadKernel("' + _repeat('\\"'),
    "kernel load paths at their bound": _repeat('loadKernel("' + "a" * 4090),
    "kernel load paths of backslashes": _repeat('loadKernel("' + "\\" * 3000),
    "kernel load names never closed": _repeat('loadKernel("a", "' + "b" * 1020),
    "kernel load heads inside a path": _repeat('loadKernel("loadKernel(\\"'),
    "kernel load spaces before a comma": _repeat('loadKernel("a"' + " " * 64),
    "kernel loads that parse": _repeat('loadKernel("/p/x.cubin", "k", 0, cubin_dir_); '),
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


def _manifest(**changes: Any) -> bytes:
    m = copy.deepcopy(minimal())
    m.update(changes)
    return json.dumps(m).encode()


def _io(**tensor: Any) -> dict[str, Any]:
    io = copy.deepcopy(minimal()["io"])
    io["inputs"][0]["tensor"].update(tensor)
    return io


_CONSTANT = {"kind": "parameter", "dtype": "float32", "shape": [16, 16], "sha256": "ab" * 32, "nbytes": 1024, "storage": "package"}
MANIFEST_CASES = {
    "15,000 constants": lambda: _manifest(constants=[{**_CONSTANT, "fqn": f"w{i}"} for i in range(15000)]),
    "30,000 hashes": lambda: _manifest(hashes={f"data/x{i}": "ab" * 32 for i in range(30000)}),
    "30,000 sizes of one expression": lambda: _manifest(
        io=_io(shape=[{"expr": "batch*2+1", "min": 1, "max": 64}] * 30000, stride=[1] * 30000)
    ),
    "15,000 sizes of distinct expressions": lambda: _manifest(
        io=_io(shape=[{"expr": f"batch*2+{i}", "min": 1, "max": 64} for i in range(15000)], stride=[1] * 15000)
    ),
    "a 2 MB input name": lambda: _manifest(io={**_io(), "inputs": [{**_io()["inputs"][0], "name": "x" + "['" * 1_000_000}]}),
    "2 MB of free JSON": lambda: _manifest(validation={"rows": [[1.5, 2, "s", None]] * 100_000}),
}


@pytest.mark.parametrize("make", MANIFEST_CASES.values(), ids=list(MANIFEST_CASES))
def test_the_manifest_reader_and_its_rules_are_linear(make: Callable[[], bytes], tmp_path: Path) -> None:
    archive, _ = open_archive(make_package(tmp_path / "m.pt2"))
    assert archive is not None
    raw = make()
    with archive:
        _within_bound(lambda: check_manifest(parse_manifest(raw), archive))


def test_input_names_are_made_dotted_in_linear_time() -> None:
    _within_bound(lambda: dotted("x" + "['" * 1_000_000))
    _within_bound(lambda: dotted("x" + "['a" * 500_000 + "\n']"))  # a key does not span lines
    assert dotted("past_key_values['key_cache'][0]") == "past_key_values.key_cache.0"
    assert dotted("""cfg["a'b"]['c\n']['d']""") == "cfg.a'b['c\n'].d"


def test_pytree_type_names_are_listed_in_linear_time() -> None:
    # a list's ``in`` made 60,000 distinct names take 40 s (30,000: 10 s)
    names = [{"type": f"m{i}.T", "context": "null", "children_spec": []} for i in range(30000)]
    spec = json.dumps([1, {"type": "builtins.tuple", "context": "null", "children_spec": names}])
    found: list[str] = []
    _within_bound(lambda: found.extend(treespec.type_names(spec)))
    assert len(found) == 30000 and found[:2] == ["m0.T", "m1.T"]


def test_a_size_expression_is_evaluated_within_64_bits() -> None:
    # ((x**8)**8)**8...: 120 characters whose value at x=2 is 2**(8**12)
    expr = "x"
    for _ in range(12):
        expr = f"({expr})**8"
    fn = symexpr.compile_expr(expr)
    started = time.process_time()
    with pytest.raises(symexpr.ExprError, match="beyond 64 bits"):
        fn({"x": 2})
    assert time.process_time() - started < BOUND_S
    with pytest.raises(symexpr.ExprError, match="beyond 64 bits"):
        symexpr.compile_expr("9" * 30)
    assert symexpr.compile_expr("768*h**2")({"h": 16}) == 196608


def test_a_pem_file_is_read_in_linear_time() -> None:
    for text in (b"-----BEGIN A-----" + b" " * 16000, b"-----BEGIN A-----\n" * 900):
        started = time.process_time()
        with pytest.raises(ValueError):
            public_key_from_pem(text)
        assert time.process_time() - started < BOUND_S


def test_elf_fatbin_safetensors_and_zip_readers_are_linear(tmp_path: Path) -> None:
    _within_bound(lambda: elf.parse_elf(Synth(needed=tuple(f"lib{i:06d}{'x' * 50}.so" for i in range(20000))).data))
    _within_bound(lambda: elf.parse_elf(Synth(needs={"libc.so.6": tuple(f"GLIBC_2.{i}{'x' * 40}" for i in range(20000))}).data))
    header = json.dumps({f"t{i}": {"dtype": "F32", "shape": [1], "data_offsets": [4 * i, 4 * i + 4]} for i in range(20000)}).encode()
    data = struct.pack("<Q", len(header)) + header
    _within_bound(lambda: safetensors.parse_header(data, file_size=len(data) + 4 * 20000))
    big = tmp_path / "big.pt2"
    with zipfile.ZipFile(big, "w", zipfile.ZIP_STORED) as zf:
        for i in range(15000):
            zf.writestr(zipfile.ZipInfo(f"model/data/{i:08d}/{'n' * 40}", date_time=(1980, 1, 1, 0, 0, 0)), b"")

    def read_zip() -> None:
        archive, _ = open_archive(big)
        assert archive is not None
        archive.close()

    _within_bound(read_zip)

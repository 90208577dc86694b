"""The compiled wrapper's own input checks against the contract (aoti_guard/builder/compile/native_bounds.py).

Inductor narrows a CPU convolution's batch from 1..16 to 1..15 while compiling (its fake kernel
asks ``batch >= 16``, answered False for the example's side): the package then refuses batch 16
under AOTI_RUNTIME_CHECK_INPUTS=1, which the build's validation and the probe use. Before the fix
the zoo's resnet18 build failed on its own max sample (``run.error: input_handles[0]: dim value is
too large at 0, expected to be <= 15``).
"""

from __future__ import annotations

from aoti_guard.builder.compile.native_bounds import narrow_contract
from runtime_probe.formats.wrapper_cpp import SizeCheck as NativeBound
from runtime_probe.formats.wrapper_cpp import size_checks as native_bounds
from runtime_probe.package.manifest import Dim, InputSpec, IOContract, OutputSpec, Symbol, TensorSpec

# what cpp_wrapper_cpu.py generates (torch 2.13), trimmed
WRAPPER = """
    auto arg122_1_size = arg122_1.sizes();
    if (arg122_1_size[0] > 15) {
        std::stringstream ss;
        ss << "input_handles[0]: dim value is too large at 0, "
           << "expected to be <= 15, " << "but got: "
           << arg122_1_size[0] << "\\n";
        throw std::runtime_error(std::move(ss).str());
    }
    if (arg122_1_size[2] < 64) {
        std::stringstream ss;
        ss << "input_handles[0]: dim value is too small at 2, "
           << "expected it to be >= 64, " << "but got: "
           << arg122_1_size[2] << "\\n";
        throw std::runtime_error(std::move(ss).str());
    }
    if (arg122_1_size[2] > 224) {
        std::stringstream ss;
        ss << "input_handles[0]: dim value is too large at 2, "
           << "expected to be <= 224, " << "but got: "
           << arg122_1_size[2] << "\\n";
        throw std::runtime_error(std::move(ss).str());
    }
"""


def _contract() -> IOContract:
    shape = (Dim("batch", 1, 16), 3, Dim("32*h32", 64, 256), 64)
    x = InputSpec("x", "x", "tensor", 0, TensorSpec("float32", shape, ("12288*h32", "4096*h32", 64, 1), True, "cpu"))
    out = OutputSpec("output", TensorSpec("float32", (Dim("batch", 1, 16), 10), (10, 1), True, "cpu"))
    return IOContract((), (x,), (out,), (Symbol("batch", 1, 16, ("x.shape[0]",)), Symbol("h32", 2, 8)))


def test_the_generated_checks_are_read() -> None:
    assert native_bounds([WRAPPER]) == [
        NativeBound(0, 0, "max", 15),
        NativeBound(0, 2, "min", 64),
        NativeBound(0, 2, "max", 224),
    ]


def test_the_contract_follows_the_compiled_range_and_says_so() -> None:
    contract, findings = narrow_contract(_contract(), native_bounds([WRAPPER]), "resnet18")
    assert {s.name: (s.min, s.max) for s in contract.symbols} == {"batch": (1, 15), "h32": (2, 7)}
    x = contract.inputs[0].tensor
    assert x is not None and x.shape[0] == Dim("batch", 1, 15) and x.shape[2] == Dim("32*h32", 64, 224)
    out = contract.outputs[0].tensor
    assert out is not None and out.shape[0] == Dim("batch", 1, 15)
    assert [f.code for f in findings] == ["build.range_narrowed", "build.range_narrowed"]
    assert findings[0].severity.value == "warning"
    assert "1..16 to 1..15" in findings[0].message and findings[0].evidence["compiled"] == [1, 15]


def test_checks_that_match_the_contract_change_nothing() -> None:
    same = [NativeBound(0, 0, "max", 16), NativeBound(0, 2, "max", 256), NativeBound(0, 2, "min", 64)]
    contract, findings = narrow_contract(_contract(), same)
    assert contract == _contract() and findings == []

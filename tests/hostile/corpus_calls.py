"""Hostile calls into the guarded loader: tensors a caller can hand ``runtime_probe.load(PKG)``.

Each case makes its arguments from the ``static`` test model's input (``x``: float32 [8, 16]) and
says what must happen: refused with one of ``expect`` (InputContractError or
ConstantsContractError) before native code runs, or (``expect`` empty) run and give exactly what
plain AOTI gives on a plain contiguous copy. The cases run in a child process (``run_calls``),
since before the fix several of them killed the serving process with a segfault.

    python -m tests.hostile.corpus_calls PKG          # runs every case, prints one JSON line each
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["CALLS", "CallCase", "CallOutcome", "run_calls"]


@dataclass(frozen=True)
class CallCase:
    name: str
    group: str
    what: str
    expect: frozenset[str]  # refused with one of these codes; empty: runs and equals plain AOTI


@dataclass(frozen=True)
class CallOutcome:
    case: CallCase
    result: str  # "refused" | "ran" | "crashed" | "raised"
    code: str | None  # the refusal's code
    equal: bool | None  # for "ran": equal to plain AOTI on a contiguous copy
    detail: str

    @property
    def ok(self) -> bool:
        if self.case.expect:
            return self.result == "refused" and self.code in self.case.expect
        return self.result == "ran" and bool(self.equal)


def _case(name: str, group: str, what: str, *expect: str) -> CallCase:
    return CallCase(name, group, what, frozenset(expect))


CALLS = [
    _case("call-fake-tensor", "call: subclass", "a FakeTensor (no data behind it)", "input.subclass"),
    _case("call-two-tensor", "call: subclass", "TwoTensor, a wrapper subclass (_make_wrapper_subclass)", "input.subclass"),
    _case("call-lying-shape", "call: subclass", "a wrapper subclass of 4 elements claiming shape [8, 16]", "input.subclass"),
    _case("call-python-subclass", "call: subclass", "x.as_subclass(a plain Python subclass)", "input.subclass"),
    _case("call-sparse-coo", "call: layout", "x.to_sparse()", "input.layout"),
    _case("call-sparse-csr", "call: layout", "x.to_sparse_csr()", "input.layout"),
    _case("call-mkldnn", "call: layout", "x.to_mkldnn()", "input.layout"),
    _case("call-nested", "call: layout", "a nested tensor of two [4, 16] tensors", "input.layout"),
    _case("call-neg-bit", "call: flags", "x._neg_view() (the negative bit)", "input.flags"),
    _case("call-transposed", "call: layout", "a transposed view of the right shape", "input.stride"),
    _case("call-parameter", "call: accepted", "nn.Parameter(x): a plain tensor with a flag, accepted"),
    _case("call-deepcopy", "call: accepted", "copy.deepcopy(model)(x), as plain AOTI deep-copies"),
    _case("weights-transposed-view", "call: weights", "load_constants with a transposed view of the right shape", "constants.layout"),
    _case("weights-subclass", "call: weights", "load_constants with a TwoTensor weight", "constants.layout"),
    _case("weights-neg-bit", "call: weights", "load_constants with a weight carrying the negative bit", "constants.layout"),
]


def _lying(torch: Any) -> Any:
    class Lying(torch.Tensor):
        """Claims [8, 16] over a 4-element tensor."""

        @staticmethod
        def __new__(cls, inner: Any) -> Any:
            return torch.Tensor._make_wrapper_subclass(cls, (8, 16), dtype=inner.dtype, device=inner.device)

        def __init__(self, inner: Any) -> None:
            self.inner = inner

        @classmethod
        def __torch_dispatch__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            return func(*[a.inner if isinstance(a, Lying) else a for a in args], **(kwargs or {}))

    return Lying(torch.randn(2, 2))


def _argument(name: str, torch: Any, x: Any) -> Any:
    from torch.testing._internal.two_tensor import TwoTensor

    if name == "call-fake-tensor":
        from torch._subclasses.fake_tensor import FakeTensorMode

        with FakeTensorMode():
            return torch.randn(8, 16)
    makers: dict[str, Callable[[], Any]] = {
        "call-two-tensor": lambda: TwoTensor(x.clone(), x.clone()),
        "call-lying-shape": lambda: _lying(torch),
        "call-python-subclass": lambda: x.as_subclass(type("Sub", (torch.Tensor,), {})),
        "call-sparse-coo": lambda: x.to_sparse(),
        "call-sparse-csr": lambda: x.to_sparse_csr(),
        "call-mkldnn": lambda: x.to_mkldnn(),
        "call-nested": lambda: torch.nested.nested_tensor([x[:4], x[4:]]),
        "call-neg-bit": lambda: x.clone()._neg_view(),
        "call-transposed": lambda: x.t().contiguous().t(),
        "call-parameter": lambda: torch.nn.Parameter(x.clone(), requires_grad=False),
    }
    return makers[name]()


def _weights(name: str, torch: Any, model: Any) -> dict[str, Any]:
    from torch.testing._internal.two_tensor import TwoTensor

    good = {c.fqn: torch.randn(*c.shape) for c in model.manifest.constants if c.storage == "package"}
    fqn = next(f for f, t in good.items() if t.dim() == 2 and t.shape[0] == t.shape[1])
    w = good[fqn]
    bad = {
        "weights-transposed-view": lambda: w.t().contiguous().t(),
        "weights-subclass": lambda: TwoTensor(w.clone(), w.clone()),
        "weights-neg-bit": lambda: w.clone()._neg_view(),
    }[name]()
    return {**good, fqn: bad}


def _run_one(case: CallCase, torch: Any, model: Any, x: Any) -> dict[str, Any]:
    from runtime_probe.errors import GuardError

    try:
        if case.name.startswith("weights-"):
            model.load_constants(_weights(case.name, torch, model))
            return {"result": "ran", "equal": None, "detail": "load_constants accepted it"}
        if case.name == "call-deepcopy":
            out, ref = copy.deepcopy(model)(x), model.compiled(x)
        else:
            arg = _argument(case.name, torch, x)
            out = model(arg)
            ref = model.compiled(arg.detach().resolve_neg().resolve_conj().contiguous().as_subclass(torch.Tensor))
    except GuardError as exc:
        return {"result": "refused", "code": getattr(exc, "code", None), "detail": str(exc).splitlines()[0][:200]}
    except Exception as exc:  # noqa: BLE001 - a bare error is an outcome to report, not a crash of the runner
        return {"result": "raised", "detail": f"{type(exc).__name__}: {str(exc)[:200]}"}
    return {"result": "ran", "equal": bool(torch.equal(out, ref)), "detail": ""}


def _child(package: str, names: list[str]) -> int:
    import warnings

    warnings.filterwarnings("ignore")
    import torch

    from runtime_probe import load

    torch.manual_seed(0)
    model, x = load(package), torch.randn(8, 16)
    by_name = {c.name: c for c in CALLS}
    for name in names:
        print(json.dumps({"start": name}), flush=True)
        print(
            json.dumps({"name": name, **_run_one(by_name[name], torch, load(package) if name.startswith("weights-") else model, x)}),
            flush=True,
        )
    return 0


def run_calls(package: Path, cases: list[CallCase] = CALLS, timeout: float = 300.0) -> list[CallOutcome]:
    """Run the cases in a child; a case that kills it is recorded as crashed and the rest go on in a
    new child."""
    outcomes: dict[str, CallOutcome] = {}
    todo = [c.name for c in cases]
    by_name = {c.name: c for c in cases}
    while todo:
        proc = subprocess.run(
            [sys.executable, "-m", "tests.hostile.corpus_calls", str(package), *todo],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=Path(__file__).resolve().parents[2],
        )
        started = None
        for line in proc.stdout.splitlines():
            if not line.startswith("{"):
                continue
            d = json.loads(line)
            if "start" in d:
                started = d["start"]
                continue
            outcomes[d["name"]] = CallOutcome(by_name[d["name"]], d["result"], d.get("code"), d.get("equal"), d.get("detail", ""))
            started = None
        if started is not None:  # it died inside this case
            outcomes[started] = CallOutcome(by_name[started], "crashed", None, None, f"exit {proc.returncode}: {proc.stderr[-300:]}")
        elif proc.returncode != 0 and not [n for n in todo if n not in outcomes]:
            break
        elif proc.returncode != 0:
            raise RuntimeError(f"the call runner failed before any case ({proc.returncode}):\n{proc.stderr[-3000:]}")
        todo = [n for n in todo if n not in outcomes]
    return [outcomes[c.name] for c in cases]


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1], sys.argv[2:] or [c.name for c in CALLS]))

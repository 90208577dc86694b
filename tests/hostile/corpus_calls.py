"""Hostile calls into the guarded loader: tensors a caller can hand ``runtime_probe.load(PKG)``.

Most cases make their arguments from the ``static`` test model's input (``x``: float32 [8, 16]);
a case's ``package`` names another (``PACKAGES``: the embedding of 1000 rows, the derived sizes of
issue 25). Each says what must happen: refused with one of ``expect`` (InputContractError or
ConstantsContractError) before native code runs, or (``expect`` empty) run and give exactly what
plain AOTI gives on a copy in the compiled layout. The cases run in a child process
(``run_calls``), since before the fixes several of them killed the serving process (a segfault,
an abort on an id past the table).

    python -m tests.hostile.corpus_calls static=PKG [embed=PKG ...] [CASE ...]   # one JSON line per case
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["CALLS", "PACKAGES", "CallCase", "CallOutcome", "run_calls"]

# package name -> its build target (relative to the repository): what a case's ``package`` names
PACKAGES = {
    "static": "tests/integration/models.py:static",
    "embed": "tests/integration/models.py:embed",
    "transposed_8k": "tests/integration/guard_models.py:transposed_8k",
    "channels_last_16hw": "tests/integration/guard_models.py:channels_last_16hw",
}


@dataclass(frozen=True)
class CallCase:
    name: str
    group: str
    what: str
    expect: frozenset[str]  # refused with one of these codes; empty: runs and equals plain AOTI
    package: str = "static"  # a key of PACKAGES


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


def _case(name: str, group: str, what: str, *expect: str, package: str = "static") -> CallCase:
    return CallCase(name, group, what, frozenset(expect), package)


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
    # issue 25: memory the view does not have (defect 6), strides over derived sizes (defect 1), ids past the table (defect 2)
    _case("call-zero-tensor", "call: storage", "torch._efficientzerotensor((8, 16)): no memory behind it", "input.storage"),
    _case("call-storage-resized", "call: storage", "x after x.untyped_storage().resize_(0)", "input.storage"),
    _case("call-storage-shrunk", "call: storage", "a view of rows 2..9 whose base's storage was shrunk to 64 floats", "input.storage"),
    _case("call-vmap", "call: storage", "x inside torch.func.vmap (a BatchedTensor)", "input.storage"),
    _case("call-grad", "call: storage", "x inside torch.func.grad (a GradTrackingTensor)", "input.storage"),
    _case("call-functionalize", "call: storage", "x inside torch.func.functionalize (a FunctionalTensor)", "input.storage"),
    _case("call-storage-offset", "call: accepted", "a contiguous view 24 elements into a larger storage, accepted"),
    _case(
        "call-ids-past-table", "call: values", "ids + 5000 into a 1000-row embedding (default load)", "input.value_range", package="embed"
    ),
    _case("call-ids-in-table", "call: accepted", "ids within the 1000-row table (default load: values checked)", package="embed"),
    _case(
        "call-derived-contiguous",
        "call: layout",
        "a contiguous [16, 4] for {0: 8*s} exported transposed",
        "input.stride",
        package="transposed_8k",
    ),
    _case("call-derived-transposed", "call: accepted", "a transposed [24, 4] for {0: 8*s} (s = 3)", package="transposed_8k"),
    _case(
        "call-derived-nchw",
        "call: layout",
        "a plain NCHW image for channels_last {2: 16*h16, 3: 16*w16}",
        "input.stride",
        package="channels_last_16hw",
    ),
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
        "call-zero-tensor": lambda: torch._efficientzerotensor((8, 16)),
        "call-storage-resized": lambda: _resized(x.clone(), 0),
        "call-storage-shrunk": lambda: _shrunk(torch),
        "call-storage-offset": lambda: torch.cat([torch.randn(24), x.reshape(-1)])[24:].view(8, 16),
        "call-ids-past-table": lambda: torch.randint(0, 1000, (4, 6)) + 5000,
        "call-ids-in-table": lambda: torch.randint(0, 1000, (4, 6)),
        "call-derived-contiguous": lambda: torch.randn(16, 4, dtype=torch.float64),
        "call-derived-transposed": lambda: torch.randn(4, 24, dtype=torch.float64).t(),
        "call-derived-nchw": lambda: torch.rand(2, 3, 32, 48),
    }
    return makers[name]()


def _resized(t: Any, nbytes: int) -> Any:
    t.untyped_storage().resize_(nbytes)
    return t


def _shrunk(torch: Any) -> Any:
    base = torch.randn(10, 16)
    view = base[2:10]  # starts 32 floats in
    base.untyped_storage().resize_(64 * 4)
    return view


# cases that call the model inside a torch.func transform: the guard sees the transform's wrapper
_TRANSFORMS: dict[str, Callable[[Any, Any, Any], Any]] = {
    "call-vmap": lambda torch, model, x: torch.func.vmap(model)(torch.stack([x, x])),
    "call-grad": lambda torch, model, x: torch.func.grad(lambda t: model(t).sum())(x.clone()),
    "call-functionalize": lambda torch, model, x: torch.func.functionalize(model)(x.clone()),
}


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
    from runtime_probe.reporting.errors import GuardError

    try:
        if case.name.startswith("weights-"):
            model.load_constants(_weights(case.name, torch, model))
            return {"result": "ran", "equal": None, "detail": "load_constants accepted it"}
        if case.name == "call-deepcopy":
            out, ref = copy.deepcopy(model)(x), model.compiled(x)
        elif case.name in _TRANSFORMS:
            out = _TRANSFORMS[case.name](torch, model, x)
            ref = model.compiled(x)
        else:
            arg = _argument(case.name, torch, x)
            out = model(arg)
            plain = arg.detach().resolve_neg().resolve_conj().as_subclass(torch.Tensor)
            # a fresh copy (its own storage, offset 0) in the layout the package was compiled for
            ref = model.compiled(plain.contiguous().clone() if case.package == "static" else plain.clone())
    except GuardError as exc:
        return {"result": "refused", "code": getattr(exc, "code", None), "detail": str(exc).splitlines()[0][:200]}
    except Exception as exc:  # noqa: BLE001 - a bare error is an outcome to report, not a crash of the runner
        return {"result": "raised", "detail": f"{type(exc).__name__}: {str(exc)[:200]}"}
    return {"result": "ran", "equal": bool(torch.equal(out, ref)), "detail": ""}


def _child(argv: list[str]) -> int:
    import warnings

    warnings.filterwarnings("ignore")
    import torch

    from runtime_probe import load

    packages = dict(a.split("=", 1) for a in argv if "=" in a)
    names = [a for a in argv if "=" not in a] or [c.name for c in CALLS]
    torch.manual_seed(0)
    x = torch.randn(8, 16)
    models: dict[str, Any] = {}
    by_name = {c.name: c for c in CALLS}
    for name in names:
        case = by_name[name]
        print(json.dumps({"start": name}), flush=True)
        if name.startswith("weights-"):
            model = load(packages[case.package])  # its own copy: the weights are swapped
        else:
            model = models.get(case.package) or models.setdefault(case.package, load(packages[case.package]))
        print(json.dumps({"name": name, **_run_one(case, torch, model, x)}), flush=True)
    return 0


def run_calls(packages: Path | Mapping[str, Path], cases: list[CallCase] = CALLS, timeout: float = 300.0) -> list[CallOutcome]:
    """Run the cases in a child; a case that kills it is recorded as crashed and the rest go on in a
    new child. ``packages``: PACKAGES' names -> built packages (a path alone: the static one)."""
    by_package = {"static": packages} if isinstance(packages, Path) else dict(packages)
    missing = sorted({c.package for c in cases} - set(by_package))
    if missing:
        raise ValueError(f"no package given for {', '.join(missing)} (build {', '.join(PACKAGES[m] for m in missing)})")
    outcomes: dict[str, CallOutcome] = {}
    todo = [c.name for c in cases]
    by_name = {c.name: c for c in cases}
    while todo:
        proc = subprocess.run(
            [sys.executable, "-m", "tests.hostile.corpus_calls", *(f"{k}={v}" for k, v in by_package.items()), *todo],
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
    sys.exit(_child(sys.argv[1:]))

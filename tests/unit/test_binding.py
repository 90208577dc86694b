"""The example is bound to the model's signature once, at the resolve step (builder/binding.py),
and every later reader takes that binding."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from aoti_guard import BuildSpec
from aoti_guard.builder.options import BuildOptions
from aoti_guard.builder.pipeline import export_step, resolve_step
from aoti_guard.builder.resolve import binding as binding_mod
from aoti_guard.builder.resolve.binding import bind
from aoti_guard.builder.state import BuildState

ROOT = Path(__file__).resolve().parents[2]


class _Mixed(torch.nn.Module):
    def forward(self, x: torch.Tensor, *rest: torch.Tensor, scale: float = 1.0, **extra: Any) -> torch.Tensor:
        return x * scale


class _Two(torch.nn.Module):
    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return x * mask


def test_the_binding_names_each_argument_as_forward_takes_it() -> None:
    x, y = torch.ones(2), torch.zeros(2)
    binding = bind(_Mixed(), (x, y), {"scale": 2.0})
    assert [(p.name, p.kind, p.passed) for p in binding.params] == [
        ("x", "positional_or_keyword", "positional"),
        ("rest", "var_positional", "positional"),
        ("scale", "keyword_only", "keyword"),
        ("extra", "var_keyword", "omitted"),
    ]
    assert binding.values((x,), {"scale": 3.0}) == {"x": x, "scale": 3.0}  # a fresh copy of the inputs, same names
    unreadable = bind(SimpleNamespace(forward=max), (x,), {"k": y})  # no signature to read: named by position
    assert [p.name for p in unreadable.params] == ["arg0", "k"]


def test_a_saved_program_binds_like_its_model() -> None:
    args = (torch.ones(2, 3), torch.ones(2, 3))
    ep = torch.export.export(_Two(), args)
    assert bind(ep, *ep.example_inputs) == bind(_Two(), args, {})


def _product_calls(name: str) -> list[str]:
    """Where the build binds an example (aoti_guard: runtime_probe binds no model's signature; its
    generated-source helpers have a ``bind`` of their own)."""
    found = []
    for path in sorted(ROOT.joinpath("aoti_guard").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                callee = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
                if callee == name:
                    found.append(str(path.relative_to(ROOT)))
    return found


def test_one_place_binds_the_example() -> None:
    assert _product_calls("bind") == ["aoti_guard/builder/pipeline.py"]
    assert _product_calls("bind_example") == []


def test_resolve_and_export_read_the_signature_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--dynamic, the contract's names and the declared dims all come from the one binding."""
    reads: list[Any] = []
    real = binding_mod._signature
    monkeypatch.setattr(binding_mod, "_signature", lambda model: reads.append(model) or real(model))
    spec = BuildSpec(_Two(), (torch.ones(4, 3), torch.ones(4, 3)))
    options = BuildOptions(output=str(tmp_path / "m.pt2"), device="cpu", dynamic=("x:0=batch:2..16", "mask:0=batch"))  # type: ignore[arg-type]
    st = BuildState(spec, options, str(tmp_path), None, str(tmp_path / "m.pt2"), None, print)  # type: ignore[arg-type]
    resolve_step(st)
    export_step(st)
    assert len(reads) == 1
    assert st.contract is not None and [i.name for i in st.contract.inputs] == ["x", "mask"]
    assert [s.name for s in st.contract.symbols] == ["batch"]

"""New weights against a package's constants (runtime_probe.package.weights): the files users have
(a state_dict() or save_pretrained safetensors file) are taken as they are, anything else is
refused by name before load_constants. Issues 42 and 43."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from runtime_probe.formats.safetensors import dump, tensor_bytes
from runtime_probe.package.manifest import ConstantSpec, parse_manifest
from runtime_probe.package.weights import ValueChecks, carries_weights, check_weights, keeps_unsaved, plan_weights
from runtime_probe.reporting.findings import Finding, has_errors


def _spec(fqn: str, shape: tuple[int, ...], *, kind: str = "parameter", storage: str = "package", **kw: Any) -> ConstantSpec:
    return ConstantSpec(fqn, kind, "float32", shape, kw.pop("sha256", "0" * 64), 4 * _numel(shape), storage, **kw)


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


# a tiny tied decoder as the build records it (manifest 1.7): AOTI keeps one of the two tied
# names as its constant (lm_head.weight) and the other is no runtime constant
QWEN = [
    _spec("model.embed_tokens.weight", (64, 32), storage="inlined", in_state_dict=True, tied_with=("lm_head.weight",)),
    _spec("model.norm.weight", (32,), in_state_dict=True),
    _spec("lm_head.weight", (64, 32), in_state_dict=True, tied_with=("model.embed_tokens.weight",)),
    _spec("model.rotary_emb.inv_freq", (16,), kind="buffer", in_state_dict=False),
]
STATE_DICT = {
    "model.embed_tokens.weight": ("float32", (64, 32)),
    "model.norm.weight": ("float32", (32,)),
    "lm_head.weight": ("float32", (64, 32)),
}
SAVE_PRETRAINED = {k: v for k, v in STATE_DICT.items() if k != "lm_head.weight"}


def _errors(findings: list[Finding]) -> list[tuple[str, str]]:
    return [(f.code, f.evidence.get("constant")) for f in findings if f.severity.value == "error"]


def test_a_state_dict_is_taken_as_it_is() -> None:
    """Issue 43: the rotary inv_freq is no state_dict()'s; it keeps the package's value."""
    plan = plan_weights(STATE_DICT, QWEN, source="the weights file", values=ValueChecks(same_tensor=lambda a, b: True))
    assert not has_errors(plan.findings), plan.findings
    assert plan.sources == {"model.norm.weight": "model.norm.weight", "lm_head.weight": "lm_head.weight"}
    assert plan.kept == ("model.rotary_emb.inv_freq",)
    (note,) = [f for f in plan.findings if f.code == "constants.from_package"]
    assert note.severity.value == "info" and "model.rotary_emb.inv_freq" in note.message


def test_a_save_pretrained_file_gives_the_tied_weight_through_its_other_name() -> None:
    plan = plan_weights(SAVE_PRETRAINED, QWEN, source="the weights file")
    assert not has_errors(plan.findings), plan.findings
    assert plan.sources["lm_head.weight"] == "model.embed_tokens.weight" and plan.tied == {"lm_head.weight": "model.embed_tokens.weight"}
    assert plan.names == ["model.embed_tokens.weight", "model.norm.weight"]
    (note,) = [f for f in plan.findings if f.code == "constants.from_package"]
    assert "lm_head.weight <- model.embed_tokens.weight" in note.message


@pytest.mark.parametrize(
    ("given", "code", "name"),
    [
        ({**STATE_DICT, "model.norm.weight": ("bfloat16", (32,))}, "constants.dtype_mismatch", "model.norm.weight"),
        ({**STATE_DICT, "model.norm.weight": ("float32", (33,))}, "constants.shape_mismatch", "model.norm.weight"),
        ({**STATE_DICT, "lm_head.weight": ("float32", (32, 64))}, "constants.shape_mismatch", "lm_head.weight"),
        ({**SAVE_PRETRAINED, "model.embed_tokens.weight": ("float32", (65, 32))}, "constants.shape_mismatch", "model.embed_tokens.weight"),
        ({**STATE_DICT, "model.extra": ("float32", (3,))}, "constants.unexpected", "model.extra"),
        ({k: v for k, v in STATE_DICT.items() if k != "model.norm.weight"}, "constants.missing", "model.norm.weight"),
        ({"model.norm.weight": ("float32", (32,))}, "constants.missing", "lm_head.weight"),  # neither tied name
    ],
)
def test_anything_else_is_refused_by_name(given: dict[str, Any], code: str, name: str) -> None:
    plan = plan_weights(given, QWEN, source="the weights file")
    assert (code, name) in _errors(plan.findings)


def test_two_tied_names_with_different_values_are_refused() -> None:
    plan = plan_weights(STATE_DICT, QWEN, source="the weights file", values=ValueChecks(same_tensor=lambda a, b: False))
    assert _errors(plan.findings) == [("constants.tied_mismatch", "lm_head.weight")]


def test_a_manifest_before_1_7_asks_for_every_constant() -> None:
    """Old manifests record neither fact: the old behaviour (inv_freq missing, lm_head.weight too)."""
    old = [ConstantSpec(c.fqn, c.kind, c.dtype, c.shape, c.sha256, c.nbytes, c.storage) for c in QWEN]
    plan = plan_weights(SAVE_PRETRAINED, old, source="the weights file")
    assert set(_errors(plan.findings)) >= {("constants.missing", "model.rotary_emb.inv_freq"), ("constants.missing", "lm_head.weight")}
    assert "rebuild it with this aoti-guard" in next(f.hint for f in plan.findings if f.code == "constants.missing")


def test_a_package_that_cannot_keep_a_buffer_asks_for_it_and_says_what_it_is() -> None:
    plan = plan_weights(STATE_DICT, QWEN, source="the weights file", keeps=False)
    (missing,) = [f for f in plan.findings if f.code == "constants.missing"]
    assert "non-persistent buffer" in missing.message and missing.evidence["constant"] == "model.rotary_emb.inv_freq"


def test_a_partial_update_asks_for_nothing_and_keeps_the_rest() -> None:
    plan = plan_weights({"model.norm.weight": ("float32", (32,))}, QWEN, source="the new weights", full=False)
    assert not has_errors(plan.findings) and plan.sources == {"model.norm.weight": "model.norm.weight"}


def test_an_inlined_constant_is_accepted_only_with_the_builds_value() -> None:
    specs = [_spec("lin.weight", (4, 4)), _spec("lin.bias", (4,), storage="inlined", sha256="ab" * 32)]
    given = {"lin.weight": ("float32", (4, 4)), "lin.bias": ("float32", (4,))}
    same = plan_weights(given, specs, source="the weights file", values=ValueChecks(build_value=lambda name, spec: True))
    assert not has_errors(same.findings) and "lin.bias" not in same.names
    changed = plan_weights(given, specs, source="the weights file", values=ValueChecks(build_value=lambda name, spec: False))
    assert _errors(changed.findings) == [("constants.unexpected", "lin.bias")]
    assert "inlined" in changed.findings[0].message


def test_the_programs_name_of_a_renamed_constant_says_the_packages_name() -> None:
    specs = [_spec("offset", (12,), kind="constant", runtime_fqn="_tensor_constant0", in_state_dict=False)]
    plan = plan_weights({"offset": ("float32", (12,))}, specs, source="the weights file")
    (refused,) = [f for f in plan.findings if f.severity.value == "error"]
    assert refused.code == "constants.unexpected" and "_tensor_constant0" in (refused.hint or "")
    assert plan.kept == ("_tensor_constant0",)


def _manifest(constants: list[dict[str, Any]], **extra: Any) -> Any:
    from tests.unit.test_manifest import minimal

    return parse_manifest(json.dumps({**minimal(), "schema_version": "1.7", "constants": constants, **extra}).encode())


def test_the_manifest_records_and_reads_both_facts_and_old_ones_read_as_unknown() -> None:
    new = _manifest([{**_jsonable(QWEN[2])}, {**_jsonable(QWEN[3])}], kept_constants="aoti_guard/kept_constants.safetensors")
    assert new.constants[0].tied_with == ("model.embed_tokens.weight",) and new.constants[1].in_state_dict is False
    assert keeps_unsaved(new) and carries_weights(new)
    old = {k: v for k, v in _jsonable(QWEN[3]).items() if k not in ("in_state_dict", "tied_with")}
    read = _manifest([old]).constants[0]
    assert read.in_state_dict is None and read.tied_with == ()
    weightless = _manifest([], inductor_configs={"aot_inductor.package_constants_in_so": "False"})
    assert not carries_weights(weightless) and not keeps_unsaved(weightless)


def _jsonable(c: ConstantSpec) -> dict[str, Any]:
    from runtime_probe.formats.serde import to_jsonable

    data: dict[str, Any] = to_jsonable(c)
    return data


def test_check_weights_reads_a_file_by_its_header_and_hashes(tmp_path: Path) -> None:
    """The probe's --weights: a save_pretrained-like file (no lm_head.weight, no inv_freq) passes,
    and is the build's when every tensor it gives (the tied one included) has the build's bytes."""
    import torch

    embed, norm = torch.randn(64, 32), torch.randn(32)

    def sha(t: Any) -> str:
        return hashlib.sha256(tensor_bytes(t)).hexdigest()

    specs = [
        _spec(
            "model.embed_tokens.weight", (64, 32), storage="inlined", in_state_dict=True, tied_with=("lm_head.weight",), sha256=sha(embed)
        ),
        _spec("model.norm.weight", (32,), in_state_dict=True, sha256=sha(norm)),
        _spec("lm_head.weight", (64, 32), in_state_dict=True, tied_with=("model.embed_tokens.weight",), sha256=sha(embed)),
        _spec("model.rotary_emb.inv_freq", (16,), kind="buffer", in_state_dict=False),
    ]
    path = tmp_path / "model.safetensors"
    dump({"model.embed_tokens.weight": embed, "model.norm.weight": norm}, path)
    check = check_weights(str(path), specs)
    assert not has_errors(check.findings) and check.same_as_build
    assert check.sources == {"lm_head.weight": "model.embed_tokens.weight", "model.norm.weight": "model.norm.weight"}
    dump({"model.embed_tokens.weight": embed + 1, "model.norm.weight": norm}, path)
    assert not check_weights(str(path), specs).same_as_build
    dump({"model.embed_tokens.weight": embed, "lm_head.weight": embed + 1, "model.norm.weight": norm}, path)
    assert _errors(check_weights(str(path), specs).findings) == [("constants.tied_mismatch", "lm_head.weight")]


def test_the_build_records_what_no_checkpoint_holds_and_which_names_are_one_tensor() -> None:
    """From the exported program: state_dict() keys vs non-persistent buffers and lifted
    constants; tied parameters (one tensor under two names) vs two views of one storage."""
    import torch

    from aoti_guard.builder.export.contract import extract_constants, tied_names

    class Tied(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(8, 4)
            self.head = torch.nn.Linear(4, 8, bias=False)
            self.head.weight = self.embed.weight
            self.register_buffer("inv_freq", torch.arange(4.0), persistent=False)
            self.register_buffer("running", torch.ones(4))

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.head(self.embed(ids) * self.inv_freq * self.running)

    model = Tied().eval()
    assert set(model.state_dict()) == {"embed.weight", "head.weight", "running"}
    ep = torch.export.export(model, (torch.tensor([[1, 2]]),))
    specs = {c.fqn: c for c in extract_constants(ep, {"head.weight": "head_weight", "inv_freq": "inv_freq", "running": "running"})}
    assert specs["inv_freq"].in_state_dict is False and specs["running"].in_state_dict is True
    assert specs["head.weight"].tied_with == ("embed.weight",) and specs["embed.weight"].tied_with == ("head.weight",)
    assert specs["running"].tied_with == ()
    base = torch.randn(4, 4)
    assert tied_names({"a": base[:2], "b": base[2:], "c": base[:2], "e": torch.empty(0), "f": torch.empty(0)}) == {"a": ("c",), "c": ("a",)}

"""determinism.scan on real exported graphs (export only, nothing compiled)."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from aoti_guard.builder.export import determinism  # noqa: E402


def _scan(model: Any, *args: Any) -> determinism.GraphState:
    return determinism.scan(torch.export.export(model, args), model)


class _Head(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.drop = torch.nn.Dropout(0.2)
        self.bn = torch.nn.BatchNorm1d(8)

    def forward(self, x: Any) -> Any:
        return self.bn(self.drop(self.lin(x)))


def test_training_mode_dropout_and_batchnorm_are_named() -> None:
    state = _scan(_Head(), torch.randn(4, 8))
    assert [(r.module, r.training) for r in state.random_ops] == [("drop", True)]
    assert state.batch_norm_training == ("bn",)
    assert "bn.num_batches_tracked" in state.mutated_buffers
    assert set(state.training_modules) == {"drop", "bn"}
    codes = [f.code for f in determinism.findings(state, root_training=True)]
    assert codes == ["build.nondeterministic", "build.stateful_model"]


def test_the_same_model_in_eval_mode_is_clean() -> None:
    state = _scan(_Head().eval(), torch.randn(4, 8))
    assert state.clean and determinism.findings(state, root_training=False) == []


class _Rand(torch.nn.Module):
    def forward(self, x: Any) -> Any:
        return x + torch.randn_like(x) * torch.bernoulli(torch.full_like(x, 0.5))


def test_random_ops_outside_training_mode_are_named_by_op() -> None:
    state = _scan(_Rand().eval(), torch.randn(3))
    ops = {r.op for r in state.random_ops}
    assert {"aten.randn_like.default", "aten.bernoulli.default"} <= ops or {"aten.randn_like.default", "aten.bernoulli.p"} & ops
    assert all(not r.training for r in state.random_ops)
    [f] = determinism.findings(state, root_training=False)
    assert f.code == "build.nondeterministic" and "randn_like" in f.message and "model.eval()" not in (f.hint or "")


class _Counter(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("count", torch.zeros(()))
        self.register_buffer("scale", torch.ones(()))

    def forward(self, x: Any) -> Any:
        self.count.add_(1)
        return x * self.count * self.scale


def test_a_buffer_updated_in_place_is_named_and_a_read_only_one_is_not() -> None:
    state = _scan(_Counter().eval(), torch.randn(3))
    assert state.mutated_buffers == ("count",) and not state.random_ops
    [f] = determinism.findings(state, root_training=False)
    assert f.code == "build.stateful_model" and "`count`" in f.message and "scale" not in f.message
    assert determinism.causes(state) == ["buffer(s) `count` updated in place by forward"]


class _Attention(torch.nn.Module):
    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p

    def forward(self, q: Any) -> Any:
        return torch.nn.functional.scaled_dot_product_attention(q, q, q, dropout_p=self.p)


def test_attention_draws_only_with_a_dropout_probability() -> None:
    q = torch.randn(1, 2, 4, 8)
    assert _scan(_Attention(0.0), q).clean  # eval-mode attention: dropout_p=0.0
    state = _scan(_Attention(0.1), q)
    assert [r.op for r in state.random_ops] == ["aten.scaled_dot_product_attention.default"]


def test_torchvisions_in_place_dropout_in_eval_mode_is_clean() -> None:
    """MobileNetV3's classifier has Dropout(inplace=True): export writes aten.dropout_ with
    train=False in eval mode, which the H100 zoo refused as a random op (mobilenet_v3_small)."""
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.2, inplace=True)).eval()
    assert _scan(model, torch.randn(4, 8)).clean
    model.train()
    assert [r.training for r in _scan(model, torch.randn(4, 8)).random_ops] == [True]


class _LayerDrop(torch.nn.Module):
    """transformers' Wav2Vec2 encoder: the LayerDrop number is drawn in eval mode too, and used
    only in training."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x: Any) -> Any:
        p = torch.rand([])
        skip = self.training and bool(p < 0.1)
        return x if skip else self.lin(x)


def test_a_draw_that_never_reaches_the_outputs_warns_and_says_how_it_was_seen() -> None:
    model, x = _LayerDrop().eval(), torch.randn(2, 8)
    state = _scan(model, x)
    assert [r.op for r in state.random_ops] == ["aten.rand.default"]
    with torch.no_grad():
        repeated = determinism.repeat(model(x), model(x))
    assert not repeated.differs
    [f] = determinism.findings(state, root_training=False, repeated=repeated)
    assert (f.code, f.severity.value) == ("build.nondeterministic", "warning") and "identical outputs" in f.message
    assert f.evidence["two_calls"]["differ"] is False


def test_a_draw_that_reaches_the_outputs_is_an_error_with_the_two_calls_numbers() -> None:
    model, x = _Rand().eval(), torch.randn(3)
    state = _scan(model, x)
    repeated = determinism.repeat(model(x), model(x))
    assert repeated.differs and repeated.max_abs > 0 and repeated.output == "leaf 0"
    [f] = determinism.findings(state, root_training=False, repeated=repeated)
    assert f.severity.value == "error" and "two calls on the example gave different outputs" in f.message
    [unchecked] = determinism.findings(state, root_training=False)  # not compared: an error, and no claim about two calls
    assert unchecked.severity.value == "error" and "two calls" not in unchecked.message


def test_repeat_compares_bit_for_bit_with_nan_equal_to_nan() -> None:
    nan = torch.tensor([float("nan"), 1.0])
    assert not determinism.repeat((nan, 3), (nan.clone(), 3)).differs
    assert determinism.repeat((nan, 3), (nan, 4)).differs
    assert determinism.repeat({"a": torch.ones(2)}, {"a": torch.ones(2) + 1e-7}).max_abs > 0

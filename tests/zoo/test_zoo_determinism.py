"""The export step's determinism check on real library models in eval mode (export only, nothing
compiled): a model that draws nothing that reaches its outputs is not refused. On the H100 the
build refused two zoo models with build.nondeterministic (docs/gpu-validation.md, run 17):
torchvision's MobileNetV3 for its in-place Dropout (aten.dropout_ with train=False) and
transformers' Wav2Vec2 for the LayerDrop number it draws in eval mode and uses only in training."""

from __future__ import annotations

import pytest

from .conftest import require_zoo_libraries

pytestmark = [pytest.mark.zoo, pytest.mark.integration]


@pytest.mark.parametrize(("name", "warned"), [("mobilenet_v3_small", False), ("wav2vec2", True)])
def test_eval_mode_library_models_are_not_refused_as_nondeterministic(name: str, warned: bool) -> None:
    require_zoo_libraries()
    import torch

    from aoti_guard.builder.export import determinism
    from zoo import models

    spec = models.build(name, "small", "cpu")
    ep = torch.export.export(spec.model, tuple(spec.args), dict(spec.kwargs))
    state = determinism.scan(ep, spec.model)
    with torch.no_grad():
        repeated = determinism.repeat(spec.model(*spec.args, **spec.kwargs), spec.model(*spec.args, **spec.kwargs))
    found = determinism.findings(state, root_training=False, repeated=repeated)
    assert not [f for f in found if f.severity.value == "error"], [f.message for f in found]
    if warned:  # the draw is in the graph, and the evidence says it does not reach the outputs
        [f] = found
        assert f.code == "build.nondeterministic" and f.evidence["two_calls"]["differ"] is False and "aten.rand" in f.message
    else:
        assert state.clean and found == []

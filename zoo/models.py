"""The zoo's registry: public architectures from torchvision, timm and transformers, random weights.

Every model is built from its library's own code and config class; nothing is downloaded
(``pretrained=False``, ``weights=None``, a config object, ``HF_HUB_OFFLINE=1``). Each entry's
factory takes ``size`` and ``device`` and returns an ``aoti_guard.BuildSpec`` with the dynamic
dimensions a serving user would give it:

- ``size="small"``: tiny configs and low resolutions, for CPU (a compile takes seconds, not minutes);
- ``size="full"``: the architecture's real default config and resolution, for a GPU.

Outputs stay as the libraries return them (Hugging Face ``ModelOutput`` dataclasses, ``DynamicCache``
objects); nothing is wrapped into tuples.

Each entry is also a module-level TARGET function for ``aoti-guard build``, e.g.
``aoti-guard build zoo/models.py:bert -o bert.pt2``; it reads the size from ``AOTI_GUARD_ZOO_SIZE``
(default ``small``) and the device from ``AOTI_GUARD_ZOO_DEVICE`` (default ``cpu``).
"""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.export import Dim

from aoti_guard import BuildSpec

__all__ = ["SIZES", "ZooEntry", "build", "ensure_torchvision_importable", "entries", "entry", "names"]

# Nothing from the Hugging Face hub, ever: every model is built from a config object.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

SIZES = ("small", "full")
# Models whose full-size weights are GBs (TinyLlama's 1.1B shape, deberta-v2-xlarge, bart-large):
# a build writes them about seven times (Inductor's caches, the release and twin packages, the
# probe's and the guarded loader's extractions), 25-30 GB for llama. Four at once filled the GPU
# machine's 64 GB disk (docs/zoo.md); zoo.parity runs them one at a time at full size.
HEAVY_FULL = ("llama", "llama_cache", "deberta_v2", "bart")


@dataclass(frozen=True)
class ZooEntry:
    """One architecture of the zoo.

    Attributes:
        name: the registry key and the TARGET function's name (``zoo/models.py:NAME``).
        library: ``torchvision``, ``timm`` or ``transformers``.
        family: ``cnn``, ``vit``, ``mlp``, ``encoder``, ``decoder``, ``decoder-cache``, ``encoder-decoder``,
            ``speech`` or ``multimodal``.
        arch: the library class or factory the model comes from.
        dims: the dynamic dimensions, as a reader wants them (the BuildSpec holds the real ones).
        factory: ``factory(size, device) -> BuildSpec``.
        note: anything a user of the entry must know (fixed sizes and why).
    """

    name: str
    library: str
    family: str
    arch: str
    dims: str
    factory: Callable[[str, str], BuildSpec]
    note: str = ""


_REGISTRY: dict[str, ZooEntry] = {}


def _register(name: str, library: str, family: str, arch: str, dims: str, note: str = "") -> Callable[..., Any]:
    def decorate(factory: Callable[[str, str], BuildSpec]) -> Callable[[str, str], BuildSpec]:
        if name in _REGISTRY:
            raise ValueError(f"zoo entry {name!r} registered twice")
        _REGISTRY[name] = ZooEntry(name, library, family, arch, dims, factory, note)
        return factory

    return decorate


def names() -> list[str]:
    """Every entry's name, in registry order."""
    return list(_REGISTRY)


def entries() -> list[ZooEntry]:
    """Every entry, in registry order."""
    return list(_REGISTRY.values())


def entry(name: str) -> ZooEntry:
    """The entry called ``name`` (``KeyError`` names the close ones)."""
    try:
        return _REGISTRY[name]
    except KeyError:
        import difflib

        close = difflib.get_close_matches(name, _REGISTRY, n=3)
        raise KeyError(f"no zoo model {name!r}" + (f"; did you mean {', '.join(close)}?" if close else "")) from None


def build(name: str, size: str = "small", device: str = "cpu") -> BuildSpec:
    """The BuildSpec of model ``name`` at ``size`` (``small`` or ``full``) on ``device``."""
    if size not in SIZES:
        raise ValueError(f"size must be one of {SIZES}, not {size!r}")
    torch.manual_seed(0)
    return entry(name).factory(size, device)


# --------------------------------------------------------------------------------------------------
# torchvision beside a CPU-only torch
# --------------------------------------------------------------------------------------------------

_TORCHVISION_SCHEMA_LIB: Any = None  # keeps the schema fragment alive for the process


def ensure_torchvision_importable() -> str:
    """Make ``import torchvision`` (and so ``import transformers``' models) work; return what was done.

    torchvision's wheels on the package index are CUDA builds: their ``_C`` extension links against
    ``libtorch_cuda.so``, which a CPU-only torch does not ship, so ``_C`` does not load. torchvision is
    written to run without ``_C`` (its kernels' registrations are guarded), except for two fake-kernel
    registrations (``torchvision::nms``, ``torchvision::qnms``) that fail with ``operator
    torchvision::nms does not exist``. transformers imports torchvision whenever it is installed
    (``image_utils``), so that error breaks every transformers model too.

    When, and only when, that exact error occurs, this defines the two operators' schemas (copied from
    torchvision's C++ registration) and imports torchvision again. The model code is torchvision's
    own; only the detection ops (``nms``, ``roi_align``...) stay without kernels, and no model of the
    zoo calls them. Where ``_C`` loads (a CUDA torch with its matching torchvision), this does nothing.

    Returns ``"absent"``, ``"ok"`` or ``"schemas-defined"``.
    """
    global _TORCHVISION_SCHEMA_LIB
    import importlib.util
    from pathlib import Path

    if "torchvision" in sys.modules:
        return "schemas-defined" if _TORCHVISION_SCHEMA_LIB is not None else "ok"
    if importlib.util.find_spec("torchvision") is None:
        return "absent"
    # the remedy itself lives in the venv's start-up shim (scripts/venv/): loaded here by path
    shim_path = Path(__file__).resolve().parents[1] / "scripts" / "venv" / "aoti_guard_torchvision_shim.py"
    spec = importlib.util.spec_from_file_location("_zoo_torchvision_shim", shim_path)
    assert spec is not None and spec.loader is not None, shim_path
    shim = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shim)
    if not shim.import_torchvision():
        return "ok"
    _TORCHVISION_SCHEMA_LIB = shim
    return "schemas-defined"


# --------------------------------------------------------------------------------------------------
# shared shapes
# --------------------------------------------------------------------------------------------------

# batch: the example uses 2 (export specializes a size of 1); the range is what a server batches.
_BATCH_MAX = {"small": 16, "full": 32}
_EXAMPLE_BATCH = 2
# image sides for the convnets: 32 * k (their total stride; a side <= 32 gives a 1x1 final map,
# which export specializes on), k in [2, max].
_IMAGE = {"small": 64, "full": 224}
_SIDE32_MAX = {"small": 8, "full": 16}  # 256 / 512 pixels
# text: example length and the longest sequence.
_SEQ = {"small": 16, "full": 128}
_SEQ_MAX = {"small": 128, "full": 512}


def _batch(size: str) -> Any:
    return Dim("batch", min=1, max=_BATCH_MAX[size])


def _first_param(model: torch.nn.Module) -> str:
    return next(iter(inspect.signature(model.forward).parameters))


def _image_spec(name: str, model: torch.nn.Module, size: str, device: str, *, image: int, side: Any | None, channels: int = 3) -> BuildSpec:
    """A vision model taking one NCHW image batch; ``side`` the dynamic H/W factory (None: fixed)."""
    x = torch.randn(_EXAMPLE_BATCH, channels, image, image, device=device)
    dims: dict[int, Any] = {0: _batch(size)}
    if side is not None:
        dims[2], dims[3] = side("h"), side("w")
    model = _like_trained(model.to(device), x)
    return BuildSpec(model, (x,), {}, {_first_param(model): dims}, name=name)


def _like_trained(model: torch.nn.Module, x: torch.Tensor) -> torch.nn.Module:
    """Random weights whose outputs are not degenerate, so that "compiled matches eager" means something.

    Freshly initialized, some libraries' models output (nearly) nothing: torchvision's ViT zeroes its
    head (outputs exactly 0), and in MobileNetV3 / EfficientNet the activations shrink ~10x per block
    through BatchNorms that still hold mean 0 / variance 1 (outputs ~1e-10 .. 1e-14). So: a weight that
    is all zeros gets N(0, 0.02), and every BatchNorm's running statistics are measured on the example
    input (a train-mode forward without gradients, cumulative averages; no parameter changes).
    Returns the model in eval mode.
    """
    with torch.no_grad():
        for pname, param in model.named_parameters():
            if pname.endswith("weight") and param.dim() > 1 and not param.any():
                param.normal_(0.0, 0.02)
        norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
        if norms:
            for m in norms:
                m.reset_running_stats()
                m.momentum = None  # cumulative average over the calibration passes
            model.train()
            model(x)
    return model.eval()


def _side32(size: str) -> Callable[[str], Any]:
    return lambda axis: 32 * Dim(f"{axis}32", min=2, max=_SIDE32_MAX[size])


def _side_patch(size: str, patch: int, max_side: int) -> Callable[[str], Any]:
    return lambda axis: patch * Dim(f"{axis}{patch}", min=1, max=max_side // patch)


def _ids(vocab: int, batch: int, seq: int, device: str) -> torch.Tensor:
    # ids from 3 up: clear of the usual pad/bos/eos ids (0..2), so no model sees a special token
    return torch.randint(3, vocab, (batch, seq), device=device)


def _mask(batch: int, seq: int, device: str) -> torch.Tensor:
    mask = torch.ones(batch, seq, dtype=torch.long, device=device)
    mask[-1, seq // 2 :] = 0  # the last row padded: a real batch mixes lengths
    return mask


def _left_padded_mask(batch: int, length: int, device: str) -> torch.Tensor:
    mask = torch.ones(batch, length, dtype=torch.long, device=device)
    mask[-1, : length // 2] = 0  # generation pads on the left: the newest token is always real
    return mask


def _seq_dim(name: str, largest: int, device: str) -> Any:
    """A sequence length 1..largest; on CUDA a multiple of 8 up to it (8 * ``<name>8``).

    On CUDA, torch.export (2.11, transformers 5.17) refuses ``seq`` 1..512 for BERT with
    "Constraints violated (seq)! ... Suggested fixes: _seq = Dim('_seq', min=1, max=64);
    seq = 8*_seq": the memory-efficient attention kernel pads the mask to a multiple of 8 (the
    zoo's GPU run of 2026-11-23, docs/zoo.md). A serving user takes export's suggestion; so does
    the zoo."""
    if device.split(":", 1)[0] == "cuda":
        return 8 * Dim(f"{name}8", min=1, max=largest // 8)
    return Dim(name, min=1, max=largest)


def _seq_example(seq: int, device: str) -> int:
    """The example length: a multiple of 8 on CUDA (``_seq_dim``)."""
    return max(8, seq - seq % 8) if device.split(":", 1)[0] == "cuda" else seq


def _text_spec(name: str, model: torch.nn.Module, size: str, device: str, *, vocab: int, seq_max: int | None = None) -> BuildSpec:
    """An encoder or a cache-less decoder: ``input_ids`` and ``attention_mask``, batch x seq dynamic."""
    seq = _seq_example(min(_SEQ[size], seq_max or _SEQ[size]), device)
    ids = _ids(vocab, _EXAMPLE_BATCH, seq, device)
    batch = _batch(size)
    seq_dim = _seq_dim("seq", seq_max or _SEQ_MAX[size], device)
    kwargs = {"input_ids": ids, "attention_mask": _mask(_EXAMPLE_BATCH, seq, device)}
    dims = {"input_ids": {0: batch, 1: seq_dim}, "attention_mask": {0: batch, 1: seq_dim}}
    return BuildSpec(model.to(device).eval(), (), kwargs, dims, name=name)


def _hf_config(cls: Any, size: str, small: dict[str, Any], full: dict[str, Any] | None = None) -> Any:
    """``cls(**small)`` for the small size; the class's defaults (+ ``full``) otherwise."""
    return cls(**small) if size == "small" else cls(**(full or {}))


def _import_transformers() -> Any:
    ensure_torchvision_importable()
    import transformers

    return transformers


def _import_timm() -> Any:
    ensure_torchvision_importable()
    import timm

    return timm


def _import_torchvision() -> Any:
    ensure_torchvision_importable()
    import torchvision

    return torchvision


# --------------------------------------------------------------------------------------------------
# torchvision
# --------------------------------------------------------------------------------------------------

_TV_CNN_DIMS = "batch 1..B; H, W = 32*k, k 2..K (64..256 small, 64..512 full)"


@_register("resnet18", "torchvision", "cnn", "torchvision.models.resnet18", _TV_CNN_DIMS)
def _resnet18(size: str, device: str) -> BuildSpec:
    tv = _import_torchvision()
    return _image_spec("resnet18", tv.models.resnet18(weights=None), size, device, image=_IMAGE[size], side=_side32(size))


@_register(
    "mobilenet_v3_small",
    "torchvision",
    "cnn",
    "torchvision.models.MobileNetV3 (small: 4 of mobilenet_v3_small's 11 blocks; full: mobilenet_v3_small)",
    _TV_CNN_DIMS,
)
def _mobilenet_v3_small(size: str, device: str) -> BuildSpec:
    tv = _import_torchvision()
    if size == "small":
        from torchvision.models.mobilenetv3 import InvertedResidualConfig, MobileNetV3

        rows = [
            (16, 3, 16, 16, True, "RE", 2, 1),
            (16, 3, 72, 24, False, "RE", 2, 1),
            (24, 5, 96, 40, True, "HS", 2, 1),
            (40, 5, 144, 48, True, "HS", 2, 1),
        ]
        model = MobileNetV3([InvertedResidualConfig(*row, width_mult=1.0) for row in rows], last_channel=128, num_classes=10)
    else:
        model = tv.models.mobilenet_v3_small(weights=None)
    return _image_spec("mobilenet_v3_small", model, size, device, image=_IMAGE[size], side=_side32(size))


@_register(
    "efficientnet_b0",
    "torchvision",
    "cnn",
    "torchvision.models.EfficientNet (small: b0's first 5 stages, 1 MBConv each; full: efficientnet_b0)",
    _TV_CNN_DIMS,
)
def _efficientnet_b0(size: str, device: str) -> BuildSpec:
    tv = _import_torchvision()
    if size == "small":
        from torchvision.models.efficientnet import EfficientNet, MBConvConfig

        rows = [(1, 3, 1, 32, 16, 1), (6, 3, 2, 16, 24, 1), (6, 5, 2, 24, 40, 1), (6, 3, 2, 40, 80, 1), (6, 5, 2, 80, 112, 1)]
        model = EfficientNet([MBConvConfig(*row) for row in rows], dropout=0.2, num_classes=10)
    else:
        model = tv.models.efficientnet_b0(weights=None)
    return _image_spec("efficientnet_b0", model, size, device, image=_IMAGE[size], side=_side32(size))


@_register(
    "convnext_tiny",
    "torchvision",
    "cnn",
    "torchvision.models.ConvNeXt (small: 2 stages, 1 block each; full: convnext_tiny)",
    "batch 1..B; H, W = 32*k, k 2..16 (full); small, with 2 stages (stride 8): 8*k, k 2..32 (16..256)",
)
def _convnext_tiny(size: str, device: str) -> BuildSpec:
    tv = _import_torchvision()
    if size == "small":
        from torchvision.models.convnext import CNBlockConfig, ConvNeXt

        model = ConvNeXt([CNBlockConfig(32, 64, 1), CNBlockConfig(64, None, 1)], num_classes=10)
        side = lambda axis: 8 * Dim(f"{axis}8", min=2, max=32)  # noqa: E731  (total stride 8 with 2 stages)
        return _image_spec("convnext_tiny", model, size, device, image=_IMAGE[size], side=side)
    return _image_spec("convnext_tiny", tv.models.convnext_tiny(weights=None), size, device, image=_IMAGE[size], side=_side32(size))


@_register(
    "regnet_y_400mf",
    "torchvision",
    "cnn",
    "torchvision.models.RegNet (small: regnet_y_400mf's widths, 1 block per stage; full: regnet_y_400mf)",
    _TV_CNN_DIMS,
)
def _regnet_y_400mf(size: str, device: str) -> BuildSpec:
    tv = _import_torchvision()
    if size == "small":
        from torchvision.models.regnet import BlockParams, RegNet

        params = BlockParams(
            depths=[1, 1, 1, 1],
            widths=[48, 104, 208, 440],
            group_widths=[8] * 4,
            bottleneck_multipliers=[1.0] * 4,
            strides=[2] * 4,
            se_ratio=0.25,
        )
        model = RegNet(params, num_classes=10)
    else:
        model = tv.models.regnet_y_400mf(weights=None)
    return _image_spec("regnet_y_400mf", model, size, device, image=_IMAGE[size], side=_side32(size))


@_register(
    "vit_b_16",
    "torchvision",
    "vit",
    "torchvision.models.VisionTransformer (small: 64 px, 2 layers, dim 64; full: vit_b_16)",
    "batch 1..B",
    note="image fixed: torchvision's ViT asserts H == W == image_size",
)
def _vit_b_16(size: str, device: str) -> BuildSpec:
    tv = _import_torchvision()
    if size == "small":
        model = tv.models.VisionTransformer(image_size=64, patch_size=16, num_layers=2, num_heads=2, hidden_dim=64, mlp_dim=128)
        return _image_spec("vit_b_16", model, size, device, image=64, side=None)
    return _image_spec("vit_b_16", tv.models.vit_b_16(weights=None), size, device, image=224, side=None)


@_register(
    "swin_t",
    "torchvision",
    "vit",
    "torchvision.models.SwinTransformer (small: 2 stages, window 4, dim 32; full: swin_t)",
    "batch 1..B",
    note=(
        "image fixed by choice: torchvision's Swin pads to whole windows, so H and W could be dynamic, but that "
        "export took 230 s (full) and the small model's compile 368 s on the 2-core host (zoo/README.md)"
    ),
)
def _swin_t(size: str, device: str) -> BuildSpec:
    tv = _import_torchvision()
    if size == "small":
        model = tv.models.SwinTransformer(
            patch_size=[4, 4], embed_dim=32, depths=[1, 1], num_heads=[2, 2], window_size=[4, 4], num_classes=10
        )
        return _image_spec("swin_t", model, size, device, image=64, side=None)
    return _image_spec("swin_t", tv.models.swin_t(weights=None), size, device, image=224, side=None)


# --------------------------------------------------------------------------------------------------
# timm
# --------------------------------------------------------------------------------------------------


def _timm_model(name: str, size: str, small: dict[str, Any]) -> torch.nn.Module:
    timm = _import_timm()
    return timm.create_model(name, pretrained=False, **(small if size == "small" else {}))


@_register("timm_resnet50", "timm", "cnn", "timm resnet50 (small: 1 block per stage)", _TV_CNN_DIMS)
def _timm_resnet50(size: str, device: str) -> BuildSpec:
    model = _timm_model("resnet50", size, {"layers": [1, 1, 1, 1]})
    return _image_spec("timm_resnet50", model, size, device, image=_IMAGE[size], side=_side32(size))


@_register("timm_convnext_atto", "timm", "cnn", "timm convnext_atto (small: 1 block per stage)", _TV_CNN_DIMS)
def _timm_convnext_atto(size: str, device: str) -> BuildSpec:
    model = _timm_model("convnext_atto", size, {"depths": (1, 1, 1, 1)})
    return _image_spec("timm_convnext_atto", model, size, device, image=_IMAGE[size], side=_side32(size))


@_register("timm_mobilenetv3", "timm", "cnn", "timm mobilenetv3_large_100 (small: depth_multiplier 0.25)", _TV_CNN_DIMS)
def _timm_mobilenetv3(size: str, device: str) -> BuildSpec:
    model = _timm_model("mobilenetv3_large_100", size, {"depth_multiplier": 0.25})
    return _image_spec("timm_mobilenetv3", model, size, device, image=_IMAGE[size], side=_side32(size))


@_register(
    "timm_vit_tiny",
    "timm",
    "vit",
    "timm vit_tiny_patch16_224, dynamic_img_size=True (small: 64 px, 2 blocks)",
    "batch 1..B; H, W = 16*k (16..256 small, 16..512 full)",
)
def _timm_vit_tiny(size: str, device: str) -> BuildSpec:
    timm = _import_timm()
    extra = {"img_size": 64, "depth": 2} if size == "small" else {}
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, dynamic_img_size=True, **extra)
    max_side = 256 if size == "small" else 512
    return _image_spec("timm_vit_tiny", model, size, device, image=_IMAGE[size], side=_side_patch(size, 16, max_side))


@_register(
    "timm_deit_tiny",
    "timm",
    "vit",
    "timm deit_tiny_distilled_patch16_224 (small: 64 px, 2 blocks)",
    "batch 1..B",
    note="image fixed: positional embedding of the training size (no dynamic_img_size on the distilled DeiT)",
)
def _timm_deit_tiny(size: str, device: str) -> BuildSpec:
    extra = {"img_size": 64, "depth": 2}
    model = _timm_model("deit_tiny_distilled_patch16_224", size, extra)
    return _image_spec("timm_deit_tiny", model, size, device, image=_IMAGE[size], side=None)


@_register(
    "timm_swin_tiny",
    "timm",
    "vit",
    "timm swin_tiny_patch4_window7_224 (small: 64 px, window 4, depths 1,1, dim 32)",
    "batch 1..B",
    note="image fixed: the shifted-window attention masks are built for img_size",
)
def _timm_swin_tiny(size: str, device: str) -> BuildSpec:
    small = {"img_size": 64, "window_size": 4, "embed_dim": 32, "depths": (1, 1), "num_heads": (2, 2)}
    model = _timm_model("swin_tiny_patch4_window7_224", size, small)
    return _image_spec("timm_swin_tiny", model, size, device, image=_IMAGE[size], side=None)


@_register(
    "timm_mixer",
    "timm",
    "mlp",
    "timm mixer_s16_224, MLP-Mixer (small: timm's MlpMixer at 64 px, 2 blocks, dim 64)",
    "batch 1..B",
    note="image fixed: the token-mixing MLPs are sized for the patch count",
)
def _timm_mixer(size: str, device: str) -> BuildSpec:
    if size == "small":  # mixer_s16_224 fixes num_blocks and embed_dim itself: the class takes them
        _import_timm()
        from timm.models.mlp_mixer import MlpMixer

        model = MlpMixer(img_size=64, patch_size=16, num_blocks=2, embed_dim=64, num_classes=10)
    else:
        model = _timm_model("mixer_s16_224", size, {})
    return _image_spec("timm_mixer", model, size, device, image=_IMAGE[size], side=None)


# --------------------------------------------------------------------------------------------------
# transformers: encoders
# --------------------------------------------------------------------------------------------------

_SMALL_ENC = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 128, "max_position_embeddings": 256}
_TEXT_DIMS = "batch 1..B; seq 1..S (128 small, 512 full; on CUDA 8*k, as export suggests there)"


@_register("bert", "transformers", "encoder", "BertModel(BertConfig)", _TEXT_DIMS)
def _bert(size: str, device: str) -> BuildSpec:
    t = _import_transformers()
    cfg = _hf_config(t.BertConfig, size, {**_SMALL_ENC, "vocab_size": 1000})
    return _text_spec("bert", t.BertModel(cfg), size, device, vocab=cfg.vocab_size)


@_register("roberta", "transformers", "encoder", "RobertaModel(RobertaConfig)", _TEXT_DIMS)
def _roberta(size: str, device: str) -> BuildSpec:
    t = _import_transformers()
    # RoBERTa's positions start at pad_token_id + 1: 514 positions hold 512 tokens.
    cfg = _hf_config(t.RobertaConfig, size, {**_SMALL_ENC, "vocab_size": 1000}, {"max_position_embeddings": 514})
    return _text_spec("roberta", t.RobertaModel(cfg), size, device, vocab=cfg.vocab_size)


@_register("distilbert", "transformers", "encoder", "DistilBertModel(DistilBertConfig)", _TEXT_DIMS)
def _distilbert(size: str, device: str) -> BuildSpec:
    t = _import_transformers()
    small = {"dim": 64, "n_layers": 2, "n_heads": 2, "hidden_dim": 128, "vocab_size": 1000, "max_position_embeddings": 256}
    cfg = _hf_config(t.DistilBertConfig, size, small)
    return _text_spec("distilbert", t.DistilBertModel(cfg), size, device, vocab=cfg.vocab_size)


@_register("albert", "transformers", "encoder", "AlbertModel(AlbertConfig) (full: the default, albert-xxlarge)", _TEXT_DIMS)
def _albert(size: str, device: str) -> BuildSpec:
    t = _import_transformers()
    cfg = _hf_config(t.AlbertConfig, size, {**_SMALL_ENC, "embedding_size": 32, "vocab_size": 1000})
    return _text_spec("albert", t.AlbertModel(cfg), size, device, vocab=cfg.vocab_size)


@_register("deberta_v2", "transformers", "encoder", "DebertaV2Model(DebertaV2Config) (full: the default, deberta-v2-xlarge)", _TEXT_DIMS)
def _deberta_v2(size: str, device: str) -> BuildSpec:
    t = _import_transformers()
    cfg = _hf_config(t.DebertaV2Config, size, {**_SMALL_ENC, "vocab_size": 1000})
    return _text_spec("deberta_v2", t.DebertaV2Model(cfg), size, device, vocab=cfg.vocab_size)


# --------------------------------------------------------------------------------------------------
# transformers: decoders
# --------------------------------------------------------------------------------------------------

_SMALL_GPT2 = {"n_embd": 64, "n_layer": 2, "n_head": 2, "n_positions": 256, "vocab_size": 1000, "bos_token_id": 1, "eos_token_id": 2}
# a Llama of the TinyLlama-1.1B shape: LlamaConfig()'s own default is the 7B model, too big to
# export, compile and check against eager in fp32 on one GPU.
_FULL_LLAMA = {
    "hidden_size": 2048,
    "intermediate_size": 5632,
    "num_hidden_layers": 22,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "vocab_size": 32000,
    "max_position_embeddings": 2048,
}
_SMALL_LLAMA = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 1000,
    "max_position_embeddings": 256,
}


@_register("gpt2", "transformers", "decoder", "GPT2LMHeadModel(GPT2Config), use_cache=False", _TEXT_DIMS)
def _gpt2(size: str, device: str) -> BuildSpec:
    t = _import_transformers()
    cfg = _hf_config(t.GPT2Config, size, {**_SMALL_GPT2, "use_cache": False}, {"use_cache": False})
    return _text_spec("gpt2", t.GPT2LMHeadModel(cfg), size, device, vocab=cfg.vocab_size)


@_register("opt", "transformers", "decoder", "OPTForCausalLM(OPTConfig) (full: the default, opt-125m), use_cache=False", _TEXT_DIMS)
def _opt(size: str, device: str) -> BuildSpec:
    t = _import_transformers()
    small = {"hidden_size": 64, "ffn_dim": 128, "num_hidden_layers": 2, "num_attention_heads": 2, "word_embed_proj_dim": 64}
    cfg = _hf_config(
        t.OPTConfig, size, {**small, "vocab_size": 1000, "max_position_embeddings": 256, "use_cache": False}, {"use_cache": False}
    )
    return _text_spec("opt", t.OPTForCausalLM(cfg), size, device, vocab=cfg.vocab_size)


@_register(
    "llama",
    "transformers",
    "decoder",
    "LlamaForCausalLM(LlamaConfig) (small: 2 layers, GQA 4/2 heads; full: the TinyLlama-1.1B shape), use_cache=False",
    _TEXT_DIMS,
)
def _llama(size: str, device: str) -> BuildSpec:
    t = _import_transformers()
    cfg = _hf_config(t.LlamaConfig, size, {**_SMALL_LLAMA, "use_cache": False}, {**_FULL_LLAMA, "use_cache": False})
    return _text_spec("llama", t.LlamaForCausalLM(cfg), size, device, vocab=cfg.vocab_size)


def _cache(t: Any, size: str, device: str, *, layers: int, kv_heads: int, head_dim: int, past: int) -> Any:
    shape = (_EXAMPLE_BATCH, kv_heads, past, head_dim)
    return t.DynamicCache([(torch.randn(shape, device=device), torch.randn(shape, device=device)) for _ in range(layers)])


def _cache_spec(
    name: str, model: Any, size: str, device: str, *, layers: int, kv_heads: int, head_dim: int, vocab: int, decode: bool
) -> BuildSpec:
    """A forward step after ``past`` cached tokens, ``DynamicCache`` in and out.

    ``decode=True``: one new token per row (a decode step) with a left-padded ``attention_mask`` over
    the past and the new token: its length is the derived dim ``past + 1``. ``decode=False``: ``seq``
    new tokens (a chunked prefill) and no mask (causal over cache + chunk): ``seq`` and ``past`` free.
    A mask of length ``past + seq`` cannot be spelled with ``Dim`` (one root per derived dim); with
    ``Dim.AUTO`` export leaves its length a free symbol unrelated to ``past + seq`` (zoo/README.md).
    """
    t = _import_transformers()
    from transformers.integrations.executorch import register_dynamic_cache_export_support

    register_dynamic_cache_export_support()  # DynamicCache as a pytree node (transformers does not on import)
    past = 12 if size == "small" else 112
    batch = _batch(size)
    past_dim = Dim("past", min=1, max=_SEQ_MAX[size] - 1 if decode else _SEQ_MAX[size] // 2)
    kv = {0: batch, 2: past_dim}
    cache = _cache(t, size, device, layers=layers, kv_heads=kv_heads, head_dim=head_dim, past=past)
    cache_dims = [[kv] * layers, [kv] * layers]  # DynamicCache flattens to [key_cache, value_cache]
    if decode:
        kwargs = {
            "input_ids": _ids(vocab, _EXAMPLE_BATCH, 1, device),
            "attention_mask": _left_padded_mask(_EXAMPLE_BATCH, past + 1, device),
            "past_key_values": cache,
        }
        dims = {"input_ids": {0: batch}, "attention_mask": {0: batch, 1: past_dim + 1}, "past_key_values": cache_dims}
    else:
        seq = 4 if size == "small" else 16
        kwargs = {"input_ids": _ids(vocab, _EXAMPLE_BATCH, seq, device), "past_key_values": cache}
        seq_dim = Dim("seq", min=1, max=_SEQ_MAX[size] // 2)
        dims = {"input_ids": {0: batch, 1: seq_dim}, "past_key_values": cache_dims}
    return BuildSpec(model.to(device).eval(), (), kwargs, dims, name=name)


@_register(
    "gpt2_cache",
    "transformers",
    "decoder-cache",
    "GPT2LMHeadModel(GPT2Config), a decode step: 1 new token, DynamicCache in and out, left-padded mask",
    "batch 1..B; past 1..S-1 (dim 2 of every cache tensor); attention_mask length past+1 (derived)",
)
def _gpt2_cache(size: str, device: str) -> BuildSpec:
    t = _import_transformers()
    cfg = _hf_config(t.GPT2Config, size, {**_SMALL_GPT2, "use_cache": True}, {"use_cache": True})
    heads = cfg.n_head
    return _cache_spec(
        "gpt2_cache",
        t.GPT2LMHeadModel(cfg),
        size,
        device,
        layers=cfg.n_layer,
        kv_heads=heads,
        head_dim=cfg.n_embd // heads,
        vocab=cfg.vocab_size,
        decode=True,
    )


@_register(
    "llama_cache",
    "transformers",
    "decoder-cache",
    "LlamaForCausalLM(LlamaConfig) with GQA, a chunk of new tokens after a DynamicCache (in and out), no mask",
    "batch 1..B; seq 1..S/2; past 1..S/2 (dim 2 of every cache tensor)",
    note="a one-token decode step of a GQA Llama does not export (torch 2.13): see zoo/README.md",
)
def _llama_cache(size: str, device: str) -> BuildSpec:
    t = _import_transformers()
    cfg = _hf_config(t.LlamaConfig, size, {**_SMALL_LLAMA, "use_cache": True}, {**_FULL_LLAMA, "use_cache": True})
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    return _cache_spec(
        "llama_cache",
        t.LlamaForCausalLM(cfg),
        size,
        device,
        layers=cfg.num_hidden_layers,
        kv_heads=cfg.num_key_value_heads,
        head_dim=head_dim,
        vocab=cfg.vocab_size,
        decode=False,
    )


# --------------------------------------------------------------------------------------------------
# transformers: encoder-decoder
# --------------------------------------------------------------------------------------------------


def _seq2seq_spec(name: str, model: Any, size: str, device: str, *, vocab: int) -> BuildSpec:
    """Teacher-forced encoder-decoder: source ids + mask, decoder ids; batch, src and tgt dynamic."""
    src, tgt = (_seq_example(_SEQ[size], device), _seq_example(_SEQ[size] // 2, device))
    batch = _batch(size)
    src_dim = _seq_dim("src", _SEQ_MAX[size], device)
    tgt_dim = _seq_dim("tgt", _SEQ_MAX[size], device)
    kwargs = {
        "input_ids": _ids(vocab, _EXAMPLE_BATCH, src, device),
        "attention_mask": _mask(_EXAMPLE_BATCH, src, device),
        "decoder_input_ids": _ids(vocab, _EXAMPLE_BATCH, tgt, device),
    }
    dims = {"input_ids": {0: batch, 1: src_dim}, "attention_mask": {0: batch, 1: src_dim}, "decoder_input_ids": {0: batch, 1: tgt_dim}}
    return BuildSpec(model.to(device).eval(), (), kwargs, dims, name=name)


_S2S_DIMS = "batch 1..B; src 1..S; tgt 1..S (on CUDA 8*k)"


@_register("t5", "transformers", "encoder-decoder", "T5Model(T5Config) (full: the default, t5-small), use_cache=False", _S2S_DIMS)
def _t5(size: str, device: str) -> BuildSpec:
    t = _import_transformers()
    small = {"d_model": 64, "d_kv": 32, "d_ff": 128, "num_layers": 2, "num_decoder_layers": 2, "num_heads": 2, "vocab_size": 1000}
    cfg = _hf_config(t.T5Config, size, {**small, "use_cache": False}, {"use_cache": False})
    return _seq2seq_spec("t5", t.T5Model(cfg), size, device, vocab=cfg.vocab_size)


@_register("bart", "transformers", "encoder-decoder", "BartModel(BartConfig) (full: the default, bart-large), use_cache=False", _S2S_DIMS)
def _bart(size: str, device: str) -> BuildSpec:
    t = _import_transformers()
    small = {
        "d_model": 64,
        "encoder_layers": 2,
        "decoder_layers": 2,
        "encoder_attention_heads": 2,
        "decoder_attention_heads": 2,
        "encoder_ffn_dim": 128,
        "decoder_ffn_dim": 128,
        "vocab_size": 1000,
        "max_position_embeddings": 256,
    }
    cfg = _hf_config(t.BartConfig, size, {**small, "use_cache": False}, {"use_cache": False})
    return _seq2seq_spec("bart", t.BartModel(cfg), size, device, vocab=cfg.vocab_size)


# --------------------------------------------------------------------------------------------------
# transformers: speech
# --------------------------------------------------------------------------------------------------


@_register(
    "wav2vec2",
    "transformers",
    "speech",
    "Wav2Vec2Model(Wav2Vec2Config) (small: 3 conv layers of stride 5,2,2, 2 layers)",
    "batch 1..B; samples (raw 16 kHz audio) 1 s..4 s small, 1 s..20 s full; on CUDA 2560*frames8 + 80 (frames8 7..124: 8*frames8 frames)",
)
def _wav2vec2(size: str, device: str) -> BuildSpec:
    t = _import_transformers()
    small = {
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 128,
        "conv_dim": (32, 32, 32),
        "conv_stride": (5, 2, 2),
        "conv_kernel": (10, 3, 3),
        "num_conv_pos_embeddings": 16,
        "num_conv_pos_embedding_groups": 4,
    }
    cfg = _hf_config(t.Wav2Vec2Config, size, small)
    max_s = 4 if size == "small" else 20
    model = t.Wav2Vec2Model(cfg).to(device).eval()
    samples: Any = Dim("samples", min=16000, max=16000 * max_s)
    example = 16000
    if device.split(":", 1)[0] == "cuda":
        samples, example = _frames_of_8(cfg, 16000, 16000 * max_s)
    x = torch.randn(_EXAMPLE_BATCH, example, device=device)
    dims = {"input_values": {0: _batch(size), 1: samples}}
    return BuildSpec(model, (), {"input_values": x}, dims, name="wav2vec2")


def _frames_of_8(cfg: Any, low: int, high: int) -> tuple[Any, int]:
    """Audio lengths whose frame count is a multiple of 8: ``8*S*k + (R - S)`` samples, with S the
    feature encoder's total stride and R its receptive field (320 and 400 for the default config:
    2560*k + 80 samples give exactly 8*k frames, every conv's division exact).

    On CUDA, torch.export refused ``samples`` 1 s..20 s (the GPU zoo run of 2026-11-23): as for the
    text models (``_seq_dim``), the attention kernel's choice depends on the sequence length, here
    the frame count, being a multiple of 8, and a free ``samples`` gives it a floor of a division.
    Returns the derived Dim, within ``low..high`` samples, and its smallest length (the example)."""
    stride, field = 1, 0
    for i, (k, st) in enumerate(zip(cfg.conv_kernel, cfg.conv_stride, strict=True)):
        field += k if i == 0 else (k - 1) * stride
        stride *= st
    step, offset = 8 * stride, field - stride
    k = Dim("frames8", min=-(-(low - offset) // step), max=(high - offset) // step)
    return step * k + offset, step * k.min + offset


@_register(
    "whisper_encoder",
    "transformers",
    "speech",
    "WhisperModel(WhisperConfig).encoder (full: the default config, whisper-tiny's shape)",
    "batch 1..B",
    note="frames fixed: Whisper's encoder requires exactly 2 * max_source_positions mel frames (3000 full, 64 small)",
)
def _whisper_encoder(size: str, device: str) -> BuildSpec:
    t = _import_transformers()
    small = {
        "d_model": 64,
        "encoder_layers": 2,
        "decoder_layers": 1,
        "encoder_attention_heads": 2,
        "decoder_attention_heads": 2,
        "encoder_ffn_dim": 128,
        "decoder_ffn_dim": 128,
        "num_mel_bins": 16,
        "max_source_positions": 32,
        "vocab_size": 1000,
        "pad_token_id": 0,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "decoder_start_token_id": 1,
    }
    cfg = _hf_config(t.WhisperConfig, size, small)
    encoder = t.WhisperModel(cfg).get_encoder().to(device).eval()
    frames = 2 * cfg.max_source_positions
    x = torch.randn(_EXAMPLE_BATCH, cfg.num_mel_bins, frames, device=device)
    return BuildSpec(encoder, (), {"input_features": x}, {"input_features": {0: _batch(size)}}, name="whisper_encoder")


# --------------------------------------------------------------------------------------------------
# transformers: multimodal encoders
# --------------------------------------------------------------------------------------------------

_SMALL_CLIP_TEXT = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 128,
    "vocab_size": 1000,
    "bos_token_id": 1,
    "eos_token_id": 2,
}
_SMALL_CLIP_VISION = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 128,
    "image_size": 32,
    "patch_size": 8,
}
_CLIP_TEXT_MAX = 77  # CLIP's text positions


@_register(
    "clip_vision",
    "transformers",
    "multimodal",
    "CLIPVisionModel(CLIPVisionConfig) (full: the default, ViT-B/32 at 224)",
    "batch 1..B",
    note="image fixed: position embeddings of image_size (interpolate_pos_encoding not used)",
)
def _clip_vision(size: str, device: str) -> BuildSpec:
    t = _import_transformers()
    cfg = _hf_config(t.CLIPVisionConfig, size, _SMALL_CLIP_VISION)
    model = t.CLIPVisionModel(cfg).to(device).eval()
    x = torch.randn(_EXAMPLE_BATCH, 3, cfg.image_size, cfg.image_size, device=device)
    return BuildSpec(model, (), {"pixel_values": x}, {"pixel_values": {0: _batch(size)}}, name="clip_vision")


@_register("clip_text", "transformers", "multimodal", "CLIPTextModel(CLIPTextConfig)", "batch 1..B; seq 1..77 (on CUDA 8*k up to 72)")
def _clip_text(size: str, device: str) -> BuildSpec:
    t = _import_transformers()
    cfg = _hf_config(t.CLIPTextConfig, size, _SMALL_CLIP_TEXT)
    return _text_spec("clip_text", t.CLIPTextModel(cfg), size, device, vocab=cfg.vocab_size, seq_max=_CLIP_TEXT_MAX)


@_register(
    "clip",
    "transformers",
    "multimodal",
    "CLIPModel(CLIPConfig): both towers, nested ModelOutputs",
    "text batch 1..B, seq 1..77 (on CUDA 8*k up to 72); image batch 1..B (its own dim)",
)
def _clip(size: str, device: str) -> BuildSpec:
    t = _import_transformers()
    if size == "small":
        cfg = t.CLIPConfig(text_config=_SMALL_CLIP_TEXT, vision_config=_SMALL_CLIP_VISION, projection_dim=32)
    else:
        cfg = t.CLIPConfig()
    model = t.CLIPModel(cfg).to(device).eval()
    seq, side = _seq_example(min(_SEQ[size], _CLIP_TEXT_MAX), device), cfg.vision_config.image_size
    kwargs = {
        "input_ids": _ids(cfg.text_config.vocab_size, _EXAMPLE_BATCH, seq, device),
        "pixel_values": torch.randn(_EXAMPLE_BATCH + 1, 3, side, side, device=device),
        "attention_mask": _mask(_EXAMPLE_BATCH, seq, device),
    }
    texts, images, seq_dim = (
        Dim("texts", min=1, max=_BATCH_MAX[size]),
        Dim("images", min=1, max=_BATCH_MAX[size]),
        _seq_dim("seq", _CLIP_TEXT_MAX, device),
    )
    dims = {"input_ids": {0: texts, 1: seq_dim}, "pixel_values": {0: images}, "attention_mask": {0: texts, 1: seq_dim}}
    return BuildSpec(model, (), kwargs, dims, name="clip")


# --------------------------------------------------------------------------------------------------
# TARGET functions: zoo/models.py:NAME for aoti-guard build
# --------------------------------------------------------------------------------------------------


def _target(name: str) -> Callable[[], BuildSpec]:
    def target() -> BuildSpec:
        size = os.environ.get("AOTI_GUARD_ZOO_SIZE", "small")
        device = os.environ.get("AOTI_GUARD_ZOO_DEVICE", "cpu")
        return build(name, size, device)

    target.__name__ = target.__qualname__ = name
    target.__doc__ = f"TARGET: the zoo's {name} (size from AOTI_GUARD_ZOO_SIZE, device from AOTI_GUARD_ZOO_DEVICE)."
    return target


for _name in _REGISTRY:
    globals()[_name] = _target(_name)
    __all__.append(_name)
del _name

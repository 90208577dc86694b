"""Build targets for the GPU scripts: zoo models at full size as `aoti-guard build` factories
(`aoti-guard build scripts/gpu/targets.py:vit_tiny_full --device cuda ...`)."""

from __future__ import annotations

import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from zoo.models import entry


def vit_tiny_full() -> Any:
    """timm vit_tiny_patch16_224 with dynamic_img_size, 224 px example, H, W = 16*k up to 512."""
    return entry("timm_vit_tiny").factory("full", "cpu")  # the build moves it to --device


def vit_tiny_small() -> Any:
    return entry("timm_vit_tiny").factory("small", "cpu")

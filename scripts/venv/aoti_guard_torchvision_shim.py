"""Installed into the README's venv by scripts/setup.sh (with a .pth file that imports it at
start-up) only when that venv pairs a CPU-only torch with a torchvision that is a CUDA build (the
package index has no CPU build of torchvision). Then torchvision's ``_C`` does not load, and
``import torchvision`` fails on two fake-kernel registrations (``operator torchvision::nms does not
exist``), and with it every transformers model (transformers imports torchvision whenever it is
installed). zoo/README.md tells the story; zoo.models.ensure_torchvision_importable is the same
remedy for a single process.

At start-up this only puts a finder on ``sys.meta_path`` (no import of torch). On the first
``import torchvision`` the finder removes itself, imports torchvision, and, when and only when
that exact error occurs, defines the two operators' schemas (copied from torchvision's C++
registration) and imports it again. The model code is torchvision's own; only the detection ops
(nms, roi_align...) stay without kernels.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from typing import Any

_SCHEMAS: Any = None  # the torch.library.Library that holds the two schemas (kept alive)


class _Imported(importlib.abc.Loader):
    """Hands the import system the torchvision module this shim already imported."""

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Any:
        return sys.modules["torchvision"]

    def exec_module(self, module: Any) -> None:
        return None


class _TorchvisionFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if name != "torchvision":
            return None
        sys.meta_path[:] = [f for f in sys.meta_path if f is not self]
        spec = importlib.util.find_spec("torchvision")
        if spec is None:
            return None
        try:
            import_torchvision()
        except Exception:  # noqa: BLE001 - any other failure: the plain import reports it
            for mod in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
                del sys.modules[mod]
            return None
        shim = importlib.machinery.ModuleSpec("torchvision", _Imported(), origin=spec.origin, is_package=True)
        shim.submodule_search_locations = spec.submodule_search_locations
        return shim


def import_torchvision() -> bool:
    """Import torchvision; when, and only when, it fails with the two missing schemas, define them
    and import it again. Returns whether the schemas were defined. zoo.models loads this file by
    path and calls this (one remedy, two ways in: a venv's start-up, a single process)."""
    global _SCHEMAS
    try:
        import torchvision  # noqa: F401

        return False
    except RuntimeError as exc:
        if "torchvision::nms does not exist" not in str(exc):
            raise
        for mod in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[mod]
        import torch

        lib = torch.library.Library("torchvision", "FRAGMENT")
        for op in ("nms", "qnms"):
            lib.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        _SCHEMAS = lib
        import torchvision  # noqa: F401,F811

        return True


# at a venv's start-up (imported by its .pth under this name), not when zoo.models loads the file
if __name__ == "aoti_guard_torchvision_shim" and not any(isinstance(f, _TorchvisionFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _TorchvisionFinder())

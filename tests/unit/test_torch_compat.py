"""runtime_probe.runtime.torch_compat on the installed torch: every entry resolves, the features a release
added are detected exactly where they exist, and nothing else in either package reaches into
torch's private API. CI runs this file under torch 2.13 and 2.15 (and a 2.14 smoke lane); the
version-specific expectations below are what docs/compat.md's table says, checked on each."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest
import torch

from runtime_probe.runtime import torch_compat

ROOT = Path(__file__).resolve().parents[2]
VERSION = tuple(int(x) for x in re.findall(r"\d+", torch.__version__.split("+")[0])[:2])


def test_torch_is_a_supported_release() -> None:
    assert (2, 11) <= VERSION <= (2, 15), f"torch {torch.__version__} is outside 2.11-2.15: extend docs/compat.md and this module first"


@pytest.mark.parametrize("entry", torch_compat.ENTRIES, ids=lambda e: e.api)
def test_every_entry_resolves(entry: torch_compat.Entry) -> None:
    try:
        value = entry.resolve()
    except torch_compat.TorchCompatError as exc:
        pytest.fail(f"{entry.api} does not resolve on torch {torch.__version__}: {exc} (docs/compat.md says: {entry.versions})")
    assert value is not None


def test_resolve_all_reports_every_entry_as_resolved() -> None:
    report = torch_compat.resolve_all()
    assert set(report) == {e.api for e in torch_compat.ENTRIES}
    assert {api: msg for api, msg in report.items() if msg is not None} == {}


def test_a_missing_api_names_the_torch_version_and_the_api() -> None:
    with pytest.raises(torch_compat.TorchCompatError) as caught:
        torch_compat._resolve("torch._C._aoti", "AOTIModelPackageLoaderThatDoesNotExist")
    message = str(caught.value)
    assert torch.__version__ in message
    assert "torch._C._aoti.AOTIModelPackageLoaderThatDoesNotExist" in message
    assert "2.11-2.15" in message and "hint" in message
    assert caught.value.api == "torch._C._aoti.AOTIModelPackageLoaderThatDoesNotExist"
    with pytest.raises(torch_compat.TorchCompatError, match=r"module torch\._no_such_module cannot be imported"):
        torch_compat._resolve("torch._no_such_module", "x")


def test_inductor_config_probe() -> None:
    assert torch_compat.has_inductor_config("aot_inductor.check_lowerbound")
    assert torch_compat.has_inductor_config("aot_inductor.emit_multi_arch_kernel")
    assert not torch_compat.has_inductor_config("aot_inductor.no_such_key")


def test_export_guard_texts_reads_the_guards_of_a_real_export() -> None:
    class M(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.reshape(-1, 8).sum(1)

    batch = torch.export.Dim("batch", min=1, max=64)
    ep = torch.export.export(M(), (torch.randn(4, 8),), dynamic_shapes={"x": {0: batch}})
    texts = torch_compat.export_guard_texts(ep)
    assert texts is not None, "ExportedProgram._guards_code is gone: aoti_guard's export guards read nothing"
    assert all(isinstance(t, str) for t in texts)


def test_container_runner_refuses_an_unknown_device_type() -> None:
    with pytest.raises(torch_compat.TorchCompatError, match="only cpu and cuda"):
        torch_compat.container_runner("/nonexistent.so", "mps", None)


# --- features: detected by what torch exposes; expected per release (docs/compat.md) -------------

EXPECTED_SINCE = {
    "loader_accepts_directory": (2, 13),
    "load_constants_h2d": (2, 13),
    "runner_did_call_load_constants": (2, 14),
    "build_logs_loading": (2, 14),
    "loader_stream_affinity": (2, 15),
}


def test_every_feature_has_an_expectation() -> None:
    assert {f.name for f in torch_compat.FEATURES} == set(EXPECTED_SINCE)
    assert {f.name: f.since for f in torch_compat.FEATURES} == {k: f"{v[0]}.{v[1]}" for k, v in EXPECTED_SINCE.items()}


@pytest.mark.parametrize("name", sorted(EXPECTED_SINCE))
def test_feature_is_detected_exactly_from_its_release(name: str) -> None:
    expected = VERSION >= EXPECTED_SINCE[name]
    found = torch_compat.features()[name]
    assert found == expected, f"{name} on torch {torch.__version__}: expected {expected}, detected {found}"


def test_so_features_reads_markers_across_chunk_borders() -> None:
    blob = b"\0" * 100 + b"[AOTI_LOAD] load_constants" + b"\0" * 50 + b"AOTInductorModelContainerUpdateConstantBufferFromCpuPairs"
    chunks = [blob[i : i + 7] for i in range(0, len(blob), 7)]  # every marker split across chunks
    assert torch_compat.so_features(chunks) == {"load_log": True, "did_call_load_constants": False, "constants_from_cpu": True}
    assert torch_compat.so_features([b"nothing here"]) == dict.fromkeys(
        ("load_log", "did_call_load_constants", "constants_from_cpu"), False
    )


def test_aoti_load_lines() -> None:
    text = "noise\n[AOTI_LOAD] load_constants: starting H2D copy of 2 constants\nother\n  [AOTI_LOAD] load_constants: H2D copy completed in 0 ms\n"
    assert torch_compat.aoti_load_lines(text) == [
        "[AOTI_LOAD] load_constants: starting H2D copy of 2 constants",
        "[AOTI_LOAD] load_constants: H2D copy completed in 0 ms",
    ]


# --- the one place: nothing else reaches into torch's private API ------------------------------

_PRIVATE = re.compile(r"^torch\.(_C|_inductor|_dynamo|_guards|_export)(\.|$)|^torch\.export\.(pt2_archive|exported_program|_\w+)(\.|$)")
# private names used elsewhere on purpose, each with why
_ALLOWED = {
    # a missing _functorch only loses the wrapper's name in the refusal (getattr with a default)
    ("runtime_probe/guard/refusals.py", "torch._C"),
}


def _dotted(node: ast.AST) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def _private_uses(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Attribute):
            dotted = _dotted(node)
            names = [dotted] if dotted else []
        found.update(n for n in names if _PRIVATE.search(n))
    return found


def test_private_torch_api_is_reached_only_through_torch_compat() -> None:
    offenders = []
    for pkg in ("aoti_guard", "runtime_probe"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel == "runtime_probe/runtime/torch_compat.py":
                continue
            for name in sorted(_private_uses(path)):
                root = ".".join(name.split(".")[:2])
                if (rel, root) not in _ALLOWED:
                    offenders.append(f"{rel}: {name}")
    assert offenders == [], "use runtime_probe.runtime.torch_compat (one entry per private API) instead of:\n" + "\n".join(offenders)


def test_the_scan_catches_each_form(tmp_path: Path) -> None:
    probe = tmp_path / "sample.py"
    probe.write_text(
        "import torch._inductor.config\nfrom torch._C import _aoti\nx = torch._dynamo.reset\ns = 'torch._dynamo'\n", encoding="utf-8"
    )
    assert _private_uses(probe) == {"torch._inductor.config", "torch._C", "torch._C._aoti", "torch._dynamo.reset", "torch._dynamo"}


def test_import_is_standard_library_only() -> None:
    assert "runtime_probe.runtime.torch_compat" in sys.modules
    tree = ast.parse((ROOT / "runtime_probe" / "runtime/torch_compat.py").read_text(encoding="utf-8"))
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    modules = {a.name.split(".")[0] for n in top if isinstance(n, ast.Import) for a in n.names}
    modules |= {n.module.split(".")[0] for n in top if isinstance(n, ast.ImportFrom) and n.module}
    assert modules <= {"__future__", "importlib", "os", "collections", "dataclasses", "typing"}, modules

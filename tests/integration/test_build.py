"""aoti-guard build on CPU with real packages: the manifest against the truth, and failures as findings."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from runtime_probe.host.cpu import cpu_flags
from runtime_probe.package.manifest import MANIFEST_SCHEMA_VERSION, Dim, parse_manifest
from runtime_probe.reporting.report import REPORT_SCHEMA_VERSION
from runtime_probe.runtime import layout

from .conftest import MODELS, Built, build_package, march_lever, run_cli

pytestmark = pytest.mark.integration


def manifest_of(path: Path) -> Any:
    with zipfile.ZipFile(path) as zf:
        root = zf.namelist()[0].split("/", 1)[0]
        return parse_manifest(zf.read(f"{root}/{layout.MANIFEST}"))


def codes(report: dict[str, Any]) -> set[str]:
    return {f["code"] for p in report["phases"] for f in p["findings"]}


def test_example_build_reports_every_phase_with_times(example_pkg: Built) -> None:
    assert example_pkg.path.exists()
    report = example_pkg.report
    assert report is not None and report["schema_version"] == REPORT_SCHEMA_VERSION and report["kind"] == "build"
    assert [p["name"] for p in report["phases"]] == ["resolve", "export", "compile", "validate", "debug_twin", "package"]
    assert all(p["status"] == "passed" for p in report["phases"])
    for phase in ("export", "compile", "validate", "debug_twin", "package"):
        assert f"[{phase}] passed in" in example_pkg.stderr  # the one progress format (runtime_probe/reporting/progress.py)
    assert report["package"]["sha256"] and report["package"]["bytes"] == example_pkg.path.stat().st_size
    assert "Traceback" not in example_pkg.stderr
    # on CPU the twin compiled in a child beside the release model (builder/twin/schedule.py)
    twin = next(p for p in report["phases"] if p["name"] == "debug_twin")
    assert twin["detail"]["where"] == "a child process, beside the release compile" and twin["detail"]["child_s"] > 0
    # the compile's line (and its heartbeat) names the release compile the phase waits on, the twin beside it
    assert "[compile] compiling the release model, and the debug twin beside it in a child process" in example_pkg.stderr
    # validation went one sample at a time, each with its seconds per step (builder/validate/run.py)
    validate = next(p for p in report["phases"] if p["name"] == "validate")
    timings = validate["detail"]["timings"]
    assert timings[0]["sample"] == "example" and len(timings) >= 3
    assert all({"eager_s", "fp64_s", "compiled_s", "compare_s"} <= set(t) for t in timings)
    # the release package's entries were hashed while validation ran (pt2/writer.py, EntryHashes),
    # and the manifest's hashes are still those of the bytes in the package (the probe checks them)
    package = next(p for p in report["phases"] if p["name"] == "package")
    early = package["detail"]["early_hashes"]
    assert early["entries"] > 0 and early["bytes"] > 0 and "error" not in early
    # the manifest's constant digests were taken while the release model compiled (compile/constant_digests.py)
    digests = package["detail"]["constant_digests"]
    assert digests["early"] == report["extra"]["manifest_summary"]["constants"] > 0 and digests["again"] == 0
    parts = package["detail"]["timings"]  # where the phase's seconds went, part by part
    assert set(parts) == {"read_release", "toolchain_and_constants", "early_hashes_wait", "golden", "twin", "hashes", "manifest"}
    assert sum(parts.values()) <= package["seconds"] + 0.01


def test_the_constant_digests_taken_during_the_compile_are_those_the_package_holds(example_pkg: Built) -> None:
    """The manifest's constant digests, taken on a thread while the release model compiled
    (builder/compile/constant_digests.py), equal the digests of the constants as the built package's own
    model holds them (read as the build's pairing of renamed constants reads them). A constant the
    compiler inlined into its code (``storage`` "inlined") has no value to read back."""
    from runtime_probe.package.release_constants import release_constant_digests

    with zipfile.ZipFile(example_pkg.path) as zf:
        name = next(n for n in zf.namelist() if n.endswith(layout.MANIFEST))
        manifest = parse_manifest(zf.read(name))
    recorded = {c.runtime_fqn or c.fqn: c.sha256 for c in manifest.constants if c.storage == "package"}
    held = release_constant_digests(str(example_pkg.path), layout.RELEASE_MODEL, sorted(recorded), "cpu", None)
    assert len(recorded) >= 4 and {k: d["sha256"] for k, d in held.items()} == recorded


def test_static_manifest_matches_the_model(static_pkg: Built) -> None:
    import torch

    sys.path.insert(0, str(MODELS.parent))
    import models

    sys.path.pop(0)
    model, (_x,) = models.static()
    m = manifest_of(static_pkg.path)
    assert m.schema_version == MANIFEST_SCHEMA_VERSION and m.model_name == "model"
    (inp,) = m.io.inputs
    assert inp.name == "x" and inp.kind == "tensor" and inp.index == 0
    assert inp.tensor is not None
    assert inp.tensor.dtype == "float32" and inp.tensor.shape == (8, 16) and inp.tensor.stride == (16, 1)
    assert inp.tensor.contiguous and inp.tensor.device == "cpu"
    assert m.io.symbols == ()
    (out,) = m.io.outputs
    assert out.name == "output" and out.tensor is not None and out.tensor.shape == (8, 16)
    # constants: FQNs, dtypes, shapes and content hashes of the real parameters
    from aoti_guard.builder.export.contract import tensor_sha256

    by_fqn = {c.fqn: c for c in m.constants}
    assert set(by_fqn) == {"lin.weight", "lin.bias"}
    for fqn, t in model.state_dict().items():
        assert by_fqn[fqn].shape == tuple(t.shape) and by_fqn[fqn].dtype == "float32"
        assert by_fqn[fqn].sha256 == tensor_sha256(t)
    assert by_fqn["lin.weight"].storage == "package"
    # target and toolchain
    # the portable default (targets.DEFAULT_CPU_ISA) where this torch has the lever, else the build host's
    assert m.target.device_type == "cpu" and m.target.march == ("x86-64-v3" if march_lever() else "native")
    flags = cpu_flags()
    assert m.target.cpu_isa and flags is not None and set(m.target.cpu_isa) <= flags
    assert m.toolchain.torch == torch.__version__
    assert m.toolchain.glibcxx_required and m.toolchain.glibcxx_required.startswith("GLIBCXX_3.4")
    assert m.toolchain.glibc_required and m.toolchain.cxx_version
    # every entry but the manifest is hashed
    with zipfile.ZipFile(static_pkg.path) as zf:
        rels = {n.split("/", 1)[1] for n in zf.namelist()}
    assert set(m.hashes) == rels - {layout.MANIFEST}
    assert m.twin is None  # --no-debug-twin
    assert not any(r.startswith(layout.TWIN_DIR) for r in rels)


def test_dynamic_example_records_ranges_golden_and_twin(example_pkg: Built) -> None:
    m = manifest_of(example_pkg.path)
    x, mask = m.io.inputs
    assert (x.name, mask.name) == ("x", "mask")
    assert x.tensor is not None and mask.tensor is not None
    assert x.tensor.shape == (Dim("batch", 1, 64), 16) and mask.tensor.shape == (Dim("batch", 1, 64), 32)
    assert mask.tensor.dtype == "bool"
    (batch,) = m.io.symbols
    assert (batch.name, batch.min, batch.max) == ("batch", 1, 64)
    assert set(batch.sources) == {"x.shape[0]", "mask.shape[0]"}
    assert m.golden is not None
    sizes = {g.id: g.symbols["batch"] for g in m.golden.samples}
    assert sizes["example"] == 4 and sizes["min"] == 1 and sizes["max"] == 64
    (tol,) = m.golden.tolerances
    assert tol.output == "output" and tol.atol >= 1e-5 and tol.rtol > 0
    assert m.twin is not None and not m.twin.nan_asserts and m.twin.intermediate_value_printer == "2"
    assert m.twin.weights == "release" and m.debug_twin is None  # on CPU the twin shares the release weights
    assert m.twin.kernels, "the twin printed no kernel names at build time"
    assert m.twin.nonfinite is not None and m.twin.nonfinite.version == 1 and "example" in m.twin.nonfinite.samples
    # the key facts are mirrored into AOTI's own metadata (readable by a C++ server)
    assert m.aoti_metadata["aoti_guard.inputs"] == "x:float32[batch,16];mask:bool[batch,32]"
    assert m.aoti_metadata["aoti_guard.symbols"] == "batch=1..64"
    # buffers are constants too
    assert {c.fqn: c.kind for c in m.constants}["scale"] == "buffer"


def test_mixed_dtypes_keyword_tensor_and_cli_dynamic_dims(mixed_pkg: Built) -> None:
    m = manifest_of(mixed_pkg.path)
    params = {p.name: (p.kind, p.passed) for p in m.io.params}
    assert params == {
        "x": ("positional_or_keyword", "positional"),
        "ids": ("positional_or_keyword", "positional"),
        "scale": ("keyword_only", "keyword"),
    }
    dtypes = {i.name: i.tensor.dtype for i in m.io.inputs if i.tensor}
    assert dtypes == {"x": "float32", "ids": "int64", "scale": "float16"}
    (batch,) = m.io.symbols
    assert (batch.name, batch.min, batch.max) == ("batch", 2, 32)
    assert set(batch.sources) == {"x.shape[0]", "ids.shape[0]"}
    outs = {o.name: o.tensor.dtype for o in m.io.outputs if o.tensor}
    assert outs == {"output[0]": "float32", "output[1]": "int64"}
    assert m.golden is not None
    tol = {t.output: t for t in m.golden.tolerances}
    assert tol["output[1]"].atol == 0 and tol["output[1]"].rtol == 0  # integers compare exactly


def test_buffers_and_lifted_constants(buffers_pkg: Built) -> None:
    m = manifest_of(buffers_pkg.path)
    kinds = {c.fqn: c.kind for c in m.constants}
    assert kinds["lin.weight"] == "parameter" and kinds["running"] == "buffer"
    assert "table" in kinds  # a non-persistent buffer
    assert any(k == "constant" for k in kinds.values())  # the lifted tensor attribute
    assert m.io.symbols[0].name == "rows" and (m.io.symbols[0].min, m.io.symbols[0].max) == (2, 32)


def _run_py(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


def test_plain_torch_still_loads_the_release_model(example_pkg: Built) -> None:
    code = f"""
import torch
from aoti_guard.builder.resolve.example import example_spec
spec = example_spec()
m = torch._inductor.aoti_load_package({str(example_pkg.path)!r})
for b in (1, 5, 64):
    x = torch.randn(b, 16); mask = torch.rand(b, 32) > 0.5
    with torch.no_grad():
        ref = spec.model(x, mask)
    assert torch.allclose(m(x, mask), ref, atol=1e-5), b
print("OK")
"""
    proc = _run_py(code)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stderr[-2000:]


def test_debug_twin_loads_by_name_and_prints_kernels(example_pkg: Built) -> None:
    code = f"""
import torch, runtime_probe.guard.load as g
twin = g.load({str(example_pkg.path)!r}, model="debug_twin")
rel = g.load({str(example_pkg.path)!r})
x = torch.randn(3, 16); mask = torch.rand(3, 32) > 0.5
assert torch.equal(twin(x, mask), rel(x, mask))
print("OK")
"""
    proc = _run_py(code)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stderr[-2000:]
    assert "before_launch" in proc.stdout


def test_nan_model_fails_validation(pkg_dir: Path) -> None:
    built = build_package(pkg_dir, "nan", f"{MODELS}:nan", "--no-debug-twin")
    assert built.returncode == 1
    assert built.report is not None and "build.nonfinite" in codes(built.report)
    assert not built.path.exists(), "a package that failed validation must not be written to -o"
    assert (pkg_dir / "nan.rejected.pt2").exists()
    assert "Traceback" not in built.stderr + built.stdout
    assert "build.nonfinite" in built.stdout


def test_nan_model_passes_with_allow_nonfinite(pkg_dir: Path) -> None:
    built = build_package(pkg_dir, "nan_ok", f"{MODELS}:nan", "--no-debug-twin", "--allow-nonfinite")
    assert built.returncode == 0, built.stdout
    assert built.path.exists()


@pytest.mark.parametrize(
    ("factory", "code", "needle"),
    [
        ("raising", "build.factory_failed", "the checkpoint path is wrong"),
        ("data_dependent", "build.export_failed", "data"),
        ("not_a_model", "build.factory_failed", "int"),
    ],
)
def test_failures_are_findings_without_traceback(pkg_dir: Path, factory: str, code: str, needle: str) -> None:
    built = build_package(pkg_dir, factory, f"{MODELS}:{factory}")
    assert built.returncode == 1, built.stdout + built.stderr
    assert built.report is not None and code in codes(built.report)
    finding = next(f for p in built.report["phases"] for f in p["findings"] if f["code"] == code)
    assert needle in (finding["message"] + (finding["found"] or "")).lower() or needle in (finding["found"] or "")
    assert finding["hint"]
    assert "Traceback" not in built.stderr + built.stdout
    assert not built.path.exists()


@pytest.mark.parametrize(
    "args",
    [
        ["build"],  # no -o
        ["build", "-o", "x.zip"],
        ["build", "nosuchfile.py:make", "-o", "x.pt2"],
        ["build", f"{MODELS}:nosuchfunc", "-o", "x.pt2"],
        ["build", "no_colon_here", "-o", "x.pt2"],
        ["build", "-o", "x.pt2", "--device", "tpu"],
        ["build", "-o", "x.pt2", "--dynamic", "x0=batch"],
        ["build", "-o", "x.pt2", "--dynamic", "x:0=batch:9..3"],
        ["build", "-o", "x.pt2", "--dynamic", "nosuchinput:0=batch"],
        ["build", "-o", "x.pt2", "--inductor-config", "max_autotunee=true"],
        ["build", "-o", "/dev/null/dir/x.pt2"],  # a folder that cannot be created (-o creates a missing one)
        ["probe"],
        ["probe", "/nonexistent.pt2"],
        ["probe", "/nonexistent.pt2", "--device", "gpu"],
        ["inspect", "/nonexistent.pt2"],
        ["probe", "/nonexistent.pt2", "--public-key", "/nonexistent.pub"],
        ["keygen"],
        ["keygen", "/nonexistent/dir/release.key"],
        ["sign", "/nonexistent.pt2"],  # no --key
        ["sign", "/nonexistent.pt2", "--key", "/nonexistent.key"],
        ["build", "-o", "x.pt2", "--sign-key", "/nonexistent.key"],
        ["frobnicate"],
    ],
)
def test_bad_usage_exits_2_without_traceback(args: list[str], tmp_path: Path) -> None:
    proc = run_cli(*args)
    assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip()


@pytest.mark.parametrize("sub", [[], ["build"], ["probe"], ["inspect"], ["keygen"], ["sign"]])
def test_help_of_every_subcommand(sub: list[str]) -> None:
    proc = run_cli(*sub, "--help")
    assert proc.returncode == 0 and "Usage:" in proc.stdout
    assert len(proc.stdout.splitlines()) > 8


def test_inspect_shows_the_contract(example_pkg: Built) -> None:
    proc = run_cli("inspect", str(example_pkg.path))
    assert proc.returncode == 0, proc.stderr
    assert "batch[1..64]" in proc.stdout and "debug_twin" in proc.stdout and "golden" in proc.stdout
    data = json.loads(run_cli("inspect", str(example_pkg.path), "--json").stdout)
    assert data["manifest"]["io"]["symbols"][0]["name"] == "batch"
    assert "debug_twin" in data and data["models"]["model"]["so"]["glibcxx"].startswith("GLIBCXX_")


def test_inspect_plain_package_says_what_is_missing(plain_pkg: Path) -> None:
    proc = run_cli("inspect", str(plain_pkg))
    assert proc.returncode == 0
    assert "plain AOTI package" in proc.stdout and "golden samples" in proc.stdout
    data = json.loads(run_cli("inspect", str(plain_pkg), "--json").stdout)
    assert "manifest" not in data and data["missing"]
    assert data["models"]["model"]["constants"][0]["fqn"] == "lin.weight"


def test_saved_exported_program_target_and_trace_dir(pkg_dir: Path, tmp_path: Path) -> None:
    import torch

    sys.path.insert(0, str(MODELS.parent))
    import models

    sys.path.pop(0)
    model, args = models.static()
    saved = tmp_path / "program.pt2"
    torch.export.save(torch.export.export(model, args), str(saved))
    trace = tmp_path / "trace"
    built = build_package(pkg_dir, "from_program", str(saved), "--no-debug-twin", "--trace-dir", str(trace))
    assert built.returncode == 0, built.stdout + built.stderr
    assert manifest_of(built.path).io.inputs[0].name == "x"
    assert any(trace.iterdir()), "no TORCH_TRACE file was written"


def test_compile_failure_is_a_finding(pkg_dir: Path) -> None:
    """Inductor's testing-only bug injection makes the C++ compile fail."""
    built = build_package(
        pkg_dir,
        "compile_error",
        f"{MODELS}:relu_chain",
        "--no-debug-twin",
        "--inductor-config",
        "cpp.inject_relu_bug_TESTING_ONLY=compile_error",
    )
    assert built.returncode == 1, built.stdout + built.stderr
    assert built.report is not None and "build.compile_failed" in codes(built.report)
    finding = next(f for p in built.report["phases"] for f in p["findings"] if f["code"] == "build.compile_failed")
    assert finding["hint"] and finding["found"]
    assert "Traceback" not in built.stderr + built.stdout
    assert not built.path.exists()

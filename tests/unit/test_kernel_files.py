"""A kernel file the generated code loads and the package does not hold (pytorch#120194): named
before any native code runs, by the probe (any host), the guarded loader and ``inspect``.

tests/data/cuda_example.pt2 is such a package: its kernel paths were blanked to ``/____...`` when it
was committed, so on a GPU its first call fails with ``CUDA driver error: file not found``.
"""

from __future__ import annotations

import hashlib
import json
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest

import runtime_probe
from runtime_probe.formats.wrapper_cpp import KernelLoad, parse_wrapper_cpp
from runtime_probe.inspect import inspect_package
from runtime_probe.package.archive import open_archive
from runtime_probe.package.kernel_files import kernel_file_findings
from runtime_probe.probe import run as probe_run
from runtime_probe.probe.options import ProbeOptions
from runtime_probe.reporting.errors import PackageRejected
from runtime_probe.reporting.findings import Finding
from runtime_probe.runtime import layout
from runtime_probe.trust.check import check_archive

from .fakepkg import ENTRIES, make_package
from .test_manifest import minimal

CUDA_FIXTURE = Path(__file__).resolve().parents[1] / "data" / "cuda_example.pt2"
CODE = "package.kernel_file_missing"
MODEL = layout.model_dir(layout.RELEASE_MODEL)
TWIN = "aoti_guard/twin/"


def _load_line(kernel: str, path: str, tail: str = "0, cubin_dir_") -> str:
    # what cpp_wrapper_gpu.py's generate_load_kernel writes (torch 2.11; 2.13 adds &kernels_.loaded_modules_)
    return f'        kernels_.{kernel} = loadKernel("{path}", "{kernel}", {tail}); \n'


# -- the parser


def test_the_file_form_gives_each_kernel_and_the_file_name_torch_looks_for() -> None:
    text = (
        "    if (kernels_.triton_poi_fused_0 == nullptr) {\n"
        + _load_line("triton_poi_fused_0", "/tmp/torchinductor_u/ab/cabc.cubin")
        + "    }\n"
        + _load_line("triton_per_fused_1", "/tmp/torchinductor_u/cd/cdef.cubin", "128, cubin_dir_, &kernels_.loaded_modules_")
        + _load_line("triton_poi_fused_0", "/tmp/torchinductor_u/ab/cabc.cubin")  # a second call site: read once
    )
    assert parse_wrapper_cpp(text).kernel_loads == [
        KernelLoad("triton_poi_fused_0", "cabc.cubin"),
        KernelLoad("triton_per_fused_1", "cdef.cubin"),
    ]


def test_the_embedded_and_lazy_forms_and_the_definition_name_no_file() -> None:
    text = (
        "static inline CUfunction loadKernel(\n        std::string filePath,\n        const std::string &funcName,\n"
        "static inline CUfunction loadKernel(const void* start, const std::string &funcName, uint32_t sharedMemBytes) {\n"
        '        kernels_.k0 = loadKernel(__k0_start, "k0", 0, &kernels_.loaded_modules_); \n'
        "        k1 = loadKernel(\n            k1_result.cubin_path,\n            k1_result.mangled_name,\n"
    )
    assert parse_wrapper_cpp(text).kernel_loads == []


def test_a_blanked_path_names_a_file_of_underscores() -> None:
    blanked = "/" + "_" * 134  # what scripts/gpu/sanitize_fixture.py made of the build path
    assert parse_wrapper_cpp(_load_line("triton_poi_fused_1", blanked)).kernel_loads == [KernelLoad("triton_poi_fused_1", "_" * 134)]


def test_literals_are_read_as_torch_escapes_them() -> None:
    # cpp_string_literal escapes a backslash and a quote; std::filesystem's filename() of a path
    # ending in "/" is empty, which no file in the folder can be
    text = _load_line("k", r"/b\\d/x\"y.cubin") + _load_line("k2", "/tmp/dir/")
    assert parse_wrapper_cpp(text).kernel_loads == [KernelLoad("k", 'x"y.cubin'), KernelLoad("k2", "")]


# -- the check, on small packages


def _wrapper(*loads: tuple[str, str]) -> bytes:
    return ("// generated\n" + "".join(_load_line(k, p) for k, p in loads)).encode()


def _package(tmp_path: Path, files: dict[str, bytes], **kw: Any) -> Path:
    return make_package(tmp_path / "p.pt2", entries={**ENTRIES, **files}, **kw)


def _findings(path: Path) -> list[Finding]:
    archive, _ = open_archive(path)
    assert archive is not None
    with archive:
        manifest = check_archive(archive).manifest
        return kernel_file_findings(archive, manifest)


def test_a_package_that_holds_its_kernel_files_passes(tmp_path: Path) -> None:
    wrapper = _wrapper(("k0", "/tmp/build/a0.cubin"), ("k1", "/tmp/build/a1.cubin"))
    pkg = _package(tmp_path, {f"{MODEL}abc.wrapper.cpp": wrapper, f"{MODEL}a0.cubin": b"x", f"{MODEL}a1.cubin": b"x"})
    assert _findings(pkg) == []
    assert not any(p["code"] == CODE for p in inspect_package(str(pkg))["problems"])


def test_a_missing_kernel_file_is_named_with_its_kernel_and_refused_by_the_loader(tmp_path: Path) -> None:
    wrapper = _wrapper(("k0", "/tmp/build/a0.cubin"), ("k1", "/tmp/build/a1.cubin"))
    # a1.cubin renamed after the build; a file of that name in a subfolder is not where torch looks
    pkg = _package(
        tmp_path, {f"{MODEL}abc.wrapper.cpp": wrapper, f"{MODEL}a0.cubin": b"x", f"{MODEL}b1.cubin": b"x", f"{MODEL}sub/a1.cubin": b"x"}
    )
    (finding,) = _findings(pkg)
    assert (finding.code, finding.severity.value, finding.phase) == (CODE, "error", "archive")
    assert "kernel k1 looks for 'a1.cubin'" in finding.message and "k0" not in finding.message
    assert "CUDA driver error: file not found" in finding.message
    assert finding.found is not None and "a0.cubin, b1.cubin" in finding.found
    assert finding.hint is not None and "lacks files its own generated code opens" in finding.hint
    assert "removed or renamed after the build" in finding.hint and "left the files out" in finding.hint
    assert finding.evidence["missing"] == [{"kernel": "k1", "file": "a1.cubin"}]
    with pytest.raises(PackageRejected) as info:
        runtime_probe.load(pkg)
    assert [f.code for f in info.value.findings] == [CODE]  # type: ignore[attr-defined]
    assert f"{CODE}: model 'model'" in str(info.value) and "k1" in str(info.value)
    assert [p["code"] for p in inspect_package(str(pkg))["problems"]] == [CODE]


def test_the_debug_twins_folder_is_checked_and_only_its_load_refused(tmp_path: Path) -> None:
    twin = {"model_name": "debug_twin", "entry_prefix": TWIN, "nan_asserts": True, "intermediate_value_printer": "3", "weights": "own"}
    files = {
        f"{MODEL}abc.wrapper.cpp": _wrapper(("k0", "/tmp/build/a0.cubin")),
        f"{MODEL}a0.cubin": b"x",
        f"{TWIN}t.wrapper.cpp": _wrapper(("k0", "/tmp/twin/t0.cubin")),
    }
    pkg = _package(tmp_path, files, edit=lambda m: m.update(debug_twin=twin))
    (finding,) = _findings(pkg)
    assert finding.evidence["model"] == "debug_twin" and finding.evidence["folder"] == TWIN
    with pytest.raises(PackageRejected, match=CODE):
        runtime_probe.load(pkg, model="debug_twin")


# -- tests/data/cuda_example.pt2, whose kernel paths were blanked


def _as_built(dst: Path) -> Path:
    """The fixture as a build writes it: each kernel's path names one of its cubins (the static
    check reads the wrapper.cpp; the .so is left as it is), the manifest's hashes recomputed."""
    with zipfile.ZipFile(CUDA_FIXTURE) as zin:
        infos = zin.infolist()
        entries = {i.filename: zin.read(i) for i in infos}
    cubins = sorted(name.rsplit("/", 1)[1] for name in entries if name.endswith(".cubin"))
    for name in [n for n in entries if n.endswith(".wrapper.cpp")]:
        text = entries[name].decode()
        for cubin in cubins:
            text = re.sub(r'loadKernel\("/_+"', f'loadKernel("/tmp/torchinductor_u/xy/{cubin}"', text, count=1)
        entries[name] = text.encode()
    manifest_name = next(n for n in entries if n.endswith(layout.MANIFEST))
    manifest = json.loads(entries[manifest_name])
    manifest["hashes"] = {n.split("/", 1)[1]: hashlib.sha256(d).hexdigest() for n, d in entries.items() if n != manifest_name}
    entries[manifest_name] = json.dumps(manifest, indent=1).encode()
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in infos:
            zout.writestr(zipfile.ZipInfo(info.filename, date_time=(1980, 1, 1, 0, 0, 0)), entries[info.filename])
    return dst


def test_the_cuda_fixture_is_refused_by_the_loader_naming_its_kernels() -> None:
    with pytest.raises(PackageRejected) as info:
        runtime_probe.load(CUDA_FIXTURE)
    (finding,) = info.value.findings  # type: ignore[attr-defined]
    assert finding.code == CODE
    assert {"kernel": "triton_poi_fused_1", "file": "_" * 134} in finding.evidence["missing"]
    assert "triton_poi_fused_1" in str(info.value) and "_" * 134 in str(info.value)


def test_the_cuda_fixture_as_built_holds_its_kernel_files(tmp_path: Path) -> None:
    built = _as_built(tmp_path / "built.pt2")
    assert _findings(built) == []
    report = probe_run.probe(built, ProbeOptions(verify_only=True))
    assert report.exit_code == 0, [f.to_dict() for p in report.phases for f in p.findings]
    assert probe_run.probe(CUDA_FIXTURE, ProbeOptions(verify_only=True)).exit_code == 1


def test_the_probe_on_a_cpu_host_names_the_missing_file_and_what_the_host_lacks() -> None:
    report = probe_run.probe(CUDA_FIXTURE)
    phases = {p.name: p for p in report.phases}
    (finding,) = [f for f in phases["archive"].findings if f.code == CODE]
    assert "triton_poi_fused_1" in finding.message
    assert "env.device_unavailable" in [f.code for f in phases["host"].findings]
    assert phases["load"].status == "skipped" and report.exit_code == 1


def test_a_package_that_cannot_run_is_never_loaded_where_the_host_could(tmp_path: Path) -> None:
    """The fake package's host needs pass on this host: without the archive phase's reason, its
    load phase would open the .so (a few random bytes)."""
    pkg = _package(tmp_path, {f"{MODEL}abc.wrapper.cpp": _wrapper(("k0", "/tmp/build/a0.cubin"))}, edit=_cpu_host)
    report = probe_run.probe(pkg)
    phases = {p.name: p for p in report.phases}
    assert [f.code for f in phases["archive"].findings] == [CODE]
    assert phases["host"].status == "passed", [f.to_dict() for f in phases["host"].findings]
    for name in ("load", "constants", "golden"):
        assert phases[name].status == "skipped" and CODE in phases[name].detail["reason"], phases[name]


def _cpu_host(m: dict[str, Any]) -> None:
    m["toolchain"] = {**minimal()["toolchain"], "torch": _torch_version()}


def _torch_version() -> str:
    import torch

    return str(torch.__version__)

"""``aoti-guard inspect``: what a package holds, read without opening any native code.

Works on plain AOTI packages too: it shows what the archive itself says (models, AOTI metadata,
kernels and their archs, the .so's library needs, the constants named in the generated source) and
lists what is missing without a manifest.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from runtime_probe.formats import elf as _elf
from runtime_probe.formats.wrapper_cpp import parse_wrapper_cpp
from runtime_probe.package.archive import READ_ERRORS, Archive, file_digest, open_archive, open_package_file
from runtime_probe.package.kernel_files import kernel_file_findings
from runtime_probe.package.manifest import MAX_MANIFEST_BYTES, Manifest, ManifestError, manifest_to_dict, parse_manifest
from runtime_probe.package.manifest_rules import check_manifest
from runtime_probe.reporting.errors import UsageError
from runtime_probe.reporting.report import clean
from runtime_probe.runtime import layout
from runtime_probe.trust.signature import SignatureFormatError, read_signature

__all__ = ["emit_inspection", "inspect_package", "main", "render_inspection"]

# The inspect JSON's own version (runtime_probe/schemas/inspect.schema.json), MAJOR.MINOR as reports.
INSPECT_SCHEMA_VERSION = "1.0"

WITHOUT_MANIFEST = [
    "input/output names and dynamic ranges (AOTI numbers inputs by position only)",
    "golden samples and tolerances",
    "entry hashes (tampering cannot be detected)",
    "toolchain record (torch version, compiler)",
    "a debug twin",
]


def inspect_package(path: str) -> dict[str, Any]:
    """What the package at ``path`` holds, as the inspect JSON. The file is opened once: its size
    and sha256 are those of the bytes parsed, even while a writer replaces the path.

    Raises:
        UsageError: the path is missing, unreadable or not a regular file.
    """
    with open_package_file(path) as fh:
        try:
            size, digest = file_digest(fh)
        except OSError as exc:
            raise UsageError(f"cannot read {path}: {exc.strerror or exc}", hint="copy the package to a healthy disk") from None
        archive, findings = open_archive(path, fh=fh)
        data: dict[str, Any] = {
            "schema_version": INSPECT_SCHEMA_VERSION,
            "kind": "inspect",
            "path": os.path.abspath(path),
            "bytes": size,
            "sha256": digest,
            "problems": [f.to_dict() for f in findings],
        }
        if archive is not None:
            with archive:
                _inspect_archive(archive, data)
    return data


def _inspect_archive(archive: Archive, data: dict[str, Any]) -> None:
    """The archive's part of the inspection: entries, models, manifest, signature."""
    data["root"] = archive.root
    data["entries"] = [{"name": e.rel, "bytes": e.size} for e in sorted(archive.entries.values(), key=lambda e: e.rel)]
    data["models"] = {name: _model(archive, layout.model_dir(name)) for name in archive.models()}
    manifest: Manifest | None = None
    if archive.has(layout.MANIFEST):
        try:
            manifest = parse_manifest(archive.read(layout.MANIFEST, max_bytes=MAX_MANIFEST_BYTES))
        except ManifestError as exc:
            data["problems"].append({"code": exc.code, "message": str(exc)})
        except READ_ERRORS as exc:
            data["problems"].append({"code": "manifest.invalid", "message": f"the manifest cannot be read: {str(exc)[:300]}"})
        else:
            data["problems"] += [f.to_dict() for f in check_manifest(manifest, archive)]
            data["manifest"] = manifest_to_dict(manifest)
            twin = manifest.twin
            if twin is not None:
                data["debug_twin"] = {
                    **_model(archive, twin.entry_prefix),
                    "model_name": twin.model_name,
                    "stored_under": twin.entry_prefix,
                    "weights": twin.weights,
                }
    else:
        data["missing"] = WITHOUT_MANIFEST
    data["problems"] += [f.to_dict() for f in kernel_file_findings(archive, manifest)]
    data["signed"] = archive.has(layout.SIGNATURE)
    if data["signed"]:
        try:
            entry = read_signature(archive)
            data["signature"] = {"algorithm": entry.algorithm[:40], "key_id": entry.key_id[:80]}
        except (SignatureFormatError, *READ_ERRORS) as exc:
            data["problems"].append(
                {"code": "archive.signature_invalid", "message": f"the signature entry cannot be used: {str(exc)[:200]}"}
            )


def _model(archive: Any, prefix: str) -> dict[str, Any]:
    out: dict[str, Any] = {"files": [], "kernels": []}
    for e in archive.under(prefix):
        out["files"].append(e.rel[len(prefix) :])
        try:
            if e.rel.endswith("_metadata.json") and "metadata" not in out:
                meta = json.loads(archive.read(e.rel, max_bytes=1 << 20))
                if not isinstance(meta, dict):
                    raise ValueError("the AOTI metadata is not a JSON object")
                out["metadata"] = {str(k): str(v)[:500] for k, v in meta.items()}
            elif e.rel.endswith(".wrapper.cpp"):
                facts = parse_wrapper_cpp(archive.read(e.rel, max_bytes=256 << 20).decode("utf-8", "replace"))
                out["constants"] = [
                    {
                        "fqn": c.original_fqn,
                        "internal": c.name,
                        "dtype": c.dtype,
                        "shape": list(c.shape) if c.shape else None,
                        "folded": c.from_folded,
                    }
                    for c in facts.constants
                ]
                out["compile"] = {"compiler": facts.compiler, "march": facts.march, "isa_flags": list(facts.isa_flags)}
            elif e.rel.endswith(".so"):
                info = _elf.parse_elf(archive.view(e.rel))
                names = [v for vs in info.version_needs.values() for v in vs]
                out["so"] = {
                    "file": e.rel[len(prefix) :],
                    "bytes": e.size,
                    "needed": list(info.needed),
                    "glibcxx": _elf.max_version(names, "GLIBCXX"),
                    "cxxabi": _elf.max_version(names, "CXXABI"),
                    "glibc": _elf.max_version(names, "GLIBC"),
                }
            elif e.rel.endswith(".cubin"):
                out["kernels"].append({"file": e.rel[len(prefix) :], "arch": _elf.cubin_arch(archive.view(e.rel))})
            elif e.rel.endswith(".fatbin"):
                out["kernels"].append(
                    {"file": e.rel[len(prefix) :], "images": [f"{k}:{a}" for k, a in _elf.fatbin_entries(archive.view(e.rel))]}
                )
        except (*READ_ERRORS, _elf.ElfError, RecursionError) as exc:
            out.setdefault("unreadable", []).append(f"{e.rel}: {str(exc)[:300]}")
    return out


def render_inspection(data: dict[str, Any]) -> str:
    lines = [f"package  {data['path']}", f"size     {data['bytes']:,} bytes   sha256 {data['sha256']}"]
    for p in data.get("problems", []):
        lines.append(f"PROBLEM  {p.get('code')}: {p.get('message')}")
    if "root" not in data:
        return "\n".join(clean(line) for line in lines) + "\n"
    m = data.get("manifest")
    if m:
        lines.append(f"manifest schema {m['schema_version']}, built {m['created']} by {m['tool'].get('name')} {m['tool'].get('version')}")
        lines += _io_lines(m["io"])
        lines += _build_lines(m, data)
    else:
        lines.append("manifest none: a plain AOTI package. Missing:")
        lines += [f"  - {item}" for item in data.get("missing", [])]
    for name, model in data.get("models", {}).items():
        lines += _model_lines(name, model)
    lines.append("entries:")
    for e in data.get("entries", []):
        lines.append(f"  {e['bytes']:>12,}  {e['name']}")
    return "\n".join(clean(line) for line in lines) + "\n"


def _io_lines(io: dict[str, Any]) -> list[str]:
    """The manifest's contract: inputs, outputs, symbols and export's shape guards."""
    lines = ["inputs:"]
    for i in io["inputs"]:
        t = i.get("tensor")
        if t:
            shape = ", ".join(
                str(d) if isinstance(d, int) else f"{d['expr']}[{d['min']}..{'' if d['max'] is None else d['max']}]" for d in t["shape"]
            )
            # the guarded loader refuses an integer input outside the range the build recorded
            # (an index into a table): a caller needs to know it as much as the dtype
            vr = t.get("value_range")
            values = "" if vr is None else f"  values in [{vr[0]}, {vr[1]}]"
            lines.append(
                f"  {i['name']:<16} {t['dtype']:<9} ({shape})  {t['device']}"
                f"{'' if t['contiguous'] else '  non-contiguous ' + str(t['stride'])}{values}"
            )
        else:
            lines.append(f"  {i['name']:<16} constant {i['value']!r} (specialized at export)")
    lines.append("outputs:")
    for o in io["outputs"]:
        t = o.get("tensor")
        if t:
            shape = ", ".join(str(d) if isinstance(d, int) else d["expr"] for d in t["shape"])
            lines.append(f"  {o['name']:<16} {t['dtype']:<9} ({shape})")
    for s in io["symbols"]:
        # a symbol no input dimension equals (``_seq`` of ids:1=8*_seq): no source to list
        carriers = f"  ({', '.join(s['sources'])})" if s["sources"] else "  (in derived sizes only: no input dimension equals it)"
        lines.append(f"symbol   {s['name']} in [{s['min']}, {'inf' if s['max'] is None else s['max']}]{carriers}")
    for g in io.get("guards") or []:  # export's shape guards (since 1.4): the guarded loader enforces them
        checked = f"checked at load as {g['expr']}" if g.get("expr") else "cannot be checked"
        lines.append(f"guard    {g['words']}  ({checked}; torch: {g['text']})")
    return lines


def _build_lines(m: dict[str, Any], data: dict[str, Any]) -> list[str]:
    """The manifest's build: target, toolchain, constants, golden samples, twin, hashes."""
    tg, tc = m["target"], m["toolchain"]
    lines = [
        f"target   {tg['device_type']} {tg.get('device_name') or ''} cc={tg.get('compute_capability') or '-'} kernels={','.join(tg['kernel_archs']) or '-'} {tg['platform']}/{tg['machine']}",
        f"cpu isa  -march={tg.get('march')}: {' '.join(tg['cpu_isa']) or '-'}",
        f"toolchain torch {tc['torch']} python {tc['python']} triton {tc.get('triton') or '-'} cuda {tc.get('cuda_runtime') or '-'} driver {tc.get('driver') or '-'}",
        f"          {tc.get('cxx_version') or tc.get('cxx')}; needs {tc.get('glibcxx_required')}, {tc.get('cxxabi_required')}, {tc.get('glibc_required')}",
    ]
    consts = m["constants"]
    pkg = [c for c in consts if c["storage"] == "package"]
    lines.append(f"constants {len(consts)} ({len(pkg)} runtime, {len(consts) - len(pkg)} inlined), {sum(c['nbytes'] for c in pkg):,} bytes")
    g = m.get("golden")
    if g:
        lines.append(
            f"golden   {len(g['samples'])} sample(s) ({', '.join(s['id'] for s in g['samples'])}), {g['nbytes']:,} bytes; "
            + (f"compact (over the cap): {', '.join(c['id'] for c in g['compact_samples'])}; " if g.get("compact_samples") else "")
            + "tolerances "
            + ", ".join(f"{t['output']}: atol {t['atol']:g} rtol {t['rtol']:g}" for t in g["tolerances"])
        )
    tw = m.get("debug_twin_without_weights") or m.get("debug_twin")
    weights = "the release model's weights, loaded at run time" if tw and tw.get("weights") == "release" else "its own weights"
    lines.append(
        f"twin     {'model ' + tw['model_name'] + ' under ' + tw['entry_prefix'] + ' (nan asserts, printer level ' + tw['intermediate_value_printer'] + '; ' + weights + ')' if tw else 'none'}"
    )
    signer = (data.get("signature") or {}).get("key_id")
    lines.append(f"hashes   {len(m['hashes'])} entries; signed: {'by ' + signer if signer else 'yes' if data.get('signed') else 'no'}")
    return lines


def _model_lines(name: str, model: dict[str, Any]) -> list[str]:
    """One AOTI model of the archive: its metadata, .so, kernels and runtime constants."""
    meta = model.get("metadata", {})
    lines = [
        f"model {name!r}: {len(model['files'])} files; device {meta.get('AOTI_DEVICE_KEY', '?')}, cpu isa {meta.get('AOTI_CPU_ISA') or '-'}, cc {meta.get('AOTI_COMPUTE_CAPABILITY') or '-'}"
    ]
    so = model.get("so")
    if so:
        lines.append(f"  .so {so['file']} ({so['bytes']:,} bytes) needs {so['glibcxx']}, {so['glibc']}; libs {', '.join(so['needed'])}")
    for k in model.get("kernels", []):
        lines.append(f"  kernel {k['file']}: {k.get('arch') or ', '.join(k.get('images', [])) or 'arch unknown'}")
    if "constants" in model:
        lines.append(
            f"  runtime constants: {', '.join(c['fqn'] for c in model['constants'][:8])}{' ...' if len(model['constants']) > 8 else ''}"
        )
    return lines


def emit_inspection(path: str, json_path: str | None = None) -> int:
    """Inspect ``path``; write the JSON to ``json_path`` ('-': stdout) and the text to stdout (to
    stderr when the JSON takes stdout). Returns the exit code: 0, or 1 when ``problems`` is not
    empty. Raises UsageError (exit 2) for a missing package or a --json path that would destroy it."""
    from runtime_probe.reporting.output import check_report_path, is_stdout, write_output
    from runtime_probe.reporting.paths import Paths, Read, Write

    if not os.path.isfile(path):
        what = "no such file" if not os.path.exists(path) else "not a regular file"
        raise UsageError(f"{path}: {what}", hint="give the .pt2 package to inspect")
    if json_path:
        Paths((Read("the package being inspected", path),), (Write("--json", json_path),)).check()
        check_report_path(json_path, "--json")
    data = inspect_package(path)
    if json_path:
        write_output(json_path, (json.dumps(data, indent=2) + "\n").encode())
    stream = sys.stderr if is_stdout(json_path) else sys.stdout
    stream.write(render_inspection(data))
    stream.flush()
    return 0 if not data.get("problems") else 1


def main(argv: Sequence[str] | None = None) -> int:
    """``runtime-probe inspect PKG [--json PATH|-]`` and ``python -m runtime_probe.inspect PKG``."""
    from runtime_probe.reporting.errors import GuardError

    parser = argparse.ArgumentParser(
        prog="runtime-probe inspect",
        description="Show what a .pt2 package holds (manifest, models, kernels, constants) without opening native code.",
        epilog="exit codes: 0 read without problems, 1 the package has problems, 2 usage error",
    )
    parser.add_argument("package", metavar="PKG", help="the .pt2 package")
    parser.add_argument("--json", metavar="PATH", help="write the inspection as JSON here ('-' = stdout)")
    values = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        return emit_inspection(values.package, values.json)
    except GuardError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())

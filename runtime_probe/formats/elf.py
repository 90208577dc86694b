"""Standard-library reader for the ELF facts aoti-guard checks before a load.

DT_NEEDED/DT_SONAME, the symbol versions an object needs (.gnu.version_r) or
provides (.gnu.version_d), and the SM architecture of cubins and fatbin
entries.  Input is hostile: malformed data raises ElfError; all walks are bounded.

CUDA e_flags, verified with nvcc/ptxas 13.0 (V13.0.88) and ptxas 12.9 (V12.9.86)
against cuobjdump/nvdisasm 13.5 (see tests/unit/data/elf/make_cubins.sh):

* EI_ABIVERSION 7 (EI_OSABI 51; ptxas 12.x, sm < 100): SM in bits 0-7, "a" is
  EF_CUDA_ACCELERATORS 0x800.  sm_90 -> 0x005a055a, sm_90a -> 0x005a0d5a.
* EI_ABIVERSION 8 (EI_OSABI 0x41, not LLVM's decimal 41): SM in bits 8-15.
  ptxas 12.9 emits it for sm >= 100 with "a" as 0x8 (sm_100a -> 0x0600640a).
  CUDA 13.0 emits it for every SM (sm_80 -> 0x06005004, sm_90 -> 0x06005a04)
  and never sets 0x8: "a" is only the .nv.compat (type 0x70000086) record
  {fmt=2, attr=0x09, value=1}, so its sm_90 and sm_90a cubins share e_flags.
  cuobjdump trusts that record when present (patching it flips the answer,
  patching e_flags does not), else the e_flags bit; cuda_arch() does the same.
* "f" targets (sm_100f) leave no trace in a cubin; cuobjdump says sm_100, so do we.

Fatbin (magic 0xBA55ED50) entries, nvcc 13.0: u16 kind (1 PTX, 2 ELF, 8 LTO-IR)
@0, u32 header size @4, u64 payload size @8, u32 SM @28, u64 flags @40 (0x100000
"a", 0x200000 "f", 0x8000 zstd).  Like cuobjdump, an ELF entry is named from the
cubin inside when it is stored uncompressed.
"""

from __future__ import annotations

import mmap
import os
import re
import stat
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple, TypeAlias

__all__ = [
    "ElfError", "ElfInfo", "cubin_arch", "cuda_arch", "fatbin_entries",
    "max_version", "parse_elf", "parse_elf_file", "version_key",
]  # fmt: skip

EM_CUDA = 190
_CUDA_ABI_V2 = 8
_EF_CUDA_ACCEL_V1, _EF_CUDA_ACCEL_V2 = 0x800, 0x8
_SHT_CUDA_COMPAT, _COMPAT_ARCH_SPECIFIC = 0x70000086, 0x09
_SHT_STRTAB, _SHT_DYNAMIC, _SHT_NOBITS = 3, 6, 8
_SHT_GNU_VERDEF, _SHT_GNU_VERNEED = 0x6FFFFFFD, 0x6FFFFFFE
_PT_LOAD, _PT_DYNAMIC = 1, 2
_DT_NULL, _DT_NEEDED, _DT_STRTAB, _DT_STRSZ, _DT_SONAME = 0, 1, 5, 10, 14
_DT_VERDEF, _DT_VERNEED = 0x6FFFFFFC, 0x6FFFFFFE
_VER_FLG_BASE = 0x1

# Far above any real library (libtorch_cpu.so: ~40 sections, ~50 dynamic
# tags, ~60 version records) yet small enough that hostile counts fail fast.
_MAX_SECTIONS = 1 << 20
_MAX_RECORDS = 1 << 16
_MAX_NAME = 4096

_FATBIN_MAGIC = 0xBA55ED50
_FATBIN_KINDS = {1: "ptx", 2: "sass", 8: "ltoir"}
_FATBIN_ARCH_SPECIFIC, _FATBIN_FAMILY_SPECIFIC = 0x100000, 0x200000

_Buf: TypeAlias = "bytes | bytearray | memoryview | mmap.mmap"
_Region: TypeAlias = "tuple[int, int]"  # (file offset, size)


class ElfError(ValueError):
    """The input is not a well-formed ELF object (or fatbin)."""


@dataclass(frozen=True)
class ElfInfo:
    elf_class: int
    little_endian: bool
    machine: int
    flags: int
    abi_version: int
    soname: str | None
    needed: tuple[str, ...]
    version_needs: dict[str, tuple[str, ...]] = field(hash=False)
    version_defs: tuple[str, ...]
    # The .nv.compat "sm_XXa" record of a cubin (module docstring); None when
    # absent, and then cuda_arch() falls back to the e_flags bit.
    cuda_arch_specific: bool | None = None


class _Section(NamedTuple):
    type: int
    offset: int
    size: int
    link: int
    info: int


class _Segment(NamedTuple):
    type: int
    offset: int
    vaddr: int
    filesz: int


class _Reader:
    def __init__(self, buf: _Buf, little: bool) -> None:
        self.buf, self.size, self.endian = buf, len(buf), "<" if little else ">"

    def check(self, off: int, length: int, what: str) -> None:
        if off < 0 or length < 0 or off + length > self.size:
            where = f"offset {off:#x} (+{length:#x} bytes)"
            raise ElfError(f"{what} at {where} is outside the {self.size}-byte input")

    def unpack(self, fmt: str, off: int, what: str) -> tuple[int, ...]:
        fmt = self.endian + fmt
        self.check(off, struct.calcsize(fmt), what)
        return struct.unpack_from(fmt, self.buf, off)

    def cstr(self, table: _Region, index: int, what: str) -> str:
        start, size = table
        if index >= size:
            raise ElfError(f"{what}: string index {index:#x} past table size {size:#x}")
        chunk = bytes(self.buf[start + index : start + min(size, index + _MAX_NAME + 1)])
        nul = chunk.find(b"\0")
        if nul < 0:
            raise ElfError(f"{what}: string at index {index:#x} is unterminated or too long")
        return chunk[:nul].decode("utf-8", "replace")


def _as_buffer(data: bytes | bytearray | memoryview) -> bytes | bytearray | memoryview:
    if isinstance(data, memoryview):
        if not data.c_contiguous:
            return data.tobytes()
        return data if data.format == "B" and data.ndim == 1 else data.cast("B")
    if isinstance(data, (bytes, bytearray)):
        return data
    raise TypeError(f"expected bytes, bytearray or memoryview, not {type(data).__name__}")


def parse_elf(data: bytes | bytearray | memoryview) -> ElfInfo:
    """Parse the ELF header, dynamic table and GNU version sections of *data*."""
    return _parse(_as_buffer(data))


def parse_elf_file(path: str | os.PathLike[str], max_bytes: int = 2 * 1024**3) -> ElfInfo:
    """:func:`parse_elf` on a file of at most *max_bytes*; I/O errors stay OSError."""
    with open(path, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size == 0:
            data = fh.read(max_bytes + 1)  # pipes and /proc files report size 0
            if len(data) > max_bytes:
                raise ElfError(f"{os.fspath(path)!r} is over the {max_bytes}-byte limit")
            return _parse(data)
        if st.st_size > max_bytes:
            raise ElfError(f"{os.fspath(path)!r} has {st.st_size} bytes, over {max_bytes}")
        # _parse never holds a memoryview of the map, so closing it cannot fail.
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            return _parse(mm)


def _parse(buf: _Buf) -> ElfInfo:
    if len(buf) < 16 or bytes(buf[:4]) != b"\x7fELF":
        raise ElfError("not an ELF file (bad magic or shorter than e_ident)")
    ei_class, ei_data, abi_version = buf[4], buf[5], buf[8]
    if ei_class not in (1, 2) or ei_data not in (1, 2):
        raise ElfError(f"bad EI_CLASS {ei_class} or EI_DATA {ei_data}")
    is64 = ei_class == 2
    r = _Reader(buf, ei_data == 1)
    hdr = r.unpack("HHIQQQIHHHHHH" if is64 else "HHIIIIIHHHHHH", 16, "ELF header")
    machine, phoff, shoff, flags = hdr[1], hdr[4], hdr[5], hdr[6]
    phentsize, phnum, shentsize, shnum, shstrndx = hdr[8:13]

    sections = _read_sections(r, is64, shoff, shentsize, shnum, shstrndx)
    if phnum == 0xFFFF and sections:  # PN_XNUM: the real count is in sh_info[0]
        phnum = sections[0].info
    segments = _read_segments(r, is64, phoff, phentsize, phnum)
    soname, needed, needs, defs = _dynamic_info(r, is64, sections, segments)
    arch_specific = None
    if machine == EM_CUDA:
        found = (_compat_arch_specific(r, s) for s in sections if s.type == _SHT_CUDA_COMPAT)
        arch_specific = next((v for v in found if v is not None), None)
    return ElfInfo(
        64 if is64 else 32, ei_data == 1, machine, flags, abi_version,
        soname, needed, needs, defs, arch_specific,
    )  # fmt: skip


class _Span(NamedTuple):
    """Where a header table lies: its offset, its entry size and its entry count."""

    off: int
    entsize: int
    entries: int


def _table(r: _Reader, what: str, span: _Span, fmt: str, cap: int) -> list[tuple[int, ...]]:
    off, entsize, count = span
    if entsize < struct.calcsize(r.endian + fmt):
        raise ElfError(f"{what} entry size {entsize} is too small")
    if count > cap:
        raise ElfError(f"implausible {what} count {count}")
    r.check(off, count * entsize, f"{what} table ({count} entries)")
    return [r.unpack(fmt, off + i * entsize, f"{what} {i}") for i in range(count)]


def _read_sections(r: _Reader, is64: bool, shoff: int, entsize: int, count: int, shstrndx: int) -> list[_Section]:
    if shoff == 0:
        return []
    fmt = "IIQQQQIIQQ" if is64 else "IIIIIIIIII"
    first = _table(r, "section header", _Span(shoff, entsize, 1), fmt, 1)[0]
    if count == 0:  # extended numbering: the real count is sh_size[0]
        count = first[5]
    if shstrndx == 0xFFFF:  # SHN_XINDEX: the real index is sh_link[0]
        shstrndx = first[6]
    rows = _table(r, "section header", _Span(shoff, entsize, count), fmt, _MAX_SECTIONS)
    if count and shstrndx >= count:
        raise ElfError(f"e_shstrndx {shstrndx} out of range ({count} sections)")
    sections = [_Section(f[1], f[4], f[5], f[6], f[7]) for f in rows]
    # Checking every section, not just those we read, makes a truncated file
    # fail here instead of parsing "successfully" with data missing.
    for i, s in enumerate(sections):
        if s.type not in (0, _SHT_NOBITS):
            r.check(s.offset, s.size, f"section {i} (type {s.type:#x}) data")
    return sections


def _read_segments(r: _Reader, is64: bool, phoff: int, entsize: int, count: int) -> list[_Segment]:
    if phoff == 0 or count == 0:
        return []
    fmt = "IIQQQQQQ" if is64 else "IIIIIIII"
    rows = _table(r, "program header", _Span(phoff, entsize, count), fmt, _MAX_RECORDS)
    t, o, v, z = (0, 2, 3, 5) if is64 else (0, 1, 2, 4)  # p_type/offset/vaddr/filesz
    segments = [_Segment(f[t], f[o], f[v], f[z]) for f in rows]
    for i, p in enumerate(segments):
        r.check(p.offset, p.filesz, f"segment {i} (type {p.type:#x}) data")
    return segments


def _vaddr_region(segments: list[_Segment], addr: int, what: str) -> _Region:
    """File offset and bytes available behind virtual address *addr*."""
    for seg in segments:
        if seg.type == _PT_LOAD and seg.vaddr <= addr < seg.vaddr + seg.filesz:
            return seg.offset + addr - seg.vaddr, seg.vaddr + seg.filesz - addr
    raise ElfError(f"{what} address {addr:#x} is not backed by any PT_LOAD segment")


def _dynamic_info(
    r: _Reader, is64: bool, sections: list[_Section], segments: list[_Segment]
) -> tuple[str | None, tuple[str, ...], dict[str, tuple[str, ...]], tuple[str, ...]]:
    def linked_strtab(s: _Section, what: str) -> _Region:
        if not 0 < s.link < len(sections) or sections[s.link].type != _SHT_STRTAB:
            raise ElfError(f"{what} sh_link {s.link} is not a string table")
        return sections[s.link].offset, sections[s.link].size

    # Section headers first; files without them fall back to PT_DYNAMIC.
    dyn_sec = next((s for s in sections if s.type == _SHT_DYNAMIC), None)
    dyn_seg = next((p for p in segments if p.type == _PT_DYNAMIC), None)
    strtab: _Region | None = None
    if dyn_sec is not None:
        region = (dyn_sec.offset, dyn_sec.size)
        strtab = linked_strtab(dyn_sec, ".dynamic")
    elif dyn_seg is not None:
        region = (dyn_seg.offset, dyn_seg.filesz)
    else:
        return None, (), {}, ()

    tags: dict[int, int] = {}
    needed_idx: list[int] = []
    entsize = 16 if is64 else 8
    for i in range(region[1] // entsize):
        if i >= _MAX_RECORDS:
            raise ElfError("dynamic table has no DT_NULL within a plausible size")
        tag, val = r.unpack("qQ" if is64 else "iI", region[0] + i * entsize, "dynamic entry")
        if tag == _DT_NULL:
            break
        if tag == _DT_NEEDED:
            needed_idx.append(val)
        else:
            tags.setdefault(tag, val)

    if strtab is None and (needed_idx or tags.keys() & {_DT_SONAME, _DT_VERNEED, _DT_VERDEF}):
        if _DT_STRTAB not in tags:
            raise ElfError("dynamic segment has names but no DT_STRTAB")
        off, avail = _vaddr_region(segments, tags[_DT_STRTAB], "DT_STRTAB")
        strtab = (off, min(avail, tags.get(_DT_STRSZ, avail)))
    needed = tuple(r.cstr(strtab, i, "DT_NEEDED") for i in needed_idx) if strtab else ()
    has_soname = strtab is not None and _DT_SONAME in tags
    soname = r.cstr(strtab, tags[_DT_SONAME], "DT_SONAME") if strtab and has_soname else None

    def versions(sh_type: int, dt: int, what: str) -> tuple[_Region, _Region] | None:
        sec = next((s for s in sections if s.type == sh_type), None)
        if sec is not None:
            return (sec.offset, sec.size), linked_strtab(sec, what)
        if dt in tags and strtab is not None:
            return _vaddr_region(segments, tags[dt], what), strtab
        return None

    vr = versions(_SHT_GNU_VERNEED, _DT_VERNEED, ".gnu.version_r")
    vd = versions(_SHT_GNU_VERDEF, _DT_VERDEF, ".gnu.version_d")
    needs = _walk_verneed(r, *vr) if vr else {}
    return soname, needed, needs, _walk_verdef(r, *vd) if vd else ()


def _chain(r: _Reader, region: _Region, first: int, fmt: str, next_field: int, what: str) -> Iterator[tuple[int, tuple[int, ...]]]:
    """Yield (offset in region, record) along a vn_next-style chain.

    Links are unsigned and must clear the current record, so a chain can neither
    loop nor overlap; a "backward" link lands past the region and fails the check.
    """
    start, size = region
    entsize = struct.calcsize(fmt)
    rel = first
    for _ in range(_MAX_RECORDS):
        if rel + entsize > size:
            raise ElfError(f"{what} record at +{rel:#x} runs past its {size:#x}-byte section")
        rec = r.unpack(fmt, start + rel, what)
        yield rel, rec
        step = rec[next_field]
        if step == 0:
            return
        if step < entsize:
            raise ElfError(f"{what} next offset {step:#x} points back into its own record")
        rel += step
    raise ElfError(f"{what} chain longer than {_MAX_RECORDS} records")


def _walk_verneed(r: _Reader, region: _Region, strtab: _Region) -> dict[str, tuple[str, ...]]:
    out: dict[str, list[str]] = {}
    seen_aux: set[int] = set()
    if region[1] == 0:
        return {}
    # Elf_Verneed (same for ELF32/64): vn_version, vn_cnt, vn_file, vn_aux, vn_next.
    # Like ld.so, follow the vn_next chain rather than trusting sh_info.
    for rel, (version, cnt, file_idx, aux, _) in _chain(r, region, 0, "HHIII", 4, "Verneed"):
        if version != 1:
            raise ElfError(f"unsupported Verneed version {version} at +{rel:#x}")
        names = out.setdefault(r.cstr(strtab, file_idx, "vn_file"), [])
        if not cnt:
            continue
        # Elf_Vernaux: vna_hash, vna_flags, vna_other, vna_name, vna_next
        for arel, rec in _chain(r, region, rel + aux, "IHHII", 4, "Vernaux"):
            # Entries sharing Vernaux records would let a small hostile
            # section cost quadratic work; real files never share them.
            if arel in seen_aux:
                raise ElfError(f"Vernaux record at +{arel:#x} is reached twice")
            seen_aux.add(arel)
            names.append(r.cstr(strtab, rec[3], "vna_name"))
    return {k: tuple(v) for k, v in out.items()}


def _walk_verdef(r: _Reader, region: _Region, strtab: _Region) -> tuple[str, ...]:
    names: list[str] = []
    if region[1] == 0:
        return ()
    # Elf_Verdef: vd_version, vd_flags, vd_ndx, vd_cnt, vd_hash, vd_aux, vd_next
    for rel, rec in _chain(r, region, 0, "HHHHIII", 6, "Verdef"):
        version, vflags, cnt, aux = rec[0], rec[1], rec[3], rec[5]
        if version != 1:
            raise ElfError(f"unsupported Verdef version {version} at +{rel:#x}")
        if cnt and not vflags & _VER_FLG_BASE:  # the BASE entry names the file
            # Only the first Verdaux names the version; later ones are parents.
            if rel + aux + 8 > region[1]:
                raise ElfError(f"Verdaux at +{rel + aux:#x} runs past .gnu.version_d")
            name_idx = r.unpack("I", region[0] + rel + aux, "Verdaux")[0]
            names.append(r.cstr(strtab, name_idx, "vda_name"))
    return tuple(names)


def _compat_arch_specific(r: _Reader, sec: _Section) -> bool | None:
    """The .nv.compat "sm_XXa" record's value, or None if there is none.

    Records look like .nv.info's: u8 format, u8 attribute, 4 bytes in all, or for
    format 4 a u16 length and that many bytes more.  The section is undocumented,
    so an unknown format ends the scan instead of failing the parse.
    """
    data = bytes(r.buf[sec.offset : sec.offset + min(sec.size, 1 << 16)])
    pos = 0
    while pos + 4 <= len(data):
        fmt, attr = data[pos], data[pos + 1]
        if fmt == 2 and attr == _COMPAT_ARCH_SPECIFIC:
            return data[pos + 2] != 0
        if fmt not in (1, 2, 3, 4):
            return None
        length = struct.unpack_from(r.endian + "H", data, pos + 2)[0] if fmt == 4 else 0
        pos += 4 + length
    return None


_VERSION_RE = re.compile(r"(?:^|_)(\d+(?:\.\d+)*)")
_DOTTED_RE = re.compile(r"\d+(?:\.\d+)*")


def version_key(name: str) -> tuple[int, ...]:
    """Numeric key: "GLIBCXX_3.4.32" -> (3, 4, 32), "CXXABI_TM_1" -> (1,), "GLIBC_PRIVATE" -> ().

    The first dotted-digit run that starts the name or follows "_" counts.
    """
    m = _VERSION_RE.search(name)
    return tuple(int(p) for p in m.group(1).split(".")) if m else ()


def max_version(names: Iterable[str], prefix: str) -> str | None:
    """Highest ``<prefix>_<dotted digits>`` among *names*, or None.

    The rest after ``prefix + "_"`` must be purely numeric, so "GLIBC" skips
    "GLIBCXX_3.4" and "GLIBC_PRIVATE", and "GLIBCXX" skips "GLIBCXX_TUNABLES".
    """
    head = prefix + "_"
    best: tuple[tuple[int, ...], str] | None = None
    for name in names:
        if name.startswith(head) and _DOTTED_RE.fullmatch(name, len(head)):
            cand = (version_key(name[len(head) :]), name)
            best = cand if best is None or cand > best else best
    return best[1] if best else None


def cuda_arch(info: ElfInfo) -> str | None:
    """Architecture of a cubin ("sm_90", "sm_90a", "sm_120"...); None if not EM_CUDA."""
    if info.machine != EM_CUDA:
        return None
    if info.abi_version >= _CUDA_ABI_V2:
        sm, accel = (info.flags >> 8) & 0xFF, bool(info.flags & _EF_CUDA_ACCEL_V2)
    else:
        sm, accel = info.flags & 0xFF, bool(info.flags & _EF_CUDA_ACCEL_V1)
    if sm == 0:
        raise ElfError(f"cubin e_flags {info.flags:#010x} carry no SM number")
    if info.cuda_arch_specific is not None:
        accel = info.cuda_arch_specific
    return f"sm_{sm}{'a' if accel else ''}"


def cubin_arch(data: bytes | bytearray | memoryview) -> str | None:
    """Architecture of a cubin; ElfError if *data* is not a CUDA ELF."""
    info = parse_elf(data)
    arch = cuda_arch(info)
    if arch is None:
        raise ElfError(f"not a cubin: e_machine {info.machine} is not EM_CUDA ({EM_CUDA})")
    return arch


def fatbin_entries(data: bytes | bytearray | memoryview) -> list[tuple[str, str]]:
    """(kind, arch) of each entry of one or more concatenated fatbins.

    kind is "sass", "ptx", "ltoir" or "unknown_<n>"; arch uses cuobjdump's
    names ("sm_90a" for both a cubin and compute_90a PTX).
    """
    r = _Reader(_as_buffer(data), True)
    out: list[tuple[str, str]] = []
    pos = containers = 0
    while pos < r.size:
        if containers >= _MAX_RECORDS:
            raise ElfError("implausibly many fatbin containers")
        pad = 0  # containers in an .nv_fatbin section are 8-byte aligned
        while pos + pad < r.size and pad < 8 and r.buf[pos + pad] == 0:
            pad += 1
        if containers and pos + pad == r.size:
            break
        pos += pad
        magic, version, hsize, fsize = r.unpack("IHHQ", pos, "fatbin header")
        if magic != _FATBIN_MAGIC:
            raise ElfError(f"bad fatbin magic {magic:#010x} at offset {pos:#x}")
        if version != 1 or hsize < 16:
            raise ElfError(f"unsupported fatbin header (version {version}, size {hsize})")
        r.check(pos, hsize + fsize, "fatbin container")
        off, end = pos + hsize, pos + hsize + fsize
        while off < end:
            if len(out) >= _MAX_RECORDS:
                raise ElfError("implausibly many fatbin entries")
            kind, _, ehsize, psize = r.unpack("HHIQ", off, "fatbin entry")
            sm, flags = r.unpack("I8xQ", off + 28, "fatbin entry")
            if ehsize < 64:
                raise ElfError(f"fatbin entry at {off:#x} has a {ehsize}-byte header, under the 64 every kind uses")
            if off + ehsize + psize > end:
                raise ElfError(f"fatbin entry at {off:#x} overruns its container")
            if not 0 < sm < 1000:
                raise ElfError(f"fatbin entry at {off:#x} has implausible SM {sm}")
            name, arch = _FATBIN_KINDS.get(kind, f"unknown_{kind}"), f"sm_{sm}"
            payload = (off + ehsize, off + ehsize + psize)
            if name == "sass" and bytes(r.buf[payload[0] : payload[0] + 4]) == b"\x7fELF":
                inner = cubin_arch(bytes(r.buf[payload[0] : payload[1]]))
                if inner not in (arch, arch + "a"):
                    raise ElfError(f"fatbin entry at {off:#x} says {arch} but holds {inner}")
                arch = str(inner)
            elif flags & _FATBIN_ARCH_SPECIFIC:
                arch += "a"
            elif flags & _FATBIN_FAMILY_SPECIFIC and name != "sass":
                arch += "f"  # an sm_XXf cubin is the plain one (module docstring)
            out.append((name, arch))
            off += ehsize + psize
        pos, containers = end, containers + 1
    if not containers:
        raise ElfError("empty input is not a fatbin")
    return out

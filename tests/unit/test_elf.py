"""Tests for runtime_probe.formats.elf.

CUDA expectations come from cuobjdump 13.5 run on the committed fixtures
(tests/unit/data/elf/make_cubins.sh), including on the byte-patched variants
built here: each patch below was applied to the same file and fed to
cuobjdump when the encoding was verified.
"""

from __future__ import annotations

import array
import contextlib
import importlib.util
import random
import re
import shutil
import struct
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from runtime_probe.formats.elf import (
    ElfError,
    ElfInfo,
    cubin_arch,
    cuda_arch,
    fatbin_entries,
    max_version,
    parse_elf,
    parse_elf_file,
    version_key,
)

DATA = Path(__file__).parent / "data" / "elf"


def fixture(name: str) -> bytes:
    return (DATA / name).read_bytes()


# --------------------------------------------------------------------------
# A synthetic shared object: any class/endianness, with or without section
# headers, so the 32-bit, big-endian and PT_DYNAMIC paths are exercised.

BASE = 0x400000
SHT_STRTAB, SHT_DYNAMIC, SHT_VERDEF, SHT_VERNEED = 3, 6, 0x6FFFFFFD, 0x6FFFFFFE


class Synth:
    """Builds the object and remembers where each part landed."""

    def __init__(
        self,
        *,
        is64: bool = True,
        little: bool = True,
        sections: bool = True,
        soname: str | None = "libsynth.so.1",
        needed: tuple[str, ...] = ("libstdc++.so.6", "libc.so.6"),
        needs: dict[str, tuple[str, ...]] | None = None,
        defs: tuple[str, ...] = ("SYNTH_1.0", "SYNTH_1.1"),
        chain_len: int = 0,
    ) -> None:
        if needs is None:
            needs = {
                "libstdc++.so.6": ("GLIBCXX_3.4", "GLIBCXX_3.4.29", "CXXABI_1.3.13"),
                "libc.so.6": ("GLIBC_2.2.5", "GLIBC_2.34"),
            }
        e = "<" if little else ">"
        self.e, self.is64 = e, is64
        strs = bytearray(b"\0")
        index: dict[str, int] = {}

        def s(name: str) -> int:
            if name not in index:
                index[name] = len(strs)
                strs.extend(name.encode() + b"\0")
            return index[name]

        vr = bytearray()
        files = list(needs.items())
        for i, (lib, versions) in enumerate(files):
            nxt = 16 + 16 * len(versions) if i < len(files) - 1 else 0
            vr += struct.pack(e + "HHIII", 1, len(versions), s(lib), 16, nxt)
            for j, v in enumerate(versions):
                last = j == len(versions) - 1
                vr += struct.pack(e + "IHHII", 0, 0, 2 + j, s(v), 0 if last else 16)
        if chain_len:  # replace .gnu.version_r by a long chain of empty entries
            vr = bytearray()
            libc = s("libc.so.6")
            for i in range(chain_len):
                vr += struct.pack(e + "HHIII", 1, 0, libc, 0, 16 if i < chain_len - 1 else 0)
        vd = bytearray()
        # A BASE entry naming the file, then one entry per version whose second
        # Verdaux names a parent, which must not be reported as provided.
        entries: list[tuple[int, str, str | None]] = [(1, soname or "libsynth.so.1", None)]
        entries += [(0, v, defs[k - 1] if k else None) for k, v in enumerate(defs)]
        for i, (flag, name, parent) in enumerate(entries):
            cnt = 2 if parent else 1
            nxt = 20 + 8 * cnt if i < len(entries) - 1 else 0
            vd += struct.pack(e + "HHHHIII", 1, flag, i + 1, cnt, 0, 20, nxt)
            vd += struct.pack(e + "II", s(name), 8 if parent else 0)
            if parent:
                vd += struct.pack(e + "II", s(parent), 0)
        dyn_items = [(1, s(n)) for n in needed]
        if soname:
            dyn_items.append((14, s(soname)))
        ehsize, phentsize, shentsize = (64, 56, 64) if is64 else (52, 32, 40)
        phoff = ehsize
        self.dynstr_off = phoff + 2 * phentsize
        self.verneed_off = self.dynstr_off + len(strs) + 8  # room for late names
        self.verdef_off = self.verneed_off + len(vr)
        self.dynamic_off = self.verdef_off + len(vd)
        dyn_items += [
            (5, BASE + self.dynstr_off), (10, len(strs) + 8),
            (0x6FFFFFFE, BASE + self.verneed_off), (0x6FFFFFFF, len(files)),
            (0x6FFFFFFC, BASE + self.verdef_off), (0x6FFFFFFD, len(entries)), (0, 0),
        ]  # fmt: skip
        dyn = b"".join(struct.pack(e + ("qQ" if is64 else "iI"), t, v) for t, v in dyn_items)
        shstr = b"\0.dynstr\0.gnu.version_r\0.gnu.version_d\0.dynamic\0.shstrtab\0"
        shstr_off = self.dynamic_off + len(dyn)
        shoff = shstr_off + len(shstr) if sections else 0
        self.shoff = shoff
        size = shoff + 6 * shentsize if sections else shstr_off + len(shstr)
        hdr_fmt = e + ("HHIQQQIHHHHHH" if is64 else "HHIIIIIHHHHHH")
        ident = b"\x7fELF" + bytes([2 if is64 else 1, 1 if little else 2, 1, 0, 0]) + bytes(7)
        header = ident + struct.pack(
            hdr_fmt, 3, 62 if is64 else 3, 1, 0, phoff, shoff, 0,
            ehsize, phentsize, 2, shentsize, 6 if sections else 0, 5 if sections else 0,
        )  # fmt: skip
        ph_fmt = e + ("IIQQQQQQ" if is64 else "IIIIIIII")

        def phdr(p_type: int, off: int, size: int) -> bytes:
            addr = BASE + off
            if is64:
                return struct.pack(ph_fmt, p_type, 4, off, addr, addr, size, size, 8)
            return struct.pack(ph_fmt, p_type, off, addr, addr, size, size, 4, 4)

        out = bytearray(header)
        out += phdr(1, 0, size) + phdr(2, self.dynamic_off, len(dyn))
        out += strs + bytes(8) + vr + vd + dyn + shstr
        if sections:
            sh_fmt = e + ("IIQQQQIIQQ" if is64 else "IIIIIIIIII")
            rows = [
                (0, 0, 0, 0, 0, 0, 0),
                (1, SHT_STRTAB, self.dynstr_off, len(strs) + 8, 0, 0, 0),
                (9, SHT_VERNEED, self.verneed_off, len(vr), 1, len(files), 0),
                (24, SHT_VERDEF, self.verdef_off, len(vd), 1, len(entries), 0),
                (39, SHT_DYNAMIC, self.dynamic_off, len(dyn), 1, 0, 16 if is64 else 8),
                (48, SHT_STRTAB, shstr_off, len(shstr), 0, 0, 0),
            ]
            for name_idx, typ, off, sz, link, info, ent in rows:
                addr = BASE + off
                out += struct.pack(sh_fmt, name_idx, typ, 0, addr, off, sz, link, info, 1, ent)
        assert len(out) == size
        self.data = bytes(out)


CONFIGS = [
    pytest.param(
        is64, little, sections,
        id=f"elf{64 if is64 else 32}-{'le' if little else 'be'}-{'shdr' if sections else 'phdr'}",
    )
    for is64 in (True, False)
    for little in (True, False)
    for sections in (True, False)
]  # fmt: skip


@pytest.mark.parametrize(("is64", "little", "sections"), CONFIGS)
def test_synthetic_roundtrip(is64: bool, little: bool, sections: bool) -> None:
    info = parse_elf(Synth(is64=is64, little=little, sections=sections).data)
    assert info.elf_class == (64 if is64 else 32)
    assert info.little_endian is little
    assert info.machine == (62 if is64 else 3)
    assert info.soname == "libsynth.so.1"
    assert info.needed == ("libstdc++.so.6", "libc.so.6")
    assert info.version_needs == {
        "libstdc++.so.6": ("GLIBCXX_3.4", "GLIBCXX_3.4.29", "CXXABI_1.3.13"),
        "libc.so.6": ("GLIBC_2.2.5", "GLIBC_2.34"),
    }
    assert info.version_defs == ("SYNTH_1.0", "SYNTH_1.1")  # no BASE, no parents
    assert info.cuda_arch_specific is None
    assert cuda_arch(info) is None
    hash(info)  # frozen and hashable despite the dict field


def test_input_types_and_no_dynamic() -> None:
    data = Synth().data
    ref = parse_elf(data)
    assert parse_elf(bytearray(data)) == ref
    assert parse_elf(memoryview(data)) == ref
    assert parse_elf(memoryview(data)[0:]) == ref
    words = array.array("I", data + bytes(-len(data) % 4))
    assert parse_elf(memoryview(words)).needed == ref.needed
    bare = parse_elf(Synth(soname=None, needed=(), needs={}, defs=()).data)
    assert (bare.soname, bare.needed, bare.version_needs) == (None, (), {})
    header_only = bytearray(fixture("cu130_sm_80.cubin")[:64])
    header_only[0x20:0x28] = bytes(8)  # e_phoff
    header_only[0x28:0x30] = bytes(8)  # e_shoff
    assert parse_elf(bytes(header_only)).needed == ()


def test_extended_section_numbering() -> None:
    syn = Synth()
    data = bytearray(syn.data)
    struct.pack_into("<H", data, 0x3C, 0)  # e_shnum = 0 -> count in sh_size[0]
    struct.pack_into("<Q", data, syn.shoff + 32, 6)
    struct.pack_into("<H", data, 0x3E, 0xFFFF)  # SHN_XINDEX -> index in sh_link[0]
    struct.pack_into("<I", data, syn.shoff + 40, 5)
    assert parse_elf(bytes(data)) == parse_elf(syn.data)


# --------------------------------------------------------------------------
# Hostile input


def raises_fast(data: bytes | bytearray, fn: Callable[[bytes], object] = parse_elf) -> ElfError:
    start = time.monotonic()
    with pytest.raises(ElfError) as exc:
        fn(bytes(data))
    assert time.monotonic() - start < 1.0
    assert str(exc.value)
    return exc.value


@pytest.mark.parametrize(
    "name",
    ["synth64", "synth32be", "synth-noshdr", "cu130_sm_90a.cubin", "cu129_sm_90a.cubin"],
)
def test_every_truncation_raises(name: str) -> None:
    makers = {
        "synth64": lambda: Synth().data,
        "synth32be": lambda: Synth(is64=False, little=False).data,
        "synth-noshdr": lambda: Synth(sections=False).data,
    }
    data = makers[name]() if name in makers else fixture(name)
    parse_elf(data)
    for cut in range(len(data)):
        with pytest.raises(ElfError):
            parse_elf(data[:cut])


def test_truncated_real_library_raises() -> None:
    lib = find_libstdcxx()
    data = lib.read_bytes()
    for cut in [0, 3, 15, 16, 40, 63, 64, 1000, len(data) // 2, len(data) - 1]:
        raises_fast(data[:cut])


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x7fEL",
        b"\x7fELF",
        b"MZ" + bytes(100),
        b"\x7fELF\x03\x01\x01" + bytes(100),  # bad class
        b"\x7fELF\x02\x03\x01" + bytes(100),  # bad data encoding
        b"\x7fELF\x02\x01\x01" + bytes(20),  # header cut short
        b"\x7fELF\x02\x01\x01" + b"\xff" * 100,
        b"\x7fELF\x01\x02\x01" + b"\xff" * 100,
    ],
)
def test_garbage_raises(data: bytes) -> None:
    raises_fast(data)


def test_random_garbage_raises() -> None:
    rng = random.Random(1234)
    for _ in range(300):
        body = bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 400)))
        head = b"\x7fELF" + bytes([rng.choice((1, 2)), rng.choice((1, 2))])
        raises_fast(head + body)


@pytest.mark.parametrize("name", ["synth64", "synth32be", "synth-noshdr", "cu130_sm_90a.cubin"])
def test_mutation_fuzz_never_leaks_other_errors(name: str) -> None:
    data = {
        "synth64": Synth().data,
        "synth32be": Synth(is64=False, little=False).data,
        "synth-noshdr": Synth(sections=False).data,
    }.get(name) or fixture(name)
    rng = random.Random(name)
    start = time.monotonic()
    for _ in range(1500):
        mutated = bytearray(data)
        for _ in range(rng.randrange(1, 4)):
            pos = rng.randrange(len(mutated))
            mutated[pos : pos + 4] = rng.choice((b"\xff\xff\xff\xff", b"\0\0\0\0", b"\x10\0\0\0", rng.randbytes(4)))
        try:
            info = parse_elf(bytes(mutated))
        except ElfError:
            continue
        assert isinstance(info, ElfInfo)
        if info.machine == 190:
            with contextlib.suppress(ElfError):
                cuda_arch(info)
    assert time.monotonic() - start < 20


def patched(data: bytes, fmt: str, off: int, value: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, off, value)
    return bytes(out)


@pytest.mark.parametrize(
    ("fmt", "off", "value", "message"),
    [
        ("<Q", 0x28, 1 << 40, "section header"),  # e_shoff far past the end
        ("<Q", 0x28, 0xFFFFFFFFFFFFFFFF, "section header"),
        ("<H", 0x3C, 0xFFFF, "section header table"),  # e_shnum lies
        ("<H", 0x3A, 8, "section header entry size"),
        ("<H", 0x3E, 200, "e_shstrndx"),
        ("<Q", 0x20, 1 << 40, "program header"),  # e_phoff far past the end
        ("<H", 0x38, 0xFFFE, "program header table"),  # e_phnum lies
        ("<H", 0x36, 4, "program header entry size"),
    ],
)
def test_lying_header_fields(fmt: str, off: int, value: int, message: str) -> None:
    assert message in str(raises_fast(patched(Synth().data, fmt, off, value)))


def test_lying_section_offsets() -> None:
    syn = Synth()
    dynamic_hdr = syn.shoff + 4 * 64
    raises_fast(patched(syn.data, "<Q", dynamic_hdr + 24, 1 << 33))  # sh_offset
    raises_fast(patched(syn.data, "<Q", dynamic_hdr + 32, 1 << 33))  # sh_size
    raises_fast(patched(syn.data, "<I", dynamic_hdr + 40, 77))  # sh_link to nowhere
    raises_fast(patched(syn.data, "<I", dynamic_hdr + 40, 4))  # sh_link not a strtab
    dynstr_hdr = syn.shoff + 64
    raises_fast(patched(syn.data, "<Q", dynstr_hdr + 32, 3))  # names past strtab end


def test_lying_dynamic_segment() -> None:
    syn = Synth(sections=False)
    # DT_STRTAB (after 2 DT_NEEDED and DT_SONAME) pointing outside every PT_LOAD
    raises_fast(patched(syn.data, "<Q", syn.dynamic_off + 16 * 3 + 8, 0x10))
    # PT_DYNAMIC p_filesz larger than the file
    raises_fast(patched(syn.data, "<Q", 64 + 56 + 32, 1 << 30))


@pytest.mark.parametrize("sections", [True, False])
@pytest.mark.parametrize(
    ("field_off", "value"),
    [
        (12, 0xFFFFFFF0),  # vn_next = -16: points back at itself / loops
        (12, 0xFFFFFFFF - 0x40 + 1),  # further back
        (12, 4),  # overlaps its own record
        (12, 1 << 20),  # past the section
        (8, 1 << 20),  # vn_aux past the section
        (16 + 12, 0xFFFFFFF0),  # first vna_next loops back
        (16 + 12, 8),  # vna_next overlaps
        (0, 2),  # vn_version
        (4, 0xFFFFFFF),  # vn_file past the string table
    ],
)
def test_hostile_version_r(sections: bool, field_off: int, value: int) -> None:
    syn = Synth(sections=sections)
    fmt = "<H" if field_off in (0,) else "<I"
    raises_fast(patched(syn.data, fmt, syn.verneed_off + field_off, value))


def test_vernaux_shared_between_entries_raises() -> None:
    syn = Synth()
    # Entry 0 (3 Vernaux) has its vn_aux moved onto entry 1's Vernaux chain,
    # which entry 1 then walks again.
    second_aux = 16 + 16 * 3 + 16
    err = raises_fast(patched(syn.data, "<I", syn.verneed_off + 8, second_aux))
    assert "reached twice" in str(err)


@pytest.mark.parametrize("sections", [True, False])
def test_long_version_chains(sections: bool) -> None:
    info = parse_elf(Synth(chain_len=1000, sections=sections).data)
    assert info.version_needs == {"libc.so.6": ()}
    err = raises_fast(Synth(chain_len=70000, sections=sections).data)
    assert "chain longer" in str(err)


@pytest.mark.parametrize(
    ("field_off", "value"),
    # Offsets into the second Verdef (the first, BASE, is 20 + 8 bytes long).
    [(16, 0xFFFFFFEC), (16, 4), (16, 1 << 20), (0, 7), (12, 1 << 20), (12, 0xFFFFFFF8)],
)
def test_hostile_version_d(field_off: int, value: int) -> None:
    syn = Synth()
    fmt = "<H" if field_off == 0 else "<I"
    raises_fast(patched(syn.data, fmt, syn.verdef_off + 28 + field_off, value))


def test_unterminated_string_raises() -> None:
    syn = Synth()
    data = bytearray(syn.data)
    end = syn.dynstr_off + (syn.verneed_off - syn.dynstr_off)
    data[syn.dynstr_off + 1 : end] = b"A" * (end - syn.dynstr_off - 1)
    assert "unterminated" in str(raises_fast(data))


# --------------------------------------------------------------------------
# Files


def test_parse_elf_file(tmp_path: Path) -> None:
    p = tmp_path / "lib.so"
    p.write_bytes(Synth().data)
    assert parse_elf_file(p) == parse_elf(Synth().data)
    assert parse_elf_file(str(p)).soname == "libsynth.so.1"
    with pytest.raises(ElfError, match="over"):
        parse_elf_file(p, max_bytes=100)
    (tmp_path / "empty").write_bytes(b"")
    with pytest.raises(ElfError):
        parse_elf_file(tmp_path / "empty")
    (tmp_path / "short").write_bytes(Synth().data[:500])
    with pytest.raises(ElfError):
        parse_elf_file(tmp_path / "short")
    with pytest.raises(FileNotFoundError):
        parse_elf_file(tmp_path / "missing.so")


def find_libstdcxx() -> Path:
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=False).stdout
    except OSError:
        out = ""
    for line in out.splitlines():
        m = re.match(r"\s*libstdc\+\+\.so\.6 \(([^)]*)\) => (\S+)", line)
        if m and ("x86-64" in m.group(1) or "AArch64" in m.group(1)):
            return Path(m.group(2))
    for cand in ("/lib/x86_64-linux-gnu/libstdc++.so.6", "/usr/lib64/libstdc++.so.6"):
        if Path(cand).exists():
            return Path(cand)
    pytest.skip("no libstdc++.so.6 found")


def find_libtorch_cpu() -> Path:
    spec = importlib.util.find_spec("torch")  # locates torch without importing it
    if spec is None or spec.origin is None:
        pytest.skip("torch not installed")
    lib = Path(spec.origin).parent / "lib" / "libtorch_cpu.so"
    if not lib.exists():
        pytest.skip("libtorch_cpu.so not found")
    return lib


def test_real_libstdcxx() -> None:
    info = parse_elf_file(find_libstdcxx())
    assert info.soname == "libstdc++.so.6"
    assert "libc.so.6" in info.needed
    assert "GLIBCXX_3.4" in info.version_defs
    assert "libstdc++.so.6" not in info.version_defs  # the BASE entry
    top = max_version(info.version_defs, "GLIBCXX")
    assert top is not None and version_key(top) >= (3, 4, 20)
    assert max_version(info.version_defs, "CXXABI") is not None
    assert max_version(info.version_needs["libc.so.6"], "GLIBC") is not None


def test_real_libtorch_cpu() -> None:
    info = parse_elf_file(find_libtorch_cpu())
    assert info.elf_class == 64 and info.soname == "libtorch_cpu.so"
    assert "libstdc++.so.6" in info.needed
    cxx = info.version_needs["libstdc++.so.6"]
    assert max_version(cxx, "GLIBCXX") is not None
    assert max_version(cxx, "CXXABI") is not None
    assert max_version(info.version_needs["libc.so.6"], "GLIBC") is not None


def readelf_view(path: Path) -> tuple[str | None, list[str], dict[str, list[str]], list[str]]:
    def run(*args: str) -> str:
        cmd = ["readelf", "-W", *args, str(path)]
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout

    dyn, ver = run("-d"), run("-V")
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.*)\]", dyn)
    soname = re.findall(r"\(SONAME\)\s+Library soname: \[(.*)\]", dyn)
    needs: dict[str, list[str]] = {}
    defs: list[str] = []
    section = ""
    current: list[str] = []
    for line in ver.splitlines():
        if line.startswith("Version "):
            section = line
        elif "version_d" in section and "Rev:" in line and "Flags: BASE" not in line:
            defs.append(line.split("Name: ")[1].strip())
        elif "version_r" in section and "File: " in line:
            current = needs.setdefault(line.split("File: ")[1].split()[0], [])
        elif "version_r" in section and "Name: " in line:
            current.append(line.split("Name: ")[1].split()[0])
    return (soname[0] if soname else None), needed, needs, defs


@pytest.mark.skipif(shutil.which("readelf") is None, reason="binutils readelf not installed")
@pytest.mark.parametrize("finder", [find_libstdcxx, find_libtorch_cpu])
def test_matches_readelf(finder: Callable[[], Path]) -> None:
    path = finder()
    soname, needed, needs, defs = readelf_view(path)
    info = parse_elf_file(path)
    assert info.soname == soname
    assert list(info.needed) == needed
    assert {k: list(v) for k, v in info.version_needs.items()} == needs
    assert list(info.version_defs) == defs


# --------------------------------------------------------------------------
# Versions


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("GLIBCXX_3.4.32", (3, 4, 32)),
        ("GLIBC_2.2.5", (2, 2, 5)),
        ("CXXABI_1.3.13", (1, 3, 13)),
        ("CXXABI_TM_1", (1,)),
        ("GLIBC_PRIVATE", ()),
        ("GLIBCXX_TUNABLES", ()),
        ("3.4", (3, 4)),
        ("GCC_4.2.0", (4, 2, 0)),
        ("FOO_1.2rc3", (1, 2)),
        ("", ()),
    ],
)
def test_version_key(name: str, key: tuple[int, ...]) -> None:
    assert version_key(name) == key


def test_max_version() -> None:
    names = [
        "GLIBCXX_3.4.9", "GLIBCXX_3.4.32", "GLIBCXX_3.4.4", "GLIBCXX_TUNABLES",
        "GLIBCXX_3.4.32x", "CXXABI_1.3.15", "CXXABI_TM_1", "GLIBC_2.34", "GLIBC_PRIVATE",
        "GLIBC_2.2.5", "GLIBCXX_DEBUG_MESSAGE_LENGTH",
    ]  # fmt: skip
    assert max_version(names, "GLIBCXX") == "GLIBCXX_3.4.32"
    assert max_version(names, "GLIBC") == "GLIBC_2.34"
    assert max_version(names, "CXXABI") == "CXXABI_1.3.15"
    assert max_version(names, "GCC") is None
    assert max_version([], "GLIBC") is None
    assert max_version(iter(["GLIBC_2.3", "GLIBC_2.10"]), "GLIBC") == "GLIBC_2.10"


# --------------------------------------------------------------------------
# CUDA


@pytest.mark.parametrize(
    ("name", "abi", "flags", "arch"),
    [
        ("cu130_sm_80.cubin", 8, 0x06005004, "sm_80"),
        ("cu130_sm_90.cubin", 8, 0x06005A04, "sm_90"),
        ("cu130_sm_90a.cubin", 8, 0x06005A04, "sm_90a"),  # "a" only in .nv.compat
        ("cu130_sm_100a.cubin", 8, 0x06006402, "sm_100a"),
        ("cu130_sm_100f.cubin", 8, 0x06006402, "sm_100"),  # cuobjdump: sm_100
        ("cu130_sm_120.cubin", 8, 0x06007802, "sm_120"),
        ("cu129_sm_90a.cubin", 7, 0x005A0D5A, "sm_90a"),  # old ABI, 0x800
        ("cu129_sm_100a.cubin", 8, 0x0600640A, "sm_100a"),  # 0x8, no compat record
    ],
)
def test_cubin_fixtures(name: str, abi: int, flags: int, arch: str) -> None:
    data = fixture(name)
    info = parse_elf(data)
    assert (info.machine, info.elf_class, info.abi_version, info.flags) == (190, 64, abi, flags)
    assert info.needed == () and info.version_needs == {}
    assert cuda_arch(info) == arch
    assert cubin_arch(data) == arch
    assert cubin_arch(memoryview(data)) == arch


def compat_record_offset(data: bytes) -> int:
    """File offset of the {2, 0x09, value} record in the .nv.compat section."""
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    for i in range(shnum):
        # Elf64_Shdr: sh_type at +4, sh_offset at +24, sh_size at +32
        sh_type = struct.unpack_from("<I", data, shoff + i * shentsize + 4)[0]
        off, size = struct.unpack_from("<QQ", data, shoff + i * shentsize + 24)
        if sh_type == 0x70000086:
            rec = data.find(b"\x02\x09", off, off + size)
            assert rec == off  # nvcc 13.0 writes it first
            return rec
    raise AssertionError("no .nv.compat section")


@pytest.mark.parametrize(
    ("name", "patch", "arch"),
    [
        # Each of these patched files was given to cuobjdump 13.5 too.
        ("cu130_sm_90.cubin", "compat=1", "sm_90a"),
        ("cu130_sm_90a.cubin", "compat=0", "sm_90"),
        ("cu130_sm_90.cubin", "flags|=0x8", "sm_90"),  # record present: bit ignored
        ("cu130_sm_100a.cubin", "flags|=0x8", "sm_100a"),
        ("cu129_sm_100a.cubin", "flags&=~0x8", "sm_100"),
        ("cu129_sm_90a.cubin", "flags&=~0x800", "sm_90"),
    ],
)
def test_cuda_arch_specific_sources(name: str, patch: str, arch: str) -> None:
    data = bytearray(fixture(name))
    flags = struct.unpack_from("<I", data, 0x30)[0]
    if patch.startswith("compat="):
        data[compat_record_offset(bytes(data)) + 2] = int(patch[-1])
    elif "|=" in patch:
        struct.pack_into("<I", data, 0x30, flags | int(patch.split("=")[1], 16))
    else:
        struct.pack_into("<I", data, 0x30, flags & ~int(patch.split("~")[1], 16))
    assert cubin_arch(bytes(data)) == arch


def info_with(**kw: object) -> ElfInfo:
    base: dict[str, object] = {
        "elf_class": 64, "little_endian": True, "machine": 190, "flags": 0, "abi_version": 8,
        "soname": None, "needed": (), "version_needs": {}, "version_defs": (),
    }  # fmt: skip
    base.update(kw)
    return ElfInfo(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("abi", "flags", "specific", "arch"),
    [
        (7, 0x005A055A, None, "sm_90"),
        (7, 0x005A0D5A, None, "sm_90a"),
        (7, 0x00500550, None, "sm_80"),
        (7, 0x00230523, None, "sm_35"),
        (8, 0x06007902, None, "sm_121"),
        (8, 0x0600790A, None, "sm_121a"),
        (8, 0x0600790A, False, "sm_121"),
        (8, 0x06007902, True, "sm_121a"),
        (8, 0x06005A04, True, "sm_90a"),
        (9, 0x06006E02, None, "sm_110"),  # future ABI: assume the V2 layout
    ],
)
def test_cuda_arch_decoding(abi: int, flags: int, specific: bool | None, arch: str) -> None:
    assert cuda_arch(info_with(abi_version=abi, flags=flags, cuda_arch_specific=specific)) == arch


def test_cuda_arch_rejects() -> None:
    assert cuda_arch(info_with(machine=62, flags=0x5A)) is None
    with pytest.raises(ElfError, match="no SM"):
        cuda_arch(info_with(abi_version=8, flags=0x5A))  # V2 with SM in the wrong byte
    with pytest.raises(ElfError, match="no SM"):
        cuda_arch(info_with(abi_version=7, flags=0x0800))
    with pytest.raises(ElfError, match="not a cubin"):
        cubin_arch(Synth().data)
    raises_fast(fixture("cu130_sm_90.cubin")[:100], cubin_arch)


MIXED = [
    ("sass", "sm_80"),
    ("sass", "sm_90a"),
    ("ptx", "sm_90a"),
    ("ptx", "sm_90"),
    ("sass", "sm_100"),
    ("ptx", "sm_100f"),
    ("sass", "sm_120"),
    ("ptx", "sm_120"),
]
PLAIN = [("sass", "sm_90a"), ("ptx", "sm_90a"), ("ptx", "sm_80")]


def test_fatbin_fixtures() -> None:
    # Same names, in the same order, as `cuobjdump -lelf -lptx` lists them.
    mixed, plain = fixture("cu130_mixed.fatbin"), fixture("cu130_plain.fatbin")
    assert fatbin_entries(mixed) == MIXED
    assert fatbin_entries(plain) == PLAIN
    assert fatbin_entries(memoryview(plain)) == PLAIN
    assert fatbin_entries(plain + bytes(4) + mixed + bytes(3)) == PLAIN + MIXED


def entry_offsets(data: bytes) -> list[int]:
    offs, off = [], struct.unpack_from("<H", data, 6)[0]
    end = off + struct.unpack_from("<Q", data, 8)[0]
    while off < end:
        offs.append(off)
        header_size, payload_size = struct.unpack_from("<IQ", data, off + 4)
        off += header_size + payload_size
    return offs


def test_fatbin_flags() -> None:
    plain = fixture("cu130_plain.fatbin")
    elf, ptx90a, ptx80 = entry_offsets(plain)

    def with_flags(entry: int, change: Callable[[int], int]) -> list[tuple[str, str]]:
        flags = struct.unpack_from("<Q", plain, entry + 40)[0]
        return fatbin_entries(patched(plain, "<Q", entry + 40, change(flags)))

    assert with_flags(ptx80, lambda f: f | 0x100000)[2] == ("ptx", "sm_80a")
    assert with_flags(ptx80, lambda f: f | 0x200000)[2] == ("ptx", "sm_80f")
    # An uncompressed cubin names itself, whatever the entry flags claim.
    assert with_flags(elf, lambda f: f & ~0x100000)[0] == ("sass", "sm_90a")
    assert fatbin_entries(patched(plain, "<H", ptx90a, 77))[1] == ("unknown_77", "sm_90a")


def test_fatbin_hostile() -> None:
    plain = fixture("cu130_plain.fatbin")
    elf, ptx90a, _ = entry_offsets(plain)
    for cut in range(len(plain)):
        with pytest.raises(ElfError):
            fatbin_entries(plain[:cut])
    for data in [
        b"",
        bytes(16),
        patched(plain, "<I", 0, 0xDEADBEEF),  # magic
        patched(plain, "<H", 4, 2),  # container version
        patched(plain, "<H", 6, 8),  # container header size
        patched(plain, "<Q", 8, 1 << 40),  # container size
        patched(plain, "<I", elf + 4, 8),  # entry header size
        patched(plain, "<Q", elf + 8, 1 << 40),  # payload size
        patched(plain, "<I", ptx90a + 28, 0),  # SM 0
        patched(plain, "<I", elf + 28, 80),  # header says sm_80, cubin is sm_90a
        patched(plain, "<H", elf + 64 + 18, 62),  # payload is an x86-64 ELF
        plain + b"\x01",  # trailing garbage
        plain + bytes(9),  # more padding than alignment explains
    ]:
        raises_fast(data, fatbin_entries)
    empty_containers = struct.pack("<IHHQ", 0xBA55ED50, 1, 16, 0) * 70000
    raises_fast(empty_containers, fatbin_entries)

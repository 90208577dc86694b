"""Tests of runtime_probe.formats.safetensors: round trips, byte compatibility with the official
``safetensors`` package, hostile inputs, and a fuzz property (arbitrary/mutated bytes)."""

from __future__ import annotations

import json
import os
import stat
import struct
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import runtime_probe.formats.safetensors as stx
from runtime_probe.formats.safetensors import (
    DTYPE_TO_TORCH,
    ITEMSIZE,
    TORCH_TO_DTYPE,
    Header,
    SafetensorsError,
    dump,
    dumps,
    load,
    parse_header,
    read_header,
)

REPO = Path(__file__).resolve().parents[2]
ALL_DTYPES = [getattr(torch, name) for name in DTYPE_TO_TORCH.values()]
# safetensors 0.8's torch loader has no entry for F8_E8M0 (it writes it, but cannot read it back).
OFFICIAL_LOADABLE = [d for d in ALL_DTYPES if d != torch.float8_e8m0fnu]


@pytest.fixture
def official() -> Any:
    """The official package, for cross-checks only (the module under test never imports it)."""
    return pytest.importorskip("safetensors.torch")


def rand(shape: tuple[int, ...], dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    """Random bit patterns (NaNs included) for any dtype; bool gets only 0/1."""
    g = torch.Generator().manual_seed(seed)
    n = 1
    for d in shape:
        n *= d
    hi = 2 if dtype == torch.bool else 256
    raw = torch.randint(0, hi, (n * dtype.itemsize,), dtype=torch.uint8, generator=g)
    return raw.view(dtype).reshape(shape)


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.resolve_conj().resolve_neg().contiguous().reshape(-1).view(torch.uint8)


def assert_same(a: torch.Tensor, b: torch.Tensor) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape
    assert torch.equal(bits(a), bits(b))


def st_file(header: Any, data: bytes = b"", *, n: int | None = None) -> bytes:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(raw) if n is None else n) + raw + data


def one(dtype: Any = "F32", shape: Any = (1,), offsets: Any = (0, 4), **extra: Any) -> Any:
    entry = {
        "dtype": dtype,
        "shape": list(shape) if isinstance(shape, tuple) else shape,
        "data_offsets": list(offsets) if isinstance(offsets, tuple) else offsets,
    }
    return {"w": {**entry, **extra}}


# ---------------------------------------------------------------- round trips and compatibility


def test_dtype_tables() -> None:
    for code, name in DTYPE_TO_TORCH.items():
        assert TORCH_TO_DTYPE[name] == code
        assert getattr(torch, name).itemsize == ITEMSIZE[code]
    assert DTYPE_TO_TORCH["BF16"] == "bfloat16" and DTYPE_TO_TORCH["BOOL"] == "bool"
    assert stx.TensorInfo("x", "F8_E4M3", (), 0, 1).torch_dtype_name == "float8_e4m3fn"


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(2, 3), (), (0, 3), (5,)], ids=str)
def test_round_trip_every_dtype(dtype: torch.dtype, shape: tuple[int, ...], official: Any) -> None:
    t = rand(shape, dtype, seed=len(shape))
    blob = dumps({"t": t})
    assert blob == official.save({"t": t})  # byte-identical to the official writer
    back = load(blob)["t"]
    assert_same(back, t)
    back.reshape(-1)[:1] = back.reshape(-1)[:1]  # writable, owns its memory (no warning)


@pytest.mark.parametrize("dtype", OFFICIAL_LOADABLE, ids=str)
def test_cross_compat_files(dtype: torch.dtype, tmp_path: Path, official: Any) -> None:
    tensors = {"a": rand((3, 4), dtype, 1), "scalar": rand((), dtype, 2), "empty": rand((0, 2), dtype), "z": rand((7,), torch.float32, 3)}
    ours, theirs = tmp_path / "ours.safetensors", tmp_path / "theirs.safetensors"
    dump(tensors, ours, metadata={"format": "pt"})
    official.save_file(tensors, str(theirs), metadata={"format": "pt"})
    assert ours.read_bytes() == theirs.read_bytes()
    for got in (official.load_file(str(ours)), load(theirs), load(str(theirs))):
        assert got.keys() == tensors.keys()
        for k, t in tensors.items():
            assert_same(got[k], t)


def test_mixed_file_layout_matches_official(official: Any) -> None:
    tensors = {f"t{i:02d}": rand((3,), d, i) for i, d in enumerate(ALL_DTYPES)}
    tensors['é\x01"\\\n😀'] = torch.ones(2, dtype=torch.int64)  # JSON escaping like serde_json
    blob = dumps(tensors, {"k": "v"})
    assert blob == official.save(tensors, metadata={"k": "v"})
    assert dumps(tensors, {}) == official.save(tensors, metadata={})
    header = parse_header(blob, file_size=len(blob))
    assert header.metadata == {"k": "v"} and header.total_size == len(blob)
    assert header.data_start % 8 == 0
    for info in header.tensors.values():  # largest dtypes first keeps every tensor aligned
        assert info.begin % ITEMSIZE[info.dtype] == 0
    ends = [i.end for i in header.tensors.values()]
    assert ends == sorted(ends)  # header order is file order for our files


def test_views_are_serialized_by_value(tmp_path: Path, official: Any) -> None:
    base = rand((4, 6), torch.float32, 7)
    z = torch.complex(rand((3,), torch.float32, 8).nan_to_num(), torch.arange(3.0))
    views = {
        "transposed": base.t(),
        "sliced": base[1:, ::2],
        "row": base[2],
        "col": base[:, 3],
        "expanded": torch.arange(3.0).expand(4, 3),
        "offset": base.reshape(-1)[5:9],
        "conj": z.conj(),
        "neg_bit": z.conj().imag,
        "bf16_strided": base.bfloat16()[::2, 1::3],
        "bool_view": (base > 0)[::3],
        "i64_0d": torch.arange(5)[3],
    }
    assert views["conj"].is_conj() and views["neg_bit"].is_neg()
    blob = dumps(views)
    for got in (load(blob), official.load(blob)):
        for k, v in views.items():
            assert_same(got[k], v)
            assert got[k].is_contiguous()
    assert bytes(dumps(views)) == blob  # deterministic


def test_load_names_device_and_sources(tmp_path: Path) -> None:
    tensors = {"a": torch.arange(4), "b": torch.ones(2, 2), "c": torch.zeros(())}
    path = tmp_path / "x.safetensors"
    dump(tensors, path)
    for src in (path, str(path), path.read_bytes(), memoryview(path.read_bytes())):
        got = load(src, names=["c", "a"], device="cpu")
        assert list(got) == ["c", "a"]
        assert_same(got["a"], tensors["a"])
        assert list(load(src, names="b")) == ["b"]
        assert list(load(src)) == list(read_header(path).tensors)
    with pytest.raises(SafetensorsError, match="no tensor named 'nope'"):
        load(path, names=["nope"])


def test_metadata_and_empty_file(official: Any) -> None:
    blob = dumps({}, metadata={"b": "2", "a": "1"})
    assert blob[8:].startswith(b'{"__metadata__":{"a":"1","b":"2"}}')  # sorted: deterministic
    header = parse_header(blob, file_size=len(blob))
    assert header.tensors == {} and header.metadata == {"a": "1", "b": "2"}
    assert dumps({}) == b"\x08" + b"\x00" * 7 + b"{}      " == official.save({})
    assert load(dumps({})) == {}


# ---------------------------------------------------------------- header-only and import hygiene


def test_parse_header_does_not_import_torch(tmp_path: Path) -> None:
    blob = dumps({"w": torch.ones(3)}, {"k": "v"})
    (tmp_path / "w.safetensors").write_bytes(blob)
    code = textwrap.dedent(f"""
        import sys
        import runtime_probe.formats.safetensors as s
        p = {str(tmp_path / "w.safetensors")!r}
        data = open(p, "rb").read()
        h = s.parse_header(data, file_size=len(data))
        assert h.tensors["w"].shape == (3,) and h == s.read_header(p)
        bad = [m for m in ("torch", "numpy", "safetensors") if m in sys.modules]
        assert not bad, bad
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_read_header_reads_only_the_header(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "big.safetensors"
    dump({"w": torch.zeros(1 << 18)}, path)
    read: list[int] = []

    class Spy:
        def __init__(self, f: Any) -> None:
            self.f = f

        def __enter__(self) -> Spy:
            return self

        def __exit__(self, *exc: object) -> None:
            self.f.close()

        def readinto(self, buf: memoryview) -> int:
            n: int = self.f.readinto(buf)
            read.append(n)
            return n

        def __getattr__(self, name: str) -> Any:
            return getattr(self.f, name)

    real_open = open
    monkeypatch.setattr(stx, "open", lambda *a, **k: Spy(real_open(*a, **k)), raising=False)
    header = read_header(path)
    assert sum(read) == header.data_start < 200
    assert header.total_size == path.stat().st_size


# ---------------------------------------------------------------- hostile inputs

HOSTILE: dict[str, tuple[bytes, str]] = {
    "too short": (b"\x01\x00", "too short"),
    "empty": (b"", "too short"),
    "length beyond file": (st_file(b"{}", n=1000), "exceeds the 10-byte file"),
    "length u64 max": (st_file(b"{}", n=2**64 - 1), "exceeds the limit"),
    "length beyond cap": (st_file(b"{}", n=200 * 1024**2), "exceeds the limit"),
    "zero length": (st_file(b""), "must start with '{'"),
    "not utf8": (st_file(b'{"\xff":1}'), "not valid UTF-8"),
    "not json": (st_file(b'{"w": '), "not valid JSON"),
    "trailing nul": (st_file(b"{}\x00"), "not valid JSON"),
    "json array": (st_file(b"[]"), "must start with '{'"),
    "leading space": (st_file(b" {}"), "must start with '{'"),
    "nan": (st_file(b'{"__metadata__":{"x":NaN}}'), "NaN"),
    "int too long": (st_file(b'{"w":{"shape":[' + b"9" * 5000 + b"]}}"), "not valid JSON"),
    "entry not object": (st_file({"w": 5}), "tensor 'w': entry must be an object"),
    "missing key": (st_file({"w": {"dtype": "F32", "shape": []}}), "tensor 'w': missing keys"),
    "extra key": (st_file(one(extra=1), b"\0" * 4), "tensor 'w': missing keys [], unexpected"),
    "unknown dtype": (st_file(one("F128"), b"\0" * 4), "tensor 'w': unknown dtype 'F128'"),
    "lowercase dtype": (st_file(one("f32"), b"\0" * 4), "tensor 'w': unknown dtype"),
    "dtype not str": (st_file(one(["F32"]), b"\0" * 4), "tensor 'w': unknown dtype"),
    "sub-byte dtype": (st_file(one("F4", (2,), (0, 1)), b"\0"), "sub-byte dtype F4"),
    "shape not list": (st_file(one(shape="4"), b"\0" * 4), "tensor 'w': shape must be a list"),
    "shape negative": (st_file(one(shape=[-1]), b"\0" * 4), "tensor 'w': shape must be"),
    "shape bool": (st_file(one(shape=[True]), b"\0" * 4), "tensor 'w': shape must be"),
    "shape float": (st_file(one(shape=[1.0]), b"\0" * 4), "tensor 'w': shape must be"),
    "shape nested": (st_file(one(shape=[[1]]), b"\0" * 4), "tensor 'w': shape must be"),
    "dim beyond u64": (st_file(one(shape=[2**64, 0], offsets=(0, 0))), "shape must be"),
    "offsets one": (st_file(one(offsets=[0]), b"\0" * 4), "tensor 'w': data_offsets must be"),
    "offsets three": (st_file(one(offsets=[0, 4, 4]), b"\0" * 4), "data_offsets must be"),
    "offsets strings": (st_file(one(offsets=["0", "4"]), b"\0" * 4), "data_offsets must be"),
    "offsets negative": (st_file(one(offsets=[-4, 0])), "tensor 'w': data_offsets must be"),
    "offsets reversed": (st_file(one(offsets=(4, 0)), b"\0" * 4), "end before they begin"),
    "size mismatch": (st_file(one(shape=(2,)), b"\0" * 4), "needs 8 bytes but data_offsets"),
    "numel overflow": (st_file(one(shape=(2**40, 2**40), offsets=(0, 4)), b"\0" * 4), "overflows"),
    "overflow before zero": (st_file(one(shape=(2**63, 2**63, 0), offsets=(0, 0))), "overflows"),
    "bytes beyond u64": (st_file(one(shape=(2**63,), offsets=(0, 4)), b"\0" * 4), f"needs {2**65}"),
    "beyond buffer": (st_file(one(shape=(2,), offsets=(0, 8)), b"\0" * 4), "runs past the end"),
    "truncated data": (dumps({"w": torch.ones(4)})[:-3], "runs past the end"),
    "overlap": (st_file({**one(), "v": one()["w"]}, b"\0" * 4), "overlaps tensor"),
    "partial overlap": (
        st_file({"w": one(shape=(2,), offsets=(0, 8))["w"], "v": one(shape=(2,), offsets=(4, 12))["w"]}, b"\0" * 12),
        "tensor 'v' (data_offsets [4, 12]) overlaps tensor 'w'",
    ),
    "gap": (st_file({**one(), "v": one(offsets=(8, 12))["w"]}, b"\0" * 12), "belong to no tensor"),
    "gap at start": (st_file(one(offsets=(4, 8)), b"\0" * 8), "bytes [0, 4) before tensor 'w'"),
    "trailing bytes": (st_file(one(), b"\0" * 5), "1 trailing bytes"),
    "dup tensor": (st_file(b'{"w":{},"w":{}}'), "duplicate key 'w'"),
    "dup in entry": (st_file(b'{"w":{"dtype":"F32","dtype":"F32"}}'), "duplicate key 'dtype'"),
    "dup metadata": (st_file(b'{"__metadata__":{"a":"1","a":"2"}}'), "duplicate key 'a'"),
    "metadata int": (st_file({"__metadata__": {"x": 1}}), "__metadata__['x'] must be a string"),
    "metadata list": (st_file({"__metadata__": ["x"]}), "__metadata__ must be an object"),
    "metadata tensor": (st_file({"__metadata__": one()["w"]}), "must be a string"),
    "surrogate name": (st_file(b'{"\\ud800":{}}'), "unpaired UTF-16 surrogate"),
    "deep arrays": (st_file(b'{"w":' + b"[" * 200_000 + b"]" * 200_000 + b"}"), "too deeply"),
    "deep objects": (st_file(b'{"w":' * 200_000 + b"1" + b"}" * 200_000), "nested too deeply"),
}


@pytest.mark.parametrize("case", HOSTILE, ids=str)
def test_hostile(case: str, tmp_path: Path) -> None:
    blob, message = HOSTILE[case]
    path = tmp_path / "bad.safetensors"
    path.write_bytes(blob)
    for attempt in (lambda: parse_header(blob, file_size=len(blob)), lambda: read_header(path), lambda: load(blob), lambda: load(path)):
        with pytest.raises(SafetensorsError) as info:
            attempt()
        assert message in str(info.value), str(info.value)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX only")
def test_non_regular_files_are_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # opening it must not block waiting for a writer
    for path in (fifo, Path("/dev/zero"), tmp_path):
        with pytest.raises(SafetensorsError, match="not a regular file"):
            read_header(path)
        with pytest.raises(SafetensorsError, match="not a regular file"):
            load(path)
    with pytest.raises(FileNotFoundError):
        read_header(tmp_path / "missing.safetensors")


def test_header_cap_and_truncated_prefix() -> None:
    blob = dumps({"w": torch.ones(2)}, {"k": "v" * 100})
    with pytest.raises(SafetensorsError, match="exceeds the limit of 64 bytes"):
        parse_header(blob, max_header_bytes=64)
    n = struct.unpack("<Q", blob[:8])[0]
    assert parse_header(blob[: 8 + n]).total_size == len(blob)  # header-only prefix is enough
    with pytest.raises(SafetensorsError, match="header truncated"):
        parse_header(blob[: 8 + n - 1])


def test_bool_bytes_and_torch_limits() -> None:
    with pytest.raises(SafetensorsError, match="tensor 'w': BOOL data holds bytes other than"):
        load(st_file(one("BOOL", (2,), (0, 2)), b"\x01\x02"))
    # Valid for the format (0 elements) but beyond what torch can index: still SafetensorsError.
    blob = st_file(one(shape=(0, 2**63 + 1), offsets=(0, 0)))
    assert parse_header(blob, file_size=len(blob)).tensors["w"].shape == (0, 2**63 + 1)
    with pytest.raises(SafetensorsError, match="tensor 'w': torch cannot build shape"):
        load(blob)


def test_dumps_rejects_bad_input() -> None:
    cases: list[tuple[Any, Any, str]] = [
        ({"__metadata__": torch.ones(1)}, None, "invalid tensor name"),
        ({1: torch.ones(1)}, None, "invalid tensor name"),
        ({"\ud800": torch.ones(1)}, None, "surrogate"),
        ({"w": [1.0]}, None, "expected a dense tensor"),
        ({"w": torch.eye(2).to_sparse()}, None, "expected a dense tensor"),
        ({"w": torch.ones(1, device="meta")}, None, "expected a dense tensor"),
        ({"w": torch.ones(1, dtype=torch.complex128)}, None, "no safetensors equivalent"),
        ({"w": torch.ones(1)}, {"k": 1}, "metadata must map str to str"),
        ([torch.ones(1)], None, "expected a mapping"),
    ]
    for tensors, metadata, message in cases:
        with pytest.raises(SafetensorsError, match=message):
            dumps(tensors, metadata)


# ---------------------------------------------------------------- atomic dump


def test_dump_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "w.safetensors"
    dump({"a": torch.ones(2)}, path, {"v": "1"})
    umask = os.umask(0o022)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask
    path.chmod(0o640)
    dump({"a": torch.zeros(3)}, str(path))
    assert stat.S_IMODE(path.stat().st_mode) == 0o640  # replacing keeps the mode
    assert_same(load(path)["a"], torch.zeros(3))
    good = path.read_bytes()

    def boom(f: Any, code: str, t: torch.Tensor) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(stx, "_write_tensor", boom)
    with pytest.raises(OSError, match="disk full"):
        dump({"a": torch.ones(5)}, path)
    with pytest.raises(SafetensorsError):
        dump({"a": "not a tensor"}, path)  # type: ignore[dict-item]
    assert path.read_bytes() == good
    assert os.listdir(tmp_path) == ["w.safetensors"]  # no temp files left behind


def _every_kind() -> dict[str, torch.Tensor]:
    t = torch.randn(4, 6, generator=torch.Generator().manual_seed(0))
    return {
        "f32": t,
        "view": t[1:, ::2],
        "f16": t.half(),
        "bf16": t.bfloat16(),
        "bool": t > 0,
        "i64": torch.arange(5),
        "empty": torch.empty(0, 3),
    }


def test_dump_writes_the_bytes_dumps_makes(tmp_path: Path) -> None:
    """dump writes a tensor's own memory (no second copy in memory): the bytes stay dumps' and the
    official library's, for views, 2-byte floats, bools and empty tensors."""
    path = tmp_path / "w.safetensors"
    dump(_every_kind(), path, {"k": "v"})
    assert path.read_bytes() == dumps(_every_kind(), {"k": "v"})


@pytest.mark.parametrize("durable", [True, False])
def test_dump_fsyncs_unless_told_the_file_is_transient(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, durable: bool) -> None:
    synced: list[int] = []
    monkeypatch.setattr(stx.os, "fsync", lambda fd: synced.append(fd))
    path = tmp_path / "w.safetensors"
    dump(_every_kind(), path, durable=durable)
    assert bool(synced) is durable  # the file (and its folder) only when durable
    assert path.read_bytes() == dumps(_every_kind())
    assert os.listdir(tmp_path) == ["w.safetensors"]


def test_a_borrowed_load_outlives_its_removed_file(tmp_path: Path) -> None:
    """The build reads each sample's outputs borrowed (mmap) and removes the file at once."""
    path = tmp_path / "w.safetensors"
    want = _every_kind()
    dump(want, path, durable=False)
    got = load(path, borrow=True)
    path.unlink()
    for name, t in want.items():
        assert_same(got[name], t.contiguous())
    got["f32"].add_(1)  # a private mapping: writable, and the file is gone
    assert_same(got["f32"], want["f32"] + 1)


def test_big_endian_swap_helpers() -> None:
    flat = torch.arange(8, dtype=torch.uint8)
    assert stx._swap_bytes(flat, "F32").tolist() == [3, 2, 1, 0, 7, 6, 5, 4]
    assert stx._swap_bytes(flat, "C64").tolist() == [3, 2, 1, 0, 7, 6, 5, 4]  # two float32s
    assert stx._swap_bytes(flat, "F64").tolist() == [7, 6, 5, 4, 3, 2, 1, 0]
    assert stx._swap_bytes(flat, "U8") is flat


# ---------------------------------------------------------------- fuzzing

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
VALID = dumps(
    {
        "w": torch.arange(6.0).reshape(2, 3),
        "b": torch.tensor([True, False]),
        "e": torch.zeros(0, 4, dtype=torch.float16),
        "s": torch.tensor(7),
    },
    {"k": "v"},
)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats()
    | st.text(max_size=8)
    | st.sampled_from([*ITEMSIZE, "dtype", "shape", "data_offsets", "__metadata__"]),
    lambda kids: (
        st.lists(kids, max_size=4)
        | st.dictionaries(st.sampled_from(["w", "dtype", "shape", "data_offsets", "__metadata__"]), kids, max_size=4)
    ),
    max_leaves=20,
)


def header_or_error(blob: bytes) -> Header | None:
    try:
        header = parse_header(blob, file_size=len(blob))
    except SafetensorsError:
        return None
    assert header.total_size == len(blob)
    return header


@FUZZ
@given(st.binary(max_size=300))
def test_fuzz_arbitrary_bytes(blob: bytes) -> None:
    header_or_error(blob)
    header_or_error(st_file(blob))  # a consistent length, so the JSON parser sees the bytes


@FUZZ
@given(st.dictionaries(st.text(max_size=4), json_values, max_size=4), st.binary(max_size=64))
def test_fuzz_json_headers(obj: dict[str, Any], data: bytes) -> None:
    blob = st_file(json.dumps(obj).encode(), data)
    if header_or_error(blob) is not None:
        assert isinstance(load(blob), dict)


@FUZZ
@given(
    st.lists(st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 255)), max_size=6), st.integers(0, len(VALID)), st.binary(max_size=8)
)
def test_fuzz_mutated_valid_file(edits: list[tuple[int, int]], cut: int, tail: bytes) -> None:
    blob = bytearray(VALID)
    for pos, value in edits:
        blob[pos] = value
    mutated = bytes(blob[:cut]) + tail
    header = header_or_error(mutated)
    try:
        tensors = load(mutated)
    except SafetensorsError as exc:  # a valid header may still carry invalid BOOL bytes
        assert header is None or "BOOL data" in str(exc) or "torch cannot" in str(exc)
    else:
        assert header is not None and tensors.keys() == header.tensors.keys()


def test_borrow_reads_the_same_tensors_through_the_library(tmp_path: Path) -> None:
    pytest.importorskip("safetensors")
    import torch
    from safetensors.torch import save_file

    tensors = {"a": torch.randn(3, 5), "b": torch.arange(7, dtype=torch.int64), "c": torch.randn(2).to(torch.bfloat16)}
    path = tmp_path / "w.safetensors"
    save_file(tensors, str(path))
    own, borrowed = load(path), load(path, borrow=True, names=["c", "a"])
    assert list(borrowed) == ["c", "a"]
    for name, t in borrowed.items():
        assert torch.equal(t, own[name]) and t.dtype == own[name].dtype


def test_borrow_takes_the_bulk_through_the_library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 15 (speed of bulk reads): with borrow the data bytes are read by the safetensors
    library (mmap), not by our own reader, which only reads the header. The test above would pass
    with a borrow that silently fell back to our reader."""
    pytest.importorskip("safetensors")
    import torch
    from safetensors.torch import save_file

    from runtime_probe.formats import safetensors as module

    path = tmp_path / "w.safetensors"
    save_file({"a": torch.randn(64, 64), "b": torch.arange(9, dtype=torch.int32)}, str(path))

    real = module._read_exact

    def no_own_bulk_read(f: Any, n: int, what: Any) -> bytearray:
        if isinstance(what, module.TensorInfo):  # tensor data; the header is still ours to read
            raise AssertionError("the bulk was read by our own reader")
        return real(f, n, what)

    monkeypatch.setattr(module, "_read_exact", no_own_bulk_read)
    borrowed = module.load(path, borrow=True)
    assert borrowed["a"].shape == (64, 64) and borrowed["b"].tolist() == list(range(9))
    with pytest.raises(AssertionError, match="our own reader"):
        module.load(path)  # without borrow, our reader reads it (the patch is in effect)


def test_borrow_keeps_the_strict_checks(tmp_path: Path) -> None:
    import torch

    path = tmp_path / "bool.safetensors"
    path.write_bytes(dumps({"m": torch.tensor([True, False])}))
    data = bytearray(path.read_bytes())
    data[-1] = 2  # a BOOL byte that is neither 0 nor 1: the library would take it
    path.write_bytes(bytes(data))
    with pytest.raises(SafetensorsError, match="BOOL"):
        load(path, borrow=True)
    path.write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    assert load(path, borrow=True) == {}

"""A strict, standard-library-only reader and writer for the safetensors format.

Why not the ``safetensors`` package: ``runtime_probe`` must import with the standard library
alone, and user weights must be validated *before* torch's AOTI ``load_constants`` sees them (it
trusts shapes and dtypes blindly and corrupts the heap on a mismatch). torch is imported lazily,
only by the functions that build or consume tensors; ``parse_header``/``read_header`` never do.

Layout: u64 little-endian header length N, N bytes of UTF-8 JSON, then the data buffer. Rules, the
same as the official reader (safetensors 0.8) unless marked *stricter* (where the spec says so):
- the header starts with ``{`` (*stricter*: the spec's MUST; the official reader skips whitespace);
  trailing JSON whitespace is allowed, since writers pad with spaces to an 8-byte boundary;
- no duplicate keys (*stricter*: the spec forbids them, the official reader keeps the last one);
- a tensor entry has exactly dtype, shape, data_offsets (*stricter*: extra keys are not ignored);
- prod(shape) * itemsize == end - begin, where the product overflows at 2**64 (usize) as officially;
- sorted by offsets, each tensor begins where the previous one ended and the last one ends at the
  end of the file: no holes, no overlap, no trailing bytes (so no polyglot files);
- *stricter*: ``load`` refuses BOOL bytes other than 0/1; sub-byte dtypes (F4, F6_*) are refused.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import reprlib
import stat
import struct
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    import torch

__all__ = [
    "DTYPE_TO_TORCH",
    "ITEMSIZE",
    "TORCH_TO_DTYPE",
    "Header",
    "SafetensorsError",
    "TensorInfo",
    "dump",
    "dumps",
    "load",
    "parse_header",
    "read_header",
]

DEFAULT_MAX_HEADER_BYTES = 100 * 1024**2
_U64_END = 2**64  # the official reader parses sizes as usize with checked arithmetic

# In the order of the official Rust ``Dtype`` enum. The writer sorts tensors by this rank, largest
# first, then by name: that aligns every tensor's data to its itemsize (the header is padded to 8)
# and makes our output byte-identical to ``safetensors.torch.save``.
_DTYPES: tuple[tuple[str, str, int], ...] = (
    ("BOOL", "bool", 1),
    ("U8", "uint8", 1),
    ("I8", "int8", 1),
    ("F8_E5M2", "float8_e5m2", 1),
    ("F8_E4M3", "float8_e4m3fn", 1),
    ("F8_E8M0", "float8_e8m0fnu", 1),
    ("F8_E4M3FNUZ", "float8_e4m3fnuz", 1),
    ("F8_E5M2FNUZ", "float8_e5m2fnuz", 1),
    ("I16", "int16", 2),
    ("U16", "uint16", 2),
    ("F16", "float16", 2),
    ("BF16", "bfloat16", 2),
    ("I32", "int32", 4),
    ("U32", "uint32", 4),
    ("F32", "float32", 4),
    ("C64", "complex64", 8),
    ("F64", "float64", 8),
    ("I64", "int64", 8),
    ("U64", "uint64", 8),
)
DTYPE_TO_TORCH: dict[str, str] = {code: name for code, name, _ in _DTYPES}
TORCH_TO_DTYPE: dict[str, str] = {name: code for code, name, _ in _DTYPES}
ITEMSIZE: dict[str, int] = {code: size for code, _, size in _DTYPES}
_RANK = {code: rank for rank, (code, _, _) in enumerate(_DTYPES)}
# Known to the format but packed below one byte: torch cannot view them per element, so we refuse.
_SUB_BYTE = frozenset({"F4", "F6_E2M3", "F6_E3M2"})
_TENSOR_KEYS = frozenset({"dtype", "shape", "data_offsets"})
_META = "__metadata__"


class SafetensorsError(ValueError):
    """The bytes are not a valid safetensors file (or the tensors cannot be written as one)."""


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str  # safetensors code, e.g. "F32"
    shape: tuple[int, ...]
    begin: int  # offsets relative to the data buffer
    end: int

    @property
    def torch_dtype_name(self) -> str:
        return DTYPE_TO_TORCH[self.dtype]


@dataclass(frozen=True)
class Header:
    tensors: dict[str, TensorInfo]  # in header (JSON) order
    metadata: dict[str, str]
    data_start: int  # absolute offset of the buffer in the file
    total_size: int  # data_start + buffer length


# Values come from hostile files: reprlib bounds the cost and length of what a message quotes
# (a plain repr of a 10-million-element shape would itself be the denial of service).
_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxdict, _REPR.maxstring, _REPR.maxother = 3, 8, 4, 80, 80


def _q(value: object) -> str:
    return _REPR.repr(value)


def _fail(message: str) -> NoReturn:
    raise SafetensorsError(message)


def _check_text(text: str, what: str) -> None:
    # json accepts lone "\ud800" escapes; such a str cannot be re-encoded (serde_json rejects it).
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        _fail(f"{what} {_q(text)} contains an unpaired UTF-16 surrogate")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):  # json.loads would silently keep the last one
        dup = next(k for k, count in Counter(k for k, _ in pairs).items() if count > 1)
        _fail(f"duplicate key {_q(dup)} in the header JSON")
    return obj


def _reject_constant(token: str) -> NoReturn:
    _fail(f"header JSON contains {token}, which is not JSON")


def _u64_list(value: object) -> bool:
    # C-level passes (map/min/max), as a shape may hold millions of entries. type() rather than
    # isinstance: JSON true/false arrive as bool, a subclass of int.
    return isinstance(value, list) and set(map(type, value)) <= {int} and (not value or (min(value) >= 0 and max(value) < _U64_END))


def _parse_tensor(name: str, entry: object) -> TensorInfo:
    def fail(problem: str) -> NoReturn:  # quote the name only on failure: reprlib is slow
        _fail(f"tensor {_q(name)}: {problem}")

    if not isinstance(entry, dict):
        fail(f"entry must be an object with dtype, shape, data_offsets, got {_q(entry)}")
    if entry.keys() != _TENSOR_KEYS:
        missing, extra = sorted(_TENSOR_KEYS - entry.keys()), sorted(entry.keys() - _TENSOR_KEYS)
        fail(f"missing keys {missing}, unexpected keys {_q(extra)}")
    dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if not isinstance(dtype, str) or dtype not in ITEMSIZE:
        if isinstance(dtype, str) and dtype in _SUB_BYTE:
            fail(f"sub-byte dtype {dtype} is not supported")
        fail(f"unknown dtype {_q(dtype)}; expected one of {', '.join(ITEMSIZE)}")
    if not _u64_list(shape):
        fail(f"shape must be a list of non-negative integers, got {_q(shape)}")
    if not _u64_list(offsets) or len(offsets) != 2:
        fail(f"data_offsets must be two non-negative integers, got {_q(offsets)}")
    begin, end = offsets
    if end < begin:
        fail(f"data_offsets [{begin}, {end}] end before they begin")
    numel = 1
    # Like the official checked_mul: overflow past 2**64 is an error even if a 0 follows. Ones
    # change nothing; at most 64 other factors pass before an overflow or a 0 ends the loop.
    for dim in filter((1).__ne__, shape):
        numel *= dim
        if numel >= _U64_END:
            fail(f"the number of elements of shape {_q(shape)} overflows 64 bits")
        if not numel:
            break
    nbytes = numel * ITEMSIZE[dtype]  # no u64 check needed: end - begin < 2**64 cannot equal it
    if nbytes != end - begin:
        fail(
            f"shape {_q(shape)} x {dtype} ({ITEMSIZE[dtype]} bytes) needs {nbytes} bytes "
            f"but data_offsets [{begin}, {end}] span {end - begin}"
        )
    return TensorInfo(name, dtype, tuple(shape), begin, end)


def _parse_metadata(entry: object) -> dict[str, str]:
    if entry is None:  # the official reader accepts "__metadata__": null
        return {}
    if not isinstance(entry, dict):
        _fail(f"__metadata__ must be an object of strings, got {_q(entry)}")
    for key, value in entry.items():
        if not isinstance(value, str):
            _fail(f"__metadata__[{_q(key)}] must be a string, got {_q(value)}")
        _check_text(key, "__metadata__ key")
        _check_text(value, f"__metadata__[{_q(key)}]")
    return dict(entry)


def _check_coverage(tensors: dict[str, TensorInfo], buffer_len: int | None) -> int:
    """The tensors must tile the buffer exactly; returns its length."""
    pos, prev = 0, ""
    for info in sorted(tensors.values(), key=attrgetter("begin", "end")):
        if (buffer_len is not None and info.end > buffer_len) or info.begin != pos:
            where = f"tensor {_q(info.name)} (data_offsets [{info.begin}, {info.end}])"
            if buffer_len is not None and info.end > buffer_len:
                _fail(f"{where} runs past the end of the {buffer_len}-byte data buffer: truncated?")
            if info.begin < pos:
                _fail(f"{where} overlaps tensor {_q(prev)}, which ends at {pos}")
            _fail(f"bytes [{pos}, {info.begin}) before {where} belong to no tensor; the data buffer must be fully covered")
        pos, prev = info.end, info.name
    if buffer_len is not None and pos != buffer_len:
        _fail(f"{buffer_len - pos} trailing bytes after the last tensor belong to no tensor; the data buffer must be fully covered")
    return pos


def _check_header_len(n: int, max_header_bytes: int, file_size: int | None) -> None:
    if n > max_header_bytes:
        _fail(f"header length {n} exceeds the limit of {max_header_bytes} bytes")
    if file_size is not None and n > file_size - 8:
        _fail(f"header length {n} exceeds the {file_size}-byte file: truncated or not safetensors")


def _parse_json_header(raw: bytes | bytearray, file_size: int | None) -> Header:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        _fail(f"header is not valid UTF-8 (at header byte {exc.start})")
    if not text.startswith("{"):
        _fail(f"header must start with '{{' (a JSON object), starts with {_q(text[:16])}")
    try:
        obj = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)
    except SafetensorsError:
        raise
    except RecursionError:
        _fail("header JSON is nested too deeply")
    except ValueError as exc:  # JSONDecodeError, or an integer beyond the int-string limit
        _fail(f"header is not valid JSON: {str(exc)[:200]}")
    tensors: dict[str, TensorInfo] = {}
    metadata: dict[str, str] = {}
    for name, entry in obj.items():
        if name == _META:
            metadata = _parse_metadata(entry)
        else:
            _check_text(name, "tensor name")
            tensors[name] = _parse_tensor(name, entry)
    data_start = 8 + len(raw)
    buffer_len = None if file_size is None else file_size - data_start
    return Header(tensors, metadata, data_start, data_start + _check_coverage(tensors, buffer_len))


def parse_header(
    data: bytes | bytearray | memoryview, *, file_size: int | None = None, max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES
) -> Header:
    """Validate the header in ``data`` (at least the first 8 + N bytes of a file).

    With ``file_size`` the offsets must tile the buffer up to exactly that size; without it the
    buffer length is inferred from the offsets (pass ``len(data)`` if ``data`` is the whole file).
    """
    view = memoryview(data).cast("B")
    if len(view) < 8:
        _fail(f"file too short: {len(view)} bytes, but the header length alone takes 8")
    (n,) = struct.unpack_from("<Q", view)
    _check_header_len(n, max_header_bytes, file_size)
    if len(view) < 8 + n:
        _fail(f"header truncated: its length says {n} bytes but only {len(view) - 8} follow")
    return _parse_json_header(bytes(view[8 : 8 + n]), file_size)


def _open(path: str | os.PathLike[str]) -> io.FileIO:
    # Unbuffered, so that not even a read-ahead touches tensor data. O_NONBLOCK, so that opening a
    # FIFO cannot hang; then only regular files pass: the format needs a known size and seeking.
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        _fail(f"{os.fspath(path)!r} is not a regular file")
    return open(fd, "rb", buffering=0)


def _read_exact(f: io.FileIO, n: int, what: str | TensorInfo) -> bytearray:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        chunk = f.readinto(view[got:])
        if not chunk:
            what = what if isinstance(what, str) else f"tensor {_q(what.name)}"
            _fail(f"file truncated while reading {what}: got {got} of {n} bytes")
        got += chunk
    return buf


def _read_header_from(f: io.FileIO, max_header_bytes: int) -> Header:
    size = os.fstat(f.fileno()).st_size
    if size < 8:
        _fail(f"file too short: {size} bytes, but the header length alone takes 8")
    (n,) = struct.unpack("<Q", _read_exact(f, 8, "the header length"))
    _check_header_len(n, max_header_bytes, size)  # before allocating n bytes
    return _parse_json_header(_read_exact(f, n, "the header"), size)


def read_header(path: str | os.PathLike[str], *, max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES) -> Header:
    """Read and validate only the header of the file at ``path`` (never its tensor data)."""
    with _open(path) as f:
        return _read_header_from(f, max_header_bytes)


def _select(header: Header, names: Iterable[str] | None) -> list[TensorInfo]:
    if names is None:
        return list(header.tensors.values())
    wanted = [names] if isinstance(names, str) else list(dict.fromkeys(names))
    for name in wanted:
        if name not in header.tensors:
            _fail(f"no tensor named {_q(name)} in the file (it has {len(header.tensors)} tensors)")
    return [header.tensors[name] for name in wanted]


def _swap_bytes(flat: torch.Tensor, code: str) -> torch.Tensor:
    """Reverse the bytes of each scalar of a flat uint8 tensor (for big-endian hosts)."""
    unit = 4 if code == "C64" else ITEMSIZE[code]  # a complex64 is two little-endian float32s
    return flat if unit == 1 else flat.reshape(-1, unit).flip(1).reshape(-1)


def _to_tensor(info: TensorInfo, buf: bytearray) -> torch.Tensor:
    import torch

    def fail(problem: str) -> NoReturn:  # quote the name only on failure: reprlib is slow
        _fail(f"tensor {_q(info.name)}: {problem}")

    dtype = getattr(torch, info.torch_dtype_name, None)
    if not isinstance(dtype, torch.dtype):
        fail(f"dtype {info.dtype} needs torch.{info.torch_dtype_name}, which this torch lacks")
    try:
        if not buf:  # torch.frombuffer refuses empty buffers
            return torch.empty(info.shape, dtype=dtype)
        raw = torch.frombuffer(buf, dtype=torch.uint8)  # shares (and keeps alive) our bytearray
        if info.dtype == "BOOL" and bool((raw > 1).any()):
            fail("BOOL data holds bytes other than 0 and 1")
        if sys.byteorder == "big":
            raw = _swap_bytes(raw, info.dtype)
        return raw.view(dtype).reshape(info.shape)
    except SafetensorsError:
        raise
    except (RuntimeError, TypeError, ValueError, OverflowError) as exc:
        reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        fail(f"torch cannot build shape {_q(info.shape)} {info.dtype}: {reason}")


def load(
    path_or_bytes: str | os.PathLike[str] | bytes | bytearray | memoryview,
    *,
    names: Iterable[str] | None = None,
    device: str = "cpu",
    borrow: bool = False,
) -> dict[str, torch.Tensor]:
    """Validate the header, then build the (selected) tensors; each owns its memory, unless
    ``borrow``: then, for a file and when the safetensors library imports, the tensors are its
    mmap-backed ones (1.6x faster for a 256 MB file: docs/benchmarks.md), for callers that
    copy them at once (load_constants) or read a private file of their own."""
    out: dict[str, torch.Tensor] = {}
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        view = memoryview(path_or_bytes).cast("B")
        header = parse_header(view, file_size=len(view))
        for info in _select(header, names):
            start, stop = header.data_start + info.begin, header.data_start + info.end
            out[info.name] = _to_tensor(info, bytearray(view[start:stop]))
    else:
        with _open(path_or_bytes) as f:
            header = _read_header_from(f, DEFAULT_MAX_HEADER_BYTES)
            wanted = _select(header, names)
            mapped = _library_load(f, wanted) if borrow else None
            if mapped is not None:
                return {name: t.to(device) for name, t in mapped.items()} if device != "cpu" else mapped
            for info in sorted(wanted, key=lambda t: t.begin):  # read the file front to back
                f.seek(header.data_start + info.begin)
                out[info.name] = _to_tensor(info, _read_exact(f, info.end - info.begin, info))
            out = {info.name: out[info.name] for info in wanted}
    if device != "cpu":
        out = {name: t.to(device) for name, t in out.items()}
    return out


def _library_load(f: io.FileIO, wanted: list[TensorInfo]) -> dict[str, torch.Tensor] | None:
    """The bulk read through the safetensors library, after the strict header check: the library
    opens the very file this descriptor holds (/proc/self/fd), and each tensor's dtype and shape
    must be the ones checked. None when the library is missing or disagrees (then the caller's
    own reader runs)."""
    proc_path = f"/proc/self/fd/{f.fileno()}"
    if not os.path.exists(proc_path) or any(info.dtype == "BOOL" for info in wanted):
        return None  # no /proc; or BOOL data, whose bytes only our reader checks (0 or 1)
    try:
        from safetensors import safe_open

        out = {}
        with safe_open(proc_path, framework="pt", device="cpu") as lib:
            for info in wanted:
                t = lib.get_tensor(info.name)
                if str(t.dtype).removeprefix("torch.") != info.torch_dtype_name or tuple(t.shape) != tuple(info.shape):
                    return None
                out[info.name] = t
        return out
    except Exception:  # noqa: BLE001 - any failure of the optional library: our own reader decides
        return None


def _plan(tensors: Mapping[str, torch.Tensor], metadata: Mapping[str, str] | None) -> tuple[bytes, list[tuple[str, torch.Tensor]]]:
    """Validate the inputs and build the header; returns it and the tensors in file order."""
    import torch

    if not isinstance(tensors, Mapping):
        _fail(f"expected a mapping of names to tensors, got {type(tensors).__name__}")
    entries: list[tuple[int, str, str, torch.Tensor]] = []
    for name, t in tensors.items():
        if not isinstance(name, str) or name == _META:
            _fail(f"invalid tensor name {_q(name)}")
        _check_text(name, "tensor name")
        if not isinstance(t, torch.Tensor) or t.layout != torch.strided or t.is_meta:
            _fail(f"tensor {_q(name)}: expected a dense tensor with data, got {_q(t)}")
        code = TORCH_TO_DTYPE.get(str(t.dtype).removeprefix("torch."))
        if code is None:
            _fail(f"tensor {_q(name)}: dtype {t.dtype} has no safetensors equivalent here")
        entries.append((-_RANK[code], name, code, t))
    entries.sort(key=lambda e: (e[0], e[1]))
    head: dict[str, object] = {}
    if metadata is not None:
        for key, value in metadata.items():
            if not isinstance(key, str) or not isinstance(value, str):
                _fail(f"metadata must map str to str, got {_q(key)}: {_q(value)}")
            _check_text(key, "metadata key")
            _check_text(value, f"metadata[{_q(key)}]")
        head[_META] = dict(sorted(metadata.items()))  # sorted: the official order is random
    pos = 0
    for _, name, code, t in entries:
        nbytes = t.numel() * ITEMSIZE[code]
        head[name] = {"dtype": code, "shape": list(t.shape), "data_offsets": [pos, pos + nbytes]}
        pos += nbytes
    raw = json.dumps(head, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)  # pad so the data buffer starts 8-byte aligned
    return struct.pack("<Q", len(raw)) + raw, [(code, t) for _, _, code, t in entries]


def _plain(t: torch.Tensor) -> torch.Tensor:
    """``t`` on the CPU, dense and row-major, its lazy conj/neg bits applied: the tensor whose
    memory holds the file's bytes (on a little-endian machine)."""
    return t.detach().to("cpu").resolve_conj().resolve_neg().contiguous()


def _tensor_bytes(code: str, t: torch.Tensor) -> bytearray:
    """Little-endian, row-major bytes of ``t``: views, conj/neg bits and devices resolved."""
    import torch

    # contiguous() alone keeps a view's storage offset and a lazy conj/neg bit; copying through
    # torch into a fresh bytearray of exactly numel*itemsize bytes handles every case, quickly.
    t = _plain(t)
    out = bytearray(t.numel() * ITEMSIZE[code])
    if out:
        flat = t.reshape(-1).view(torch.uint8)
        if sys.byteorder == "big":
            flat = _swap_bytes(flat, code)
        torch.frombuffer(out, dtype=torch.uint8).copy_(flat)
    return out


def tensor_bytes(t: torch.Tensor) -> bytearray:
    """The bytes a safetensors file stores for ``t`` (what the manifest's constant hashes cover)."""
    import torch

    code = TORCH_TO_DTYPE.get(str(t.dtype).replace("torch.", ""))
    if code is None:
        raise SafetensorsError(f"dtype {t.dtype} has no safetensors code")
    del torch
    return _tensor_bytes(code, t)


def dumps(tensors: Mapping[str, torch.Tensor], metadata: Mapping[str, str] | None = None) -> bytes:
    """Serialize deterministically, byte-identical to ``safetensors.torch.save``."""
    header, plan = _plan(tensors, metadata)
    return b"".join([header, *(_tensor_bytes(code, t) for code, t in plan)])


def _file_mode(path: str) -> int:
    with contextlib.suppress(OSError):
        return os.stat(path).st_mode & 0o7777  # replacing a file: keep its permissions
    # mkstemp creates 0600; give what open() would. Reading the umask means setting it: set a
    # restrictive one for that instant, so that a racing thread can only err on the safe side.
    umask = os.umask(0o077)
    os.umask(umask)
    return 0o666 & ~umask


def _write_tensor(f: io.BufferedWriter, code: str, t: torch.Tensor) -> None:
    """``_tensor_bytes(code, t)`` written to ``f``, without a second copy in memory where the
    tensor's own bytes are the file's (a contiguous CPU tensor on a little-endian machine)."""
    import ctypes

    t = _plain(t)
    if sys.byteorder == "big" or t.numel() == 0:
        f.write(_tensor_bytes(code, t))
        return
    # the tensor's own memory as a buffer (no numpy: torch does not require it); ``t`` lives
    # until the write returns
    f.write(memoryview((ctypes.c_ubyte * (t.numel() * ITEMSIZE[code])).from_address(t.data_ptr())))


def dump(
    tensors: Mapping[str, torch.Tensor],
    path: str | os.PathLike[str],
    metadata: Mapping[str, str] | None = None,
    *,
    durable: bool = True,
) -> None:
    """Write atomically: a temp file in the same directory, fsync, then os.replace.

    ``durable=False`` skips the fsyncs, for a file a process hands another and removes at once
    (the build's validation child writes each sample's outputs for the build to read back):
    forcing GBs of them to the disk is time for nothing there (docs/gpu-validation.md, run 16)."""
    header, plan = _plan(tensors, metadata)  # validate before touching the filesystem
    target = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(target))
    prefix = f".{os.path.basename(target)}."
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=prefix, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(header)
            for code, t in plan:  # one tensor in memory at a time
                _write_tensor(f, code, t)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.chmod(tmp, _file_mode(target))
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if not durable:
        return
    with contextlib.suppress(OSError):  # persist the rename; not possible on every OS/filesystem
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

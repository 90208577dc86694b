"""One rule for every path a run writes: it never destroys a file the run reads, nor another output.

A run reads files (the build's TARGET, a saved program, the package, its keys, ``--weights``,
``--inputs``) and writes others (``-o``, ``OUT.rejected.pt2``, ``--json``, ``--junit``,
``--log-file``, ``--keep-onnx``, the files ``--save-inputs``/``--save-outputs`` put in their
folders, ``OUT.minify/``). A written path is never a file the run reads, nor the path of another
output: ``--json X --junit X`` would keep one report of the two, ``--json X --log-file X`` would
lose the log, ``--save-inputs DIR`` would overwrite ``DIR/example.inputs.safetensors`` given as
``--inputs``.

Both command lines describe a run as ``Paths`` (``probe_paths`` here; the build's in
``aoti_guard/builder/outputs.py``) and check it before any work; the report writers ask it again
on every way out (passed, failed, a usage error, a tool error, a signal), so an error report never
lands where the run itself would have been refused; and a file written into a folder is checked
once more when its name is known (``check_file``).
"""

from __future__ import annotations

import fnmatch
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from runtime_probe.reporting.errors import UsageError
from runtime_probe.reporting.output import STDOUT, is_stdout, same_path

__all__ = ["STDOUT", "Paths", "Read", "Write", "name_in_folder", "plain_name", "plain_name_problem", "probe_paths", "report_writes"]


@dataclass(frozen=True)
class Read:
    """A file the run reads: it is never written."""

    what: str  # "the package being checked", "the --inputs file"
    path: str


@dataclass(frozen=True)
class Write:
    """A path the run writes. ``names``: the path is a folder the run writes files named like
    this glob into (``*.inputs.safetensors``); None: the path is the file itself."""

    flag: str  # how the user named it: "--json", "-o", "--save-inputs"
    path: str
    names: str | None = None

    def describe(self) -> str:
        return f"{self.flag} {self.path}" if self.names is None else f"{self.flag} {self.path} (files {self.names} in it)"


def _device(path: str) -> bool:
    """An existing character device (``/dev/null``): written twice, no file is lost."""
    try:
        return stat.S_ISCHR(os.stat(path).st_mode)
    except OSError:
        return False


def same_file(a: str, b: str) -> bool:
    """The two paths name one file (symlinks and hard links followed); '-' is only itself."""
    if STDOUT in (a, b):
        return a == b
    return same_path(a, b)


def _in_folder(path: str, folder: str, names: str) -> bool:
    """``path`` is (or would be) a file ``folder``'s writer could produce."""
    if path == STDOUT or folder == STDOUT:
        return False
    parent = os.path.dirname(os.path.abspath(path))
    return same_file(parent, folder) and fnmatch.fnmatchcase(os.path.basename(path), names)


def _clash(w: Write, path: str, names: str | None) -> bool:
    """Whether writing ``w`` would overwrite the file (names None) or the folder's files at ``path``."""
    if w.names is None and names is None:
        return same_file(w.path, path)
    if w.names is None:
        return _in_folder(w.path, path, names or "*") or same_file(w.path, path)
    if names is None:
        return _in_folder(path, w.path, w.names) or same_file(w.path, path)
    # two folders: the same folder, and a name both writers could produce
    return same_file(w.path, path) and (fnmatch.fnmatchcase(names, w.names) or fnmatch.fnmatchcase(w.names, names))


@dataclass(frozen=True)
class Paths:
    """What a run reads and what it writes, in the order it writes (an earlier output wins)."""

    reads: tuple[Read, ...] = ()
    writes: tuple[Write, ...] = ()

    def problems(self) -> list[tuple[Write, str, str]]:
        """(write, what is wrong, hint) for each output that would destroy a read file or an
        earlier output."""
        out: list[tuple[Write, str, str]] = []
        for i, w in enumerate(self.writes):
            for r in self.reads:
                if r.path and _clash(w, r.path, None):
                    out.append((w, f"{w.describe()} would overwrite {r.what} ({r.path})", f"give {w.flag} another path"))
                    break
            else:
                for earlier in self.writes[:i]:
                    both_stdout = w.path == STDOUT and earlier.path == STDOUT
                    if w.path == STDOUT and not both_stdout:
                        continue
                    if not both_stdout and (_device(w.path) or (w.names is None and earlier.names is None and is_stdout(w.path))):
                        continue  # /dev/null twice loses nothing; /dev/stdout is checked as '-'
                    if both_stdout:
                        out.append((w, f"{earlier.flag} - and {w.flag} - both ask for stdout", "send one of them to a file"))
                        break
                    if _clash(w, earlier.path, earlier.names):
                        message = f"{w.describe()} is also {earlier.describe()}: one output would replace the other"
                        out.append((w, message, f"give {w.flag} its own path"))
                        break
        return out

    def check(self) -> None:
        """Refuse (UsageError, exit 2) a run whose outputs would destroy a file: before any work."""
        found = self.problems()
        if found:
            _, message, hint = found[0]
            raise UsageError(message, hint=hint)

    def usable(self, flag: str) -> bool:
        """Whether ``flag``'s output may be written (an error report goes only where it is)."""
        bad = {w.flag for w, _, _ in self.problems()}
        return any(w.flag == flag for w in self.writes) and flag not in bad

    def check_file(self, flag: str, path: str) -> None:
        """A file ``flag`` is about to write (inside its folder): never a read file, nor another
        output's file. Raises UsageError."""
        probe = Paths(self.reads, (*[w for w in self.writes if w.flag != flag], Write(flag, path)))
        for w, message, hint in probe.problems():
            if w.flag == flag:
                raise UsageError(message, hint=hint)


def report_writes(values: Mapping[str, Any]) -> list[Write]:
    """The report and log outputs of either command line (``--json``, ``--junit``, ``--markdown``, ``--log-file``)."""
    return [
        Write(flag, str(values[key]))
        for flag, key in (("--json", "json"), ("--junit", "junit"), ("--markdown", "markdown"), ("--log-file", "log_file"))
        if values.get(key)
    ]


def _str(value: Any) -> str | None:
    return None if value is None or value == "" else os.fspath(value)


def probe_paths(package: str | None, values: Mapping[str, Any], *, reports: bool = True) -> Paths:
    """A probe's reads (the package, --public-key, --weights, --inputs) and writes (--latency-raw,
    the --save-inputs and --save-outputs files, then the reports). ``values``: flag values by their dest names."""
    reads = [
        Read(what, p)
        for what, p in (
            ("the package being checked", _str(package)),
            ("the public key", _str(values.get("public_key"))),
            ("the --weights file", _str(values.get("weights"))),
            ("the --inputs file", _str(values.get("inputs"))),
        )
        if p
    ]
    writes: list[Write] = []
    raw = _str(values.get("latency_raw"))
    if raw:
        writes.append(Write("--latency-raw", raw))
    for flag, key, names in (
        ("--save-inputs", "save_inputs", "*.inputs.safetensors"),
        ("--save-outputs", "save_outputs", "*.outputs.safetensors"),
    ):
        folder = _str(values.get(key))
        if folder:
            writes.append(Write(flag, folder, names))
    return Paths(tuple(reads), tuple([*writes, *(report_writes(values) if reports else [])]))


def merge(*parts: Paths | Iterable[Read]) -> Paths:
    """Several descriptions of one run as one."""
    reads: list[Read] = []
    writes: list[Write] = []
    for p in parts:
        if isinstance(p, Paths):
            reads += p.reads
            writes += p.writes
        else:
            reads += list(p)
    return Paths(tuple(reads), tuple(writes))


# --- Names that become file names -------------------------------------------------------------
# A name read from a package, a manifest or a caller (a golden sample's id, a model's name, a
# user sample's file stem) becomes a file name only through these two functions: the checking
# one refuses (the caller turns the reason into a finding), the deriving one makes a name the
# first accepts. Letters, digits, '_', '.' and '-' only: no separator, no '..', no control or
# look-alike character; no leading '.' (a hidden file, '.', '..') or '-' (an option to the tool
# that is handed the file); bounded, so a prefix and a suffix still fit a file system's 255 bytes.

MAX_NAME = 128
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")


def plain_name_problem(name: str) -> str | None:
    """Why ``name`` may not become a file name inside a folder; None when it may.

    The reason reads after the name: ``'../x' holds a path separator``.
    """
    if not isinstance(name, str) or not name:
        return "is empty"
    if len(name) > MAX_NAME:
        return f"is {len(name)} characters long (at most {MAX_NAME})"
    if "/" in name or "\\" in name:
        return "holds a path separator"
    if not name.isprintable():
        return "holds a control character"
    if name[0] == ".":
        return "starts with a dot"
    if name[0] == "-":
        return "starts with a dash (a command would take it for an option)"
    bad = next((c for c in name if c not in _NAME_CHARS), None)
    if bad is not None:
        return f"holds {bad!a} (a file name takes letters, digits, '_', '.' and '-' only)"
    return None


def plain_name(text: str, fallback: str, *, limit: int = MAX_NAME) -> str:
    """``text`` made into a name ``plain_name_problem`` accepts: each run of other characters
    becomes '_', '.', '_' and '-' at either end go, at most ``limit`` characters; ``fallback``
    (itself plain) when nothing is left."""
    out: list[str] = []
    for c in text:
        if c in _NAME_CHARS:
            out.append(c)
        elif not out or out[-1] != "_":
            out.append("_")
    name = "".join(out).strip("._-")[: min(limit, MAX_NAME)].rstrip("._-")
    return name if name and plain_name_problem(name) is None else fallback


def name_in_folder(folder: str, name: str, *, prefix: str = "", suffix: str = "") -> str:
    """``folder/PREFIX NAME SUFFIX`` for a ``name`` that passed ``plain_name_problem``, never a path
    outside ``folder``. ``prefix`` and ``suffix`` are the caller's own plain text (``cuda0.``,
    ``.inputs.safetensors``).

    Raises:
        ValueError: ``name`` is not plain. Callers refuse such names earlier (the manifest's rules
            refuse a golden sample id that is not plain): reaching this is a bug of our own.
    """
    why = plain_name_problem(name)
    if why is not None:
        raise ValueError(f"the file name {name[:80]!r} {why}")
    return os.path.join(folder, prefix + name + suffix)

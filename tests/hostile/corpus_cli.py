"""Hostile cases aimed at the command line and the terminal rather than the zip (issue 16, items 4,
6 and 7): report paths that name a file the run reads, FIFOs given as inputs, names that carry
terminal escapes, and a manifest whose hash list would flood the report.

Every case runs through the same runner as the rest of the corpus, which also checks for all of
them that no input file changed (``Outcome.lost``), that no raw control character reached the
output (``Outcome.raw_control``) and that the report stayed small (``Outcome.report_bytes``).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime_probe.runtime import layout

if TYPE_CHECKING:
    from .make_corpus import _Corpus

GROUP = "command line"
Rewrite = Callable[[Path, Path, Callable[[str, bytes], Any]], Path]


def _copy(c: _Corpus, name: str) -> Path:
    """A case's own copy of the package: a case that destroyed its input must not take the
    corpus's source with it."""
    path = c.out / f"{name}.pt2"
    shutil.copyfile(c.source, path)
    return path


def add_cases(c: _Corpus, rewrite: Rewrite) -> None:
    _report_paths(c)
    _write_paths(c)
    _fifos(c)
    _terminal_and_size(c, rewrite)


def _report_paths(c: _Corpus) -> None:
    for flag in ("--json", "--junit"):
        pkg = _copy(c, f"cli-{flag[2:]}-over-package")
        c.add_existing(pkg.stem, GROUP, pkg, set(), f"{flag} names the package being checked", (flag, str(pkg)), exit_code=2)
    pkg = _copy(c, "cli-json-over-package-via-symlink")
    link = c.out / "cli-report-link.json"
    link.unlink(missing_ok=True)
    link.symlink_to(pkg)
    c.add_existing(pkg.stem, GROUP, pkg, set(), "--json is a symlink to the package", ("--json", str(link)), exit_code=2)
    if c.keys is not None:
        key = c.out / "cli-release.pub"
        shutil.copyfile(c.keys.public, key)
        pkg = _copy(c, "cli-json-over-public-key")
        args = ("--public-key", str(key), "--json", str(key))
        c.add_existing(pkg.stem, GROUP, pkg, set(), "--json names the --public-key file", args, exit_code=2)


def _write_paths(c: _Corpus) -> None:
    """Issue 25, defect 4: one rule for every path the probe writes (runtime_probe/reporting/paths.py). Each
    of these is refused with exit 2 before any work; the file it names is unchanged."""
    saved = c.out / "cli-saved"
    saved.mkdir(exist_ok=True)
    captured = saved / "example.inputs.safetensors"  # what an earlier --save-inputs wrote, replayed
    captured.write_bytes(b"a captured request: must survive")
    weights = saved / "new.outputs.safetensors"
    weights.write_bytes(b"weights named like a saved output: must survive")
    for name, args, what in (
        (
            "cli-save-inputs-over-inputs",
            ("--inputs", str(captured), "--save-inputs", str(saved)),
            "--save-inputs would write example.inputs.safetensors over --inputs",
        ),
        (
            "cli-save-outputs-over-weights",
            ("--weights", str(weights), "--save-outputs", str(saved)),
            "--save-outputs into the folder of a --weights file named *.outputs.safetensors",
        ),
        ("cli-log-file-over-inputs", ("--inputs", str(captured), "--log-file", str(captured)), "--log-file names the --inputs file"),
        (
            "cli-junit-and-log-file-one-file",
            ("--junit", str(c.out / "cli-one.xml"), "--log-file", str(c.out / "cli-one.xml")),
            "--junit and --log-file name one file",
        ),
        (
            "cli-parse-error-junit-over-inputs",
            ("--inputs", str(captured), "--junit", str(captured), "--no-such-flag"),
            "a command line that does not parse, with --junit over --inputs",
        ),
    ):
        c.add_existing(name, GROUP, _copy(c, name), "tool.usage", what, args, exit_code=2)
    pkg = _copy(c, "cli-json-over-inputs")
    c.add_existing(
        pkg.stem, GROUP, pkg, set(), "--json names the --inputs file", ("--inputs", str(captured), "--json", str(captured)), exit_code=2
    )


def _fifos(c: _Corpus) -> None:
    for flag in ("--public-key", "--weights", "--inputs"):
        fifo = c.out / f"cli-{flag[2:]}.fifo"
        if not fifo.exists():
            os.mkfifo(fifo)
        c.add_existing(
            f"cli-fifo-as-{flag[2:]}", GROUP, c.source, "tool.usage", f"a FIFO with no writer as {flag}", (flag, str(fifo)), exit_code=2
        )


def _terminal_and_size(c: _Corpus, rewrite: Rewrite) -> None:
    model_dir = f"{c.root}/data/aotinductor/model"

    def adding(name: str) -> Callable[[str, bytes], list[tuple[str, bytes]]]:
        def edit(entry: str, data: bytes) -> list[tuple[str, bytes]]:
            return [(entry, data), (name, b"x")] if entry.endswith("archive_format") else [(entry, data)]

        return edit

    for label, name, what in (
        ("ansi-clear", f"{model_dir}/\x1b[2J\x1b[HPASSED.so", "an entry name that clears the screen and prints PASSED"),
        ("bidi-override", f"{model_dir}/evil\u202eos.txt", "an entry name with a right-to-left override (U+202E)"),
        ("newline", f"{model_dir}/x\nPASSED: 0 error(s).so", "an entry name with a newline that fakes the verdict"),
    ):
        c.add(
            f"cli-name-{label}",
            GROUP,
            rewrite(c.source, c.out / "tmp.pt2", adding(name)),
            {"archive.hash_mismatch", "archive.unsafe_entry"},
            what,
        )

    def many_missing(entry: str, data: bytes) -> bytes:
        if not entry.endswith(layout.MANIFEST):
            return data
        m = json.loads(data)
        m["hashes"].update({f"data/gone/{i:06d}.bin": "0" * 64 for i in range(150_000)})
        return json.dumps(m).encode()

    c.add(
        "cli-hashes-150k-missing",
        GROUP,
        rewrite(c.source, c.out / "tmp.pt2", many_missing),
        "archive.hash_mismatch",
        "a manifest listing 150,000 entries that do not exist (the report must stay small)",
    )

"""A file of named inputs: a safetensors file whose tensors are named by the contract's input names.

One reader for everything that takes such a file: ``probe --inputs`` (a captured request to
replay) and ``aoti-guard build --samples`` (golden samples of the user's own). Only the header is
read (standard library), and the names are checked against the contract's tensor inputs before
any tensor data is, so a wrong file is refused in milliseconds whatever its size.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from runtime_probe.formats import safetensors as _safetensors
from runtime_probe.formats.safetensors import Header
from runtime_probe.package.manifest import InputSpec

__all__ = ["WRITE_HINT", "InputsFileError", "check_names", "read_inputs_header"]

WRITE_HINT = "write it with safetensors.torch.save_file({name: tensor}, path), one tensor per input, named as the model's inputs"


class InputsFileError(Exception):
    """The file cannot be used as named inputs: what failed, expected vs found, and a hint."""

    def __init__(
        self, message: str, *, hint: str, expected: str | None = None, found: str | None = None, argument: str | None = None
    ) -> None:
        super().__init__(message)
        self.message, self.hint, self.expected, self.found, self.argument = message, hint, expected, found, argument


def check_names(found: Iterable[str], inputs: Sequence[InputSpec], what: str) -> list[str]:
    """The names in ``found`` that the model does not take (the caller decides whether that is an
    error); raises InputsFileError naming the inputs ``found`` lacks. ``inputs``: the contract's
    tensor inputs; ``what`` names the file in messages, its path included (``--inputs req.safetensors``)."""
    names = [i.name for i in inputs]
    have = list(found)
    missing = [n for n in names if n not in have]
    if missing:
        raise InputsFileError(
            f"{what} lacks {', '.join(missing)}",
            expected=", ".join(names),
            found=", ".join(have) or "nothing",
            hint="name each tensor after the model's input (aoti-guard inspect PKG lists them)",
            argument=missing[0],
        )
    return sorted(set(have) - set(names))


def read_inputs_header(path: str, inputs: Sequence[InputSpec], what: str) -> tuple[Header, list[str]]:
    """The header of the file at ``path`` and the names in it the model does not take.

    Raises:
        InputsFileError: no such file, a folder, not a safetensors file, or an input missing.
    """
    if not os.path.exists(path):
        raise InputsFileError(f"{what}: no such file", expected="a .safetensors file", found="nothing", hint=WRITE_HINT)
    if os.path.isdir(path):
        raise InputsFileError(f"{what} is a folder", expected="a .safetensors file", found="a folder", hint=WRITE_HINT)
    try:
        header = _safetensors.read_header(path)
    except _safetensors.SafetensorsError as exc:
        raise InputsFileError(
            f"{what} cannot be read: {exc}", expected="a safetensors file", found="not a valid safetensors file", hint=WRITE_HINT
        ) from None
    except OSError as exc:
        raise InputsFileError(
            f"{what} cannot be read: {exc.strerror or exc}", expected="a readable file", found=path, hint="check its permissions"
        ) from None
    return header, check_names(header.tensors, inputs, what)

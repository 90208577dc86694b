"""The exception tree of runtime_probe and aoti-guard.

A mismatch between a package and its contract is a *finding* (data, see findings.py). An exception
means the tool could not check something: bad usage (exit 2) or a failure of the tool or its
environment (exit 3). Bugs of our own are deliberately NOT in this tree, so the CLI can tell them
apart and say "this is a bug" instead of blaming the user.
"""

from __future__ import annotations

import errno
from collections.abc import Sequence

from runtime_probe.reporting.escaping import for_terminal

__all__ = [
    "GuardError",
    "InputContractError",
    "OutputContractError",
    "PackageRejected",
    "ToolError",
    "UsageError",
    "environment_error",
]


class GuardError(Exception):
    """Root of the errors the tool expects and explains. Carries an exit code and a hint.

    Its message and hint are printable text (``for_terminal``): they quote names from a caller's
    file or a package (a tensor in ``--samples``, a manifest key, an argument's name) and reach a
    terminal, a serving log (``PackageRejected``, ``InputContractError``) or a report, where an
    escape or a carriage return would clear the screen or fake a line of its own."""

    exit_code: int = 3

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        message, hint = for_terminal(message), None if hint is None else for_terminal(hint)
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"

    def __reduce__(self) -> tuple[object, ...]:
        # Survive a process boundary (pickling) with the hint intact.
        return (_rebuild, (type(self), self.message, self.hint, self.__dict__))


def _rebuild(cls: type[GuardError], message: str, hint: str | None, state: dict[str, object]) -> GuardError:
    err = cls.__new__(cls)
    Exception.__init__(err, message)
    err.__dict__.update(state)
    err.message, err.hint = message, hint
    return err


class UsageError(GuardError):
    """The user asked for something impossible: bad arguments, a missing file. Exit code 2."""

    exit_code = 2


class ToolError(GuardError):
    """The tool itself could not run (missing dependency, unwritable output, engine down). Exit 3.

    ``code``: the finding code that names the cause where one does (``env.tmpdir_unusable``,
    ``env.torch_missing``); a report of this error carries it instead of ``tool.failed``."""

    exit_code = 3

    def __init__(self, message: str, *, hint: str | None = None, code: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.code = code


class _ContractError(GuardError):
    """A call or a load broke the package's contract (exit code 1): the finding ``code``, and
    short renderings of what the contract says (``expected``) and what was given (``found``).
    Each subclass names what broke it: an argument, an output, a constant."""

    exit_code = 1

    def __init__(self, message: str, *, code: str, expected: str | None = None, found: str | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.code = code
        self.expected = expected
        self.found = found


class InputContractError(_ContractError, ValueError):
    """A call to a guarded model broke the package's input contract; raised before native code runs.

    Attributes:
        code: the finding code (``input.dtype``, ``input.shape``, ``input.range``...).
        argument: the argument's name as in the model's forward signature (``x``, ``xs[1]``).
        expected / found: short renderings of what the contract says and what was passed.
    """

    def __init__(self, message: str, *, code: str, argument: str | None, **details: str | None) -> None:
        super().__init__(message, code=code, **details)
        self.argument = argument


class OutputContractError(_ContractError):
    """A guarded model's native call returned an output where the package's manifest says it
    cannot be: raised after the call, instead of handing the caller the output (a tensor left on
    the wrong device, pytorch#152130's class, fails later, far from the model, or is silently
    copied back by whoever reads it).

    Attributes:
        code: the finding code (``output.device``).
        output: the output's name in the manifest (``output[1]``, ``logits``).
        expected / found: where the manifest says it lives and where it came back (``cpu``, ``cuda:0``).
    """

    def __init__(self, message: str, *, code: str, output: str, **details: str | None) -> None:
        super().__init__(message, code=code, **details)
        self.output = output


class PackageRejected(GuardError):
    """The guarded loader refused a package before opening its native code (bad archive, hashes,
    signature, or no manifest to guard with). ``findings`` says why. Exit code 1."""

    exit_code = 1

    def __init__(self, message: str, findings: Sequence[object], *, hint: str | None = None) -> None:
        # a serving log shows the message alone: the first error's code and reason go in it (issue
        # 44: "is not a usable package" with the reason only in .findings), its hint when none given
        self.findings = list(findings)
        errors = [f for f in self.findings if str(getattr(getattr(f, "severity", None), "value", "")) == "error"]
        if errors:
            first = errors[0]
            more = f" (and {len(errors) - 1} more error(s) in .findings)" if len(errors) > 1 else ""
            message = f"{message}: {getattr(first, 'code', '?')}: {getattr(first, 'message', first)}{more}"
            hint = hint if hint is not None else getattr(first, "hint", None)
        super().__init__(message, hint=hint)


class ConstantsContractError(_ContractError, ValueError):
    """New weights for a guarded model break its contract; raised BEFORE torch's load_constants,
    which checks neither shapes nor dtypes and corrupts memory on a mismatch.

    Attributes:
        code: ``constants.missing``, ``constants.unexpected``, ``constants.shape_mismatch``,
            ``constants.dtype_mismatch`` or ``constants.device_mismatch``.
        constant: the constant's FQN (``lin.weight``).
    """

    def __init__(self, message: str, *, code: str, constant: str | None, **details: str | None) -> None:
        super().__init__(message, code=code, **details)
        self.constant = constant


_FULL = {errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded"}


def environment_error(exc: BaseException) -> ToolError | None:
    """The ToolError for an exception the machine caused rather than the tool: a full disk.

    The GPU zoo ran nine full-size builds on a 64 GB disk; the ones that hit the full disk in
    the build process itself ended as "failed unexpectedly (a bug)", sending the user to us
    instead of to the disk."""
    if isinstance(exc, OSError) and exc.errno in _FULL:
        where = exc.filename if isinstance(exc.filename, str) else None
        return ToolError(
            f"{_FULL[exc.errno]}" + (f" writing {where}" if where else ""),
            hint="free disk space where the run writes: the output's folder (the build's work folder is "
            "made beside -o), TMPDIR, and Inductor's cache (TORCHINDUCTOR_CACHE_DIR); a full-size build "
            "needs several times its package's size",
        )
    return None

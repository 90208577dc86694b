"""Issue 40, finding 9: the build's error path prints no control character from a caller's file.

A ``--samples`` file's path or tensor name, a TARGET path, a flag's value or a package's manifest
key reached the terminal raw in ``error: ...`` (ESC clears the screen and paints a green "BUILD
PASSED"; CR overwrites the line; U+202E reverses it). The CLI's one error handler prints every
line through ``for_terminal``; every GuardError's message and hint are printable from the start,
so a serving log that writes ``PackageRejected`` gets the same."""

from __future__ import annotations

from pathlib import Path

import pytest

from aoti_guard.cli import main
from runtime_probe.reporting.errors import GuardError, InputContractError, PackageRejected, ToolError, UsageError

HOSTILE = "x\x1b[2J\x1b[32mBUILD PASSED\x1b[0m\r\u202eevil\nnext"


def _raw_control(text: str) -> list[str]:
    return [c for c in text if c != "\n" and not c.isprintable()]


def test_a_samples_path_with_escapes_is_printed_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["build", "-o", str(tmp_path / "out.pt2"), "--samples", str(tmp_path / f"{HOSTILE}.safetensors")])
    err = capsys.readouterr().err
    assert code == 2
    assert "no such file" in err
    assert not _raw_control(err), err
    assert "\\x1b[2J" in err and "\\u202e" in err
    assert "\nnext" not in err, "a line break in the name stays inside its line"


def test_a_flag_value_with_escapes_is_printed_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["build", "-o", str(tmp_path / "out.pt2"), "--device", HOSTILE])
    err = capsys.readouterr().err
    assert code == 2
    assert not _raw_control(err), err
    assert "\nnext" not in err


def test_a_click_error_quoting_the_value_is_printed_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["build", "--twin-schedule", HOSTILE])
    err = capsys.readouterr().err
    assert code == 2
    assert "Usage:" in err and "Error:" in err
    assert not _raw_control(err), err


@pytest.mark.parametrize("cls", [GuardError, UsageError, ToolError])
def test_every_guard_error_is_printable(cls: type[GuardError]) -> None:
    exc = cls(f"cannot read {HOSTILE}", hint=f"rename {HOSTILE}")
    assert exc.message.isprintable() and exc.hint is not None and exc.hint.isprintable()
    assert str(exc).count("\n") == 1  # the hint's own line


def test_package_rejected_is_printable_for_a_serving_log() -> None:
    exc = PackageRejected(f"pkg.pt2 failed its archive checks: archive.unlisted: {HOSTILE}", [])
    assert str(exc).isprintable()
    assert "\\x1b[2J" in str(exc)


def test_input_contract_error_is_printable_for_a_serving_log() -> None:
    exc = InputContractError(f"{HOSTILE}: dim 0 is 9", code="input.shape", argument=HOSTILE)
    assert str(exc).isprintable()


def test_a_printable_message_is_kept_as_it_is() -> None:
    assert UsageError("tensor 'x' (expected a, found b)", hint="h: ünïcode ok").message == "tensor 'x' (expected a, found b)"

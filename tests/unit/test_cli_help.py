"""The command lines' help text as a user reads it (no markup left over)."""

from __future__ import annotations

from click.testing import CliRunner

from aoti_guard.cli import cli


def test_build_help_reads_plainly() -> None:
    text = CliRunner().invoke(cli, ["build", "--help"], terminal_width=100).output
    assert "torch._inductor.aoti_load_package" in text and "\\_" not in text
    assert "--key KEY" in text and "--sign-key" not in text  # the deprecated spelling is hidden
    assert "--markdown PATH" in text and "a missing folder is created" in " ".join(text.split())


def test_every_command_takes_json_path() -> None:
    for command in ("build", "probe", "inspect", "diff"):
        text = CliRunner().invoke(cli, [command, "--help"], terminal_width=100).output
        assert "--json PATH" in text, command


def test_references_help_teaches_the_rotation() -> None:
    """Issue 43: the help says what TARGET is, that OUT is unsigned and how to sign it, and the three commands in order."""
    text = CliRunner().invoke(cli, ["references", "--help"], terminal_width=100).output
    assert "TARGET is the factory PACKAGE was built from" in text and "aoti-guard sign OUT.pt2 --key KEY" in text
    lines = [line.strip() for line in text.splitlines()]
    first = lines.index("aoti-guard references model.pt2 model.py:make --weights new.safetensors -o model-new.pt2")
    assert lines[first + 1].startswith("aoti-guard sign model-new.pt2") and lines[first + 2].startswith("aoti-guard probe model-new.pt2")
    assert "references" in CliRunner().invoke(cli, ["--help"], terminal_width=100).output

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

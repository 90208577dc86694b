"""docs/ci.md stays true: its YAML parses, and every aoti-guard / runtime_probe command line in it
uses only options those commands have (a renamed flag fails here, not in a user's pipeline)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from aoti_guard.cli import cli
from runtime_probe.cli import build_parser

DOC = Path(__file__).resolve().parents[2] / "docs" / "ci.md"


def _commands() -> list[list[str]]:
    yaml = pytest.importorskip("yaml")
    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) == 2, "docs/ci.md: a GitHub Actions and a GitLab CI block"
    lines: list[str] = []
    for block in blocks:
        data = yaml.safe_load(block)
        for job in data.values() if "jobs" not in data else data["jobs"].values():
            if not isinstance(job, dict):
                continue
            lines += [s.get("run", "") for s in job.get("steps", []) if isinstance(s, dict)]
            lines += job.get("script", [])
    commands = []
    for text in lines:
        for line in text.replace("\\\n", " ").splitlines():
            words = shlex.split(line)
            if words[:1] == ["aoti-guard"] or words[:3] == ["python", "-m", "runtime_probe"]:
                commands.append(words)
    return commands


def test_ci_commands_use_real_options() -> None:
    commands = _commands()
    assert any(w[:2] == ["aoti-guard", "build"] for w in commands) and any(w[:3] == ["python", "-m", "runtime_probe"] for w in commands)
    probe_options = {o for a in build_parser()._actions for o in a.option_strings}
    for words in commands:
        if words[0] == "aoti-guard":
            command = cli.commands[words[1]]
            known = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
            args = words[2:]
        else:
            known, args = probe_options, words[3:]
        unknown = [w for w in args if w.startswith("-") and w != "-" and w.split("=")[0] not in known]
        assert not unknown, f"docs/ci.md: {' '.join(words)}: no such option {unknown}"
    assert any("--strict" in w and "--markdown" in w for w in commands)

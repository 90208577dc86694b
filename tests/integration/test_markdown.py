"""--markdown on build and probe, and the summary appended to $GITHUB_STEP_SUMMARY: a real build's
warning with its hint and margin line, a probe's phase table, two runs appended to one page."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import MODELS, Built, run_cli, run_probe

pytestmark = pytest.mark.integration


def test_build_and_probe_markdown_and_step_summary(static_pkg: Built, tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("# CI run\n\n")
    env = {"GITHUB_STEP_SUMMARY": str(summary)}
    out, md = tmp_path / "model.pt2", tmp_path / "reports" / "build.md"
    md.parent.mkdir()
    built = run_cli("build", f"{MODELS}:static", "-o", str(out), "--no-debug-twin", "--markdown", str(md), env=env)
    assert built.returncode == 0, built.stderr[-3000:]
    text = md.read_text()
    assert text.startswith("### build `model.pt2`: PASSED\n")
    assert "| `compile` | passed |" in text and "| `debug_twin` | skipped: --no-debug-twin |" in text
    assert "margin output: worst \\|compiled - eager\\|" not in text  # details are in a code block, unescaped
    assert "validate: margin output: worst |compiled - eager|" in text
    if "build.isa_beyond_baseline" in built.stdout + built.stderr:  # an AVX-512 build host: the warning and its hint
        assert "- **warning** `build.isa_beyond_baseline` (compile):" in text and "hint: build with --cpu-isa" in text

    probe_md = tmp_path / "probe.md"
    probe = run_probe(str(static_pkg.path), "--fast", "--iterations", "12", "--markdown", str(probe_md), "-q", env=env)
    assert probe.returncode == 0, probe.stderr[-3000:]
    ptext = probe_md.read_text()
    assert ptext.startswith(f"### probe `{static_pkg.path.name}`: PASSED\n")
    assert "| `archive` | passed |" in ptext and "| `escalate` | skipped: nothing to escalate |" in ptext
    assert "golden: latency example: p50 " in ptext and "p95 omitted (needs 20 runs)" in ptext

    page = summary.read_text()  # appended: what was there, then the build's section, then the probe's
    assert page.startswith("# CI run\n\n### build `model.pt2`: PASSED") and page.endswith(ptext)
    assert page.count("### ") == 2


def test_two_reports_on_stdout_is_a_usage_error(static_pkg: Built) -> None:
    for extra in (["--json", "-", "--markdown", "-"], ["--junit", "-", "--markdown", "-"], ["--json", "-", "--junit", "-"]):
        proc = run_probe(str(static_pkg.path), "--verify-only", *extra)
        assert proc.returncode == 2 and "both ask for stdout" in proc.stderr, (extra, proc.stderr)

"""tests/tools/cxx_memo/g++, the compiler every process of a test run uses (tests/conftest.py):
a repeated compile of the same generated source with the same flags is served from the run's
memo; everything else reaches the real compiler unchanged."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import CXX_MEMO

# a stand-in for g++: logs its argv, and for -c writes an object naming the source's first line
FAKE_CXX = r"""#!/usr/bin/env bash
echo "$*" >> "$FAKE_LOG"
out=""; src=""; prev=""
for a in "$@"; do [ "$prev" = "-o" ] && out=$a; case "$a" in *.cpp) src=$a ;; esac; prev=$a; done
[ -n "${FAKE_FAIL:-}" ] && { echo "error: injected" >&2; exit 1; }
[ -n "$out" ] && { echo "object of $(head -1 "$src")" > "$out"; }
exit 0
"""


@pytest.fixture
def cxx(tmp_path: Path) -> dict[str, str]:
    fake = tmp_path / "real-g++"
    fake.write_text(FAKE_CXX)
    fake.chmod(0o755)
    return {
        **os.environ,
        "AOTI_GUARD_TEST_REAL_CXX": str(fake),
        "AOTI_GUARD_TEST_CXX_MEMO_DIR": str(tmp_path / "memo"),
        "FAKE_LOG": str(tmp_path / "calls.log"),
    }


def run(env: dict[str, str], *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CXX_MEMO), *map(str, args)], env=env, capture_output=True, text=True, timeout=60)


def calls(env: dict[str, str]) -> list[str]:
    log = Path(env["FAKE_LOG"])
    return log.read_text().splitlines() if log.exists() else []


def test_a_repeated_compile_is_served_from_the_memo_despite_torchs_appended_command(cxx: dict[str, str], tmp_path: Path) -> None:
    cxx = {**cxx, "AOTI_GUARD_TEST_CXX_MEMO_LOG": str(tmp_path / "memo.log")}
    src = tmp_path / "abc.wrapper.cpp"
    src.write_text("int f() { return 1; }\n")
    assert run(cxx, src, "-O1", "-c", "-o", tmp_path / "a.o").returncode == 0
    # what Inductor does after a compile: the command goes on the end of the source as comments
    src.write_text("int f() { return 1; }\n\n// Compile cmd\n// g++ abc.wrapper.cpp -O1 -c -o a.o\n")
    assert run(cxx, src, "-O1", "-c", "-o", tmp_path / "b.o").returncode == 0
    assert len(calls(cxx)) == 1  # the second compile never reached the compiler
    assert (tmp_path / "b.o").read_text() == (tmp_path / "a.o").read_text() == "object of int f() { return 1; }\n"
    assert [line.split()[0] for line in (tmp_path / "memo.log").read_text().splitlines()] == ["miss", "hit"]


@pytest.mark.parametrize(
    ("second_source", "second_flags"),
    [
        ("int f() { return 2; }\n", ["-O1"]),  # other code
        ("int f() { return 1; }\n", ["-O3"]),  # other flags
        ("// a comment before the code moves its lines\nint f() { return 1; }\n", ["-O1"]),  # only the end's comments are ignored
    ],
)
def test_other_code_or_other_flags_compile_again(cxx: dict[str, str], tmp_path: Path, second_source: str, second_flags: list[str]) -> None:
    src = tmp_path / "m.cpp"
    src.write_text("int f() { return 1; }\n")
    run(cxx, src, "-O1", "-c", "-o", tmp_path / "a.o")
    src.write_text(second_source)
    assert run(cxx, src, *second_flags, "-c", "-o", tmp_path / "b.o").returncode == 0
    assert len(calls(cxx)) == 2


def test_links_version_queries_and_failures_go_to_the_compiler_every_time(cxx: dict[str, str], tmp_path: Path) -> None:
    src = tmp_path / "m.cpp"
    src.write_text("int f();\n")
    for _ in range(2):
        run(cxx, "--version")
        run(cxx, tmp_path / "a.o", "-shared", "-o", tmp_path / "m.so")
    assert len(calls(cxx)) == 4
    failed = run({**cxx, "FAKE_FAIL": "1"}, src, "-c", "-o", tmp_path / "x.o")
    assert failed.returncode == 1 and "injected" in failed.stderr
    assert not (tmp_path / "memo").exists() or not any((tmp_path / "memo").iterdir())  # a failure is not remembered
    assert run(cxx, src, "-c", "-o", tmp_path / "x.o").returncode == 0
    assert len(calls(cxx)) == 6


def test_without_a_memo_folder_it_is_the_real_compiler(cxx: dict[str, str], tmp_path: Path) -> None:
    env = {k: v for k, v in cxx.items() if k != "AOTI_GUARD_TEST_CXX_MEMO_DIR"}
    src = tmp_path / "m.cpp"
    src.write_text("int f();\n")
    for _ in range(2):
        assert run(env, src, "-c", "-o", tmp_path / "a.o").returncode == 0
    assert len(calls(env)) == 2


def test_the_test_run_compiles_through_it() -> None:
    # tests/conftest.py's session fixture: what every build a test starts inherits
    if os.environ.get("AOTI_GUARD_TEST_CXX_MEMO") == "0":
        assert os.environ.get("CXX") != str(CXX_MEMO)  # turned off: the compiler the caller had
        return
    assert os.environ["CXX"] == str(CXX_MEMO)
    assert Path(os.environ["AOTI_GUARD_TEST_CXX_MEMO_DIR"]).name == "cxx-memo"

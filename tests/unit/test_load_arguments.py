"""Issue 40, finding 15: ``runtime_probe.load`` checks its arguments before it reads anything.

``load("a\\0b")`` raised a bare ``ValueError: embedded null byte`` from deep inside the copy, and a
path of another type a bare ``TypeError``; a bad ``check_values`` was found only after the model
was loaded. Each is now a UsageError that names the argument, what it is and what to pass."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import runtime_probe
from runtime_probe.reporting.errors import UsageError

MISSING = "/nonexistent/model.pt2"


@pytest.mark.parametrize(
    ("args", "kwargs", "said"),
    [
        (("a\0b",), {}, "path 'a\\x00b' holds a NUL character"),
        ((b"a\0b",), {}, "holds a NUL character"),
        ((123,), {}, "path must be a path, not int"),
        ((None,), {}, "path must be a path, not NoneType"),
        (("",), {}, "path is empty"),
        ((MISSING,), {"device": 0}, "device must be a str, not int"),
        ((MISSING,), {"model": None}, "unknown model None"),
        ((MISSING,), {"model": "twin"}, "unknown model 'twin'"),
        ((MISSING,), {"verify": "yes"}, "verify must be a bool, not str"),
        ((MISSING,), {"check_values": "bogus"}, "unknown check_values 'bogus'"),
        ((MISSING,), {"public_key": "k\0.pub"}, "public_key 'k\\x00.pub' holds a NUL character"),
        ((MISSING,), {"public_key": 7}, "public_key must be a path, not int"),
        # the options are one LoadOptions (issue 41): a name load does not have is refused by name
        ((MISSING,), {"num_runner": 2}, "unknown option 'num_runner' (did you mean 'num_runners'?)"),
        ((MISSING,), {"devices": "cpu"}, "unknown option 'devices'"),
    ],
)
def test_a_bad_argument_is_a_usage_error_before_anything_is_read(args: tuple[Any, ...], kwargs: dict[str, Any], said: str) -> None:
    with pytest.raises(UsageError) as caught:
        runtime_probe.load(*args, **kwargs)
    assert said in caught.value.message
    assert caught.value.hint


def test_a_path_of_bytes_or_pathlib_is_taken(tmp_path: Path) -> None:
    for path in (str(tmp_path / "none.pt2").encode(), tmp_path / "none.pt2"):
        with pytest.raises(UsageError, match="no such package"):
            runtime_probe.load(path)  # type: ignore[arg-type]


def test_every_documented_option_is_one_load_takes() -> None:
    """LoadOptions and its defaults name the same options, and the docstring documents each."""
    from runtime_probe.guard.load import _DEFAULTS, LoadOptions

    assert set(_DEFAULTS) == set(LoadOptions.__optional_keys__)
    doc = runtime_probe.load.__doc__ or ""
    assert all(f"{name}:" in doc for name in LoadOptions.__optional_keys__)


def test_an_unknown_option_hint_lists_the_options() -> None:
    with pytest.raises(UsageError) as caught:
        runtime_probe.load(MISSING, verfy=False)  # type: ignore[call-arg]
    assert "verify=..." in (caught.value.hint or "") and "num_runners=..." in (caught.value.hint or "")

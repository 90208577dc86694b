"""The one reader of numbers in JSON that comes from outside: a package's manifest (sizes,
tolerances, golden digests), its signature entry, a probe report read back (a phase's seconds),
and every ``schema_version``.

Python's ``json`` turns ``1`` followed by 400 zeros into an int that ``float()`` and
``math.isfinite()`` refuse with ``OverflowError`` (not a ValueError, so no reader caught it), and
``str.isdigit()`` accepts ``"¹"`` that ``int()`` then refuses. Every reader goes through these
functions, which raise ``NumberError`` (a ValueError) with a message that says what was expected
and what was found; the reader turns it into its finding (``manifest.invalid``, ...).
"""

from __future__ import annotations

import math
import re

__all__ = ["INT_MAX", "INT_MIN", "NumberError", "finite_float", "json_int", "schema_version"]

# int64 and uint64 both fit: sizes, strides, seeds, value ranges of any integer dtype torch has
INT_MIN, INT_MAX = -(2**63), 2**64 - 1
# ASCII digits only: ``re``'s ``\d`` and ``str.isdigit`` take other scripts' digits too
_VERSION = re.compile(r"([0-9]{1,6})\.([0-9]{1,6})")


class NumberError(ValueError):
    """A JSON value is not the number (or schema version) a field needs."""


def _kind(value: object) -> str:
    """A short, bounded description of a JSON value (never its full text: an int of 4,000 digits
    is not printed, and ``str()`` of a longer one raises)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return str(value) if value.bit_length() <= 64 else f"an integer of {value.bit_length()} bits"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    return f"a {type(value).__name__}"


def json_int(value: object) -> int:
    """``value`` as an integer from INT_MIN to INT_MAX; a bool, a float or a string is refused."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise NumberError(f"expected an integer, found {_kind(value)}")
    if not INT_MIN <= value <= INT_MAX:
        raise NumberError(f"expected an integer from -2**63 to 2**64-1, found {_kind(value)}")
    return value


def finite_float(value: object) -> float:
    """``value`` (a JSON number) as a finite float; a bool, a string, NaN, an infinity and an
    integer beyond float64's range are refused."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise NumberError(f"expected a number, found {_kind(value)}")
    try:
        number = float(value)
    except OverflowError:
        raise NumberError(f"expected a finite number, found {_kind(value)}, beyond float64") from None
    if not math.isfinite(number):
        raise NumberError(f"expected a finite number, found {_kind(value)}")
    return number


def schema_version(value: object, what: str, example: str) -> tuple[int, int]:
    """(MAJOR, MINOR) of a ``schema_version``: a string of two ASCII numbers (``example``, "1.6").

    ``what`` names the field in the message ("the manifest's schema_version")."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        raise NumberError(f'{what} is the JSON number {_kind(value)}: it must be a string like "{example}"')
    if not isinstance(value, str):
        raise NumberError(f'{what} is {_kind(value)}: it must be a string like "{example}"')
    m = _VERSION.fullmatch(value)
    if m is None:
        raise NumberError(f'{what} {value[:40]!r} is not MAJOR.MINOR in ASCII digits (like "{example}")')
    return int(m.group(1)), int(m.group(2))

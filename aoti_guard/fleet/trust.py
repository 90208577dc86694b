"""What the fleet believes of a node's report: the file it came in, its time, its package.

Everything inside a report is its node's word, and one node must not speak for another. What a
node cannot choose is the name of the file its report arrives in: ``runtime_probe.node_check
--report-dir`` (a Slurm task, the prolog) writes ``<node>.json``, ``fleet k8s --apply`` names a
pod's log ``<node>--<pod>.json`` from the API's ``spec.nodeName``. So:

- A report counts only in its own node's file: ``gpu02.json`` that names node ``gpu01`` is listed
  by its file, without a verdict, and cannot supersede or hide gpu01's own report.
- ``created`` orders one node's reports, so it must be a time: an ISO 8601 date with a zone, at
  most ``CLOCK_SKEW`` in the future. Any other gives no verdict and supersedes nothing (a
  ``9999-...`` report must not outrank a real failure).
- One fleet verdict is about one package: a report with a verdict but no package digest is another
  package, never "the same" one (``check_one_package``).
- One report that its reader cannot survive is that node's "no verdict", never the fleet's
  (``gather``).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import os
import re
from collections.abc import Iterable, Sequence

from aoti_guard.fleet.classes import FAIL, NO_VERDICT, PASS, NodeResult, unreadable
from aoti_guard.fleet.sources import Limits, read_report, report_files
from runtime_probe.node_check import report_file_name as node_file_name
from runtime_probe.reporting.errors import UsageError
from runtime_probe.reporting.report import clean

__all__ = ["CLOCK_SKEW", "NEVER", "believe", "check_one_package", "gather"]

# How far in the future a report's time may be: Kerberos' default tolerance for unsynchronised
# clocks. A node whose clock is further off has no time that can order its reports.
CLOCK_SKEW = _dt.timedelta(minutes=5)
NEVER = _dt.datetime.min.replace(tzinfo=_dt.UTC)  # the time of a report whose time is not believed
_DIGEST = re.compile(r"[0-9a-f]{64}")


def _bound(node: str, source: str) -> str | None:
    """None when ``source`` is a file that ``node`` writes; else the file names it would write."""
    own = node_file_name(node).removesuffix(".json")
    name = os.path.basename(source)
    if name == f"{own}.json" or (name.startswith(f"{own}--") and name.endswith(".json")):
        return None
    return f"{own}.json or {own}--POD.json"


def _created(text: str, now: _dt.datetime) -> tuple[_dt.datetime | None, str]:
    """The report's time, or None and why it is not believed."""
    if text in ("", "?"):
        return None, "it has no created time"
    try:
        at = _dt.datetime.fromisoformat(text)
    except ValueError:
        return None, f"its created time {text!r} is not an ISO 8601 date"
    if at.tzinfo is None:
        return None, f"its created time {text!r} has no time zone"
    if at - now > CLOCK_SKEW:
        ahead = f"more than {CLOCK_SKEW.seconds // 60} minutes ahead of this machine's clock ({now.isoformat(timespec='seconds')})"
        return None, f"its created time {text} is {ahead}"
    return at, ""


def _no_verdict(r: NodeResult, why: str, node: str | None = None) -> NodeResult:
    """``r`` without its verdict: ``why``, then what it claimed or its own reason."""
    claimed = {PASS: "it says the package passes", FAIL: "it says the package fails"}.get(r.outcome)
    reason = f"{why}; {claimed}" if claimed else f"{why}; {r.reason}" if r.reason else why
    return dataclasses.replace(r, node=r.node if node is None else node, outcome=NO_VERDICT, exit_code=2, issues=(), reason=reason)


def believe(r: NodeResult, now: _dt.datetime) -> tuple[NodeResult, _dt.datetime]:
    """``r`` as the fleet takes it (the module's docstring gives the rules), and its time
    (``NEVER`` when its time is not believed: it then supersedes nothing)."""
    if r.node != "?":
        expected = _bound(r.node, r.source)
        if expected is not None:
            why = f"it names node {r.node}, whose reports are {expected}: a report counts only in its own node's file"
            return _no_verdict(r, why, node="?"), NEVER
    if r.node_class is None:
        return r, NEVER  # no class: it clears nothing and is not compared with anything
    at, why = _created(r.created, now)
    if at is None:
        return _no_verdict(r, f"{why}: the node's clock is wrong or the report was edited"), NEVER
    return r, at


def check_one_package(results: Iterable[NodeResult]) -> None:
    """Raise UsageError unless every report with a verdict names the same package digest.

    A report without a (well-formed) ``package.sha256`` is a package of its own: nothing says it
    probed this one. Reports without a verdict are not counted: they clear nothing."""
    digests: set[str] = set()
    undigested: list[str] = []
    for r in results:
        if r.outcome not in (PASS, FAIL):
            continue
        sha = r.package.get("sha256")
        if isinstance(sha, str) and _DIGEST.fullmatch(sha):
            digests.add(sha)
        else:
            undigested.append(os.path.basename(r.source))
    count = len(digests) + len(undigested)
    if count <= 1:
        return
    shown = ", ".join(sorted(d[:12] + "..." for d in digests))
    parts = [f"sha256 {shown}"] if digests else []
    if undigested:
        files = ", ".join(clean(n) for n in undigested[:5]) + (f" and {len(undigested) - 5} more" if len(undigested) > 5 else "")
        parts.append(f"{len(undigested)} report(s) naming no package digest, each counted as a package of its own: {files}")
    raise UsageError(
        f"the reports probed {count} different packages ({'; '.join(parts)}): one fleet verdict is about one package",
        hint="aggregate one rollout's folder at a time (rerun the nodes whose report names no digest), "
        "or pass --any-package to group them anyway",
    )


def _argument(path: str) -> str:
    """A report folder named through a symlink (``/shared/reports -> /mnt/nfs/...``) is the
    user's own choice, so the folder it names is read. Only what is inside a folder is the
    fleet's (a planted link there is refused when read); a link given as a file stays refused."""
    if not os.path.islink(path):
        return path
    target = os.path.realpath(path)
    if os.path.isdir(target):
        return target
    if not os.path.exists(target):
        raise UsageError(
            f"no report at {clean(path)}: a symlink to {clean(target)}, which does not exist (or loops)",
            hint="give the reports folder itself, or fix the link",
        )
    return path


def gather(paths: Sequence[str], limits: Limits | None = None) -> list[NodeResult]:
    """Every report the arguments name, each as one node's verdict (``sources.read_report``);
    a report that crashes its reader is that node's "no verdict", with the reason, and the rest of
    the fleet is judged. Raises UsageError for a missing path, as ``sources.report_files`` does."""
    limits = limits or Limits()
    out: list[NodeResult] = []
    for path in report_files([_argument(p) for p in paths], limits):
        try:
            out.append(read_report(path, limits))
        except Exception as exc:  # noqa: BLE001 - one hostile file must not take down the fleet's verdict
            why = f"its reader failed on it ({type(exc).__name__}: {clean(exc)[:300]}): a hostile or damaged report"
            out.append(unreadable(path, why))
    return out

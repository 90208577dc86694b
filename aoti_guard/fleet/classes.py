"""A node's class and verdict, read from one probe report (a parsed JSON document).

A node class is what decides whether a package can run on a node: the GPU product and its compute
capability, the driver (major version, as GPU Feature Discovery labels it) and the CUDA version it
supports, the C++ runtime the probe's child mapped, torch, and the machine. Hosts without a GPU
form their own classes, told apart by machine and x86-64 ISA level (the default build's package
needs x86-64-v3). Every fact comes from the probe's ``host`` (``runtime_probe/host/rules.py``'s
``parent_facts`` and the child's ``child/ops.py::op_facts``); a fact the report lacks is ``?``.

A report is data from a node we do not trust: every field is type-checked and bounded here, and
anything that does not read as a probe report is a node *without a verdict*, never a pass.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from runtime_probe.reporting.errors import GuardError
from runtime_probe.reporting.findings import Severity
from runtime_probe.reporting.report import Report, clean

__all__ = [
    "FAIL",
    "NO_VERDICT",
    "NO_VERDICT_KIND",
    "PASS",
    "Issue",
    "NodeClass",
    "NodeResult",
    "cpu_isa_level",
    "node_result",
    "unreadable",
]

PASS, FAIL, NO_VERDICT = "pass", "fail", "no_verdict"
# what runtime_probe.node_check prints when the probe left no report (it died, timed out)
NO_VERDICT_KIND = "fleet.no_verdict"
_TEXT = 200  # any one fact, at most (a hostile report's 1 MB "hostname" is cut, not echoed)

# x86-64 micro-architecture levels (the psABI's), by /proc/cpuinfo flag names
_X86_LEVELS = (
    ("x86-64-v4", ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")),
    ("x86-64-v3", ("avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe")),
    ("x86-64-v2", ("cx16", "lahf_lm", "popcnt", "sse4_1", "sse4_2", "ssse3")),
)


def obj(value: object) -> Mapping[str, Any]:
    """``value`` when it is a JSON object, else an empty one (a report's field may be anything)."""
    return value if isinstance(value, Mapping) else {}


def _text(value: object) -> str:
    """One fact as short, printable text; ``?`` when the report does not have it."""
    if value is None or value == "" or isinstance(value, (dict, list)):
        return "?"
    return clean(str(value))[:_TEXT]


def cpu_isa_level(flags: object) -> str:
    """The highest x86-64 level whose every flag the CPU has (``x86-64`` below v2; ``?`` unknown)."""
    if not isinstance(flags, list):
        return "?"
    have = {f for f in flags if isinstance(f, str)}
    for level, needs in _X86_LEVELS:
        if have.issuperset(needs) and all(have.issuperset(n) for lv, n in _X86_LEVELS if lv < level):
            return level
    return "x86-64"


@dataclass(frozen=True, order=True)
class NodeClass:
    """The facts that make nodes interchangeable for a package (see the module's docstring)."""

    gpu: str  # product name(s), "cpu" for a host without a visible GPU
    capability: str  # "9.0"; "-" on CPU hosts
    driver: str  # driver major, "-" on CPU hosts
    cuda: str  # the CUDA version the driver supports, "-" on CPU hosts
    torch: str
    libstdcxx: str
    machine: str  # x86_64 (and its ISA level on CPU hosts), aarch64...

    @property
    def label(self) -> str:
        if self.gpu == "cpu":
            return f"cpu {self.machine} | torch {self.torch} | libstdc++ {self.libstdcxx}"
        return (
            f"{self.gpu} (sm {self.capability}) | driver {self.driver} (CUDA {self.cuda}) | torch {self.torch} | "
            f"libstdc++ {self.libstdcxx} | {self.machine}"
        )

    def to_dict(self) -> dict[str, str]:
        return {
            "gpu": self.gpu,
            "capability": self.capability,
            "driver": self.driver,
            "cuda": self.cuda,
            "torch": self.torch,
            "libstdcxx": self.libstdcxx,
            "machine": self.machine,
        }


@dataclass(frozen=True)
class Issue:
    """One error finding of a failing node, as the fleet report groups them (code + message)."""

    code: str
    message: str
    expected: str | None = None
    found: str | None = None
    hint: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "expected": self.expected, "found": self.found, "hint": self.hint}


@dataclass(frozen=True)
class NodeResult:
    """One node's verdict: pass, fail (with its issues) or no_verdict (with the reason)."""

    source: str  # the report file (or pod) it was read from
    node: str
    node_class: NodeClass | None  # None: the report could not say (unreadable, no host facts)
    outcome: str
    exit_code: int  # 0 pass, 1 fail, 2 no verdict (NVIDIA's health-check convention)
    issues: tuple[Issue, ...] = ()
    reason: str = ""  # why there is no verdict
    created: str = ""
    package: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "node": self.node,
            "class": self.node_class.to_dict() if self.node_class else None,
            "outcome": self.outcome,
            "exit_code": self.exit_code,
            "issues": [i.to_dict() for i in self.issues],
            "reason": self.reason,
            "created": self.created,
        }


def unreadable(source: str, reason: str, node: str = "?") -> NodeResult:
    """A report that gives no verdict: corrupt, truncated, too large, a symlink, not a probe's."""
    return NodeResult(source=source, node=node, node_class=None, outcome=NO_VERDICT, exit_code=2, reason=reason)


def _lib_version(path: object) -> str:
    """``/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.33`` -> ``6.0.33`` (the file's own version)."""
    if not isinstance(path, str) or not path:
        return "?"
    m = re.search(r"libstdc\+\+\.so\.([0-9][0-9.]*)$", path)
    return _text(m.group(1) if m else path.rsplit("/", 1)[-1])


def _capability(value: object) -> str:
    """The child records ``"90"`` (major, minor digits); shown as ``9.0`` (``"100"`` -> ``10.0``)."""
    text = _text(value)
    return f"{text[:-1]}.{text[-1]}" if text.isdigit() and len(text) >= 2 else text


def node_class(host: Mapping[str, Any], device: str, sections_hosts: Sequence[Mapping[str, Any]] = ()) -> NodeClass | None:
    """The class of the node a report's ``host`` describes; None without any host fact."""
    hosts = [h for h in (host, *sections_hosts) if isinstance(h, Mapping) and h]
    if not hosts:
        return None
    first = hosts[0]
    devices = [d for h in hosts for d in (h.get("devices") or []) if isinstance(d, Mapping)][:64]
    driver = obj(first.get("driver"))
    machine = _text(first.get("machine"))
    common = {"torch": _text(first.get("torch")), "libstdcxx": _lib_version(first.get("libstdcxx"))}
    if not devices or device.startswith("cpu"):
        # a CPU package's probe asks the child for no GPU facts: the class is the host's CPU side
        if machine == "x86_64":
            machine = f"{machine} {cpu_isa_level(first.get('cpu_flags'))}"
        return NodeClass(gpu="cpu", capability="-", driver="-", cuda="-", machine=machine, **common)
    names = sorted({_text(d.get("name")) for d in devices})
    caps = sorted({_capability(d.get("capability")) for d in devices})
    version = _text(driver.get("version"))
    return NodeClass(
        gpu=" + ".join(names),  # a node mixing GPU products is a class of its own
        capability=" + ".join(caps),
        driver=version.split(".", 1)[0],
        cuda=_text(driver.get("cuda_version")),
        machine=machine,
        **common,
    )


def _issues(report: Report) -> tuple[Issue, ...]:
    def opt(value: str | None) -> str | None:
        return None if value is None else clean(value)[:2000]

    out = [
        Issue(clean(f.code)[:_TEXT], clean(f.message)[:2000], opt(f.expected), opt(f.found), opt(f.hint))
        for f in report.findings
        if f.severity is Severity.ERROR
    ]
    return tuple(dict.fromkeys(out))[:50]  # bounded: a node's 10,000 findings are not the fleet's


def node_result(data: object, source: str) -> NodeResult:
    """Read one node's verdict from a parsed report: a probe report (``kind: probe``), or the
    ``fleet.no_verdict`` record runtime_probe.node_check writes when the probe left no report.

    Returns a NodeResult in every case: anything else is a node without a verdict, with the reason.
    """
    if not isinstance(data, Mapping):
        return unreadable(source, f"not a JSON object (a {type(data).__name__})")
    extra, host = obj(data.get("extra")), obj(data.get("host"))
    fleet = obj(extra.get("fleet"))
    node = _text(fleet.get("node") or data.get("node") or host.get("hostname"))
    kind = data.get("kind")
    if kind == NO_VERDICT_KIND:
        why = _text(data.get("reason"))
        return unreadable(source, f"the probe left no report on the node: {why}", node=node)
    if kind != "probe":
        return unreadable(source, f"not a probe report (kind {_text(kind)})", node=node)
    try:
        report = Report.from_dict(data)
    except (GuardError, KeyError, TypeError, ValueError, AttributeError, RecursionError) as exc:
        return unreadable(source, f"not a readable probe report ({type(exc).__name__}: {_text(exc)})", node=node)
    code = report.exit_code
    stated = data.get("exit_code")
    sections = [s.host for s in report.sections]
    device = _text(extra.get("device") or ("cuda" if sections else "?"))
    cls = node_class(report.host, device, sections)

    def result(outcome: str, exit_code: int, reason: str = "", issues: tuple[Issue, ...] = ()) -> NodeResult:
        return NodeResult(source, node, cls, outcome, exit_code, issues, reason, _text(report.created), dict(report.package))

    if isinstance(stated, int) and not isinstance(stated, bool) and stated != code:
        return result(NO_VERDICT, 2, f"its exit_code {stated} disagrees with its findings (which give {code}): edited or damaged")
    if code == 0:
        return result(PASS, 0)
    if code == 1:
        return result(FAIL, 1, issues=_issues(report))
    first = next(iter(_issues(report)), None)
    why = f"the probe could not run (exit {code}" + (f", {first.code}: {first.message})" if first else ")")
    return result(NO_VERDICT, 2, why, _issues(report))

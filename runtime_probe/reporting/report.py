"""The report model (phases with findings) and its three renderings: text, JSON, JUnit XML.

The JSON form is a public contract with its own ``schema_version`` (MAJOR.MINOR). Bump MINOR when
adding a field readers may ignore; bump MAJOR when removing or changing the meaning of a field.
Readers refuse a newer MAJOR (see ``Report.from_dict``).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from runtime_probe.formats.numbers import NumberError, finite_float, schema_version
from runtime_probe.reporting.errors import ToolError
from runtime_probe.reporting.escaping import for_terminal
from runtime_probe.reporting.findings import Finding, Severity, exit_code_of
from runtime_probe.reporting.output import write_atomic, write_output

__all__ = ["REPORT_SCHEMA_VERSION", "PhaseResult", "Report", "clean", "render_text", "write_atomic", "write_json", "write_junit"]

REPORT_SCHEMA_VERSION = "1.1"  # 1.1: ``strict``
_OUR_MAJOR = schema_version(REPORT_SCHEMA_VERSION, "REPORT_SCHEMA_VERSION", "1.1")[0]

PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"


@dataclass(frozen=True)
class PhaseResult:
    """One phase: its status (passed, failed, skipped), how long it took, what it found."""

    name: str
    status: str
    seconds: float
    findings: tuple[Finding, ...] = ()
    detail: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "seconds": round(self.seconds, 4),
            "findings": [f.to_dict() for f in self.findings],
            "detail": dict(self.detail),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PhaseResult:
        """Read one phase back. Raises ToolError for a ``seconds`` that is no finite number;
        KeyError, TypeError or ValueError for a missing or malformed field."""
        try:
            seconds = finite_float(data.get("seconds", 0.0))
        except NumberError as exc:
            raise ToolError(f"the report's phase {str(data.get('name'))[:40]!r} has seconds that cannot be read: {exc}") from None
        return cls(
            name=str(data["name"]),
            status=str(data["status"]),
            seconds=seconds,
            findings=tuple(Finding.from_dict(f) for f in data.get("findings", [])),
            detail=dict(data.get("detail") or {}),
        )


def phase_status(findings: Iterable[Finding]) -> str:
    return FAILED if any(f.severity is Severity.ERROR for f in findings) else PASSED


@dataclass(frozen=True)
class Report:
    """What a probe or a build found. ``sections`` holds per-device sub-reports (--all-devices)."""

    kind: str
    package: Mapping[str, Any]
    phases: tuple[PhaseResult, ...]
    host: Mapping[str, Any] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)
    sections: tuple[Report, ...] = ()
    title: str | None = None
    created: str = field(default_factory=lambda: _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"))
    tool_version: str = ""
    strict: bool = False  # --strict: a warning fails the report too

    @property
    def findings(self) -> list[Finding]:
        out = [f for p in self.phases for f in p.findings]
        for s in self.sections:
            out.extend(s.findings)
        return out

    @property
    def passed(self) -> bool:
        return self.exit_code == 0

    @property
    def exit_code(self) -> int:
        """0 when every check passed, 1 when a check failed (DESIGN.md's exit-code contract); 2 or 3
        when an error finding says the check could not run (``findings.EXIT_CODES``: no engine,
        no such image). Under ``strict`` a warning alone gives 1."""
        findings = self.findings
        code = exit_code_of(findings)
        if code == 0 and self.strict and any(f.severity is Severity.WARNING for f in findings):
            return 1
        return code

    def phase(self, name: str) -> PhaseResult | None:
        return next((p for p in self.phases if p.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": REPORT_SCHEMA_VERSION,
            "kind": self.kind,
            "title": self.title,
            "tool_version": self.tool_version,
            "created": self.created,
            "passed": self.passed,
            "exit_code": self.exit_code,
            "strict": self.strict,
            "package": dict(self.package),
            "host": dict(self.host),
            "phases": [p.to_dict() for p in self.phases],
            "sections": [s.to_dict() for s in self.sections],
            "extra": dict(self.extra),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Report:
        """Read a report written by this or an older tool; refuse a newer major schema.

        Raises:
            ToolError: no usable ``schema_version`` (MAJOR.MINOR, a string), a newer major one, or
                a number that cannot be read (a phase's seconds).
            KeyError, TypeError, ValueError: a missing or malformed field.
        """
        version = data.get("schema_version")
        try:
            major, _ = schema_version(version, "the report's schema_version", REPORT_SCHEMA_VERSION)
        except NumberError as exc:
            raise ToolError(str(exc), hint="read a report that runtime_probe or aoti-guard wrote") from None
        if major > _OUR_MAJOR:
            raise ToolError(
                f"report schema {version} is newer than this reader ({REPORT_SCHEMA_VERSION})",
                hint="upgrade aoti-guard / runtime_probe on this side",
            )
        return cls(
            kind=str(data["kind"]),
            title=data.get("title"),
            tool_version=str(data.get("tool_version", "")),
            created=str(data.get("created", "")),
            package=dict(data.get("package") or {}),
            host=dict(data.get("host") or {}),
            phases=tuple(PhaseResult.from_dict(p) for p in data.get("phases", [])),
            sections=tuple(cls.from_dict(s) for s in data.get("sections", [])),
            extra=dict(data.get("extra") or {}),
            strict=bool(data.get("strict", False)),
        )


_MARK = {Severity.ERROR: "ERROR", Severity.WARNING: "WARN ", Severity.INFO: "info "}
# info findings that qualify the verdict: a PASSED that checked less than it reads (new weights, or
# references made for weights not given: no golden output was compared); the text report says them
# under the verdict, -v or not
VERDICT_CAVEATS = frozenset({"constants.new_weights", "constants.references_need_weights"})


def clean(value: object) -> str:
    """``value`` safe for a terminal or an XML file (``escaping.for_terminal``): names in a report
    come from the package, and a hostile package must not drive the terminal."""
    return for_terminal(value)


_BLOCK_LINES = 200  # a multi-line expected/found shown in the text report, at most


def format_finding(f: Finding) -> str:
    """One line (plus an indented hint line): code, what failed, expected vs found, what to do.
    Every field is passed through ``clean``: messages quote names from the package.

    A multi-line ``expected`` or ``found`` (torch's message, a compiler's errors) is shown line by
    line below the finding, each line cleaned and behind a ``|`` margin, so no text it holds can
    pass for a line of the report (a finding, a phase, the verdict)."""
    line = f"{_MARK[f.severity]} {clean(f.code)}: {clean(f.message)}"
    fields = [(label, value) for label, value in (("expected", f.expected), ("found", f.found)) if value is not None]
    blocks = [(label, value.strip("\n").splitlines()) for label, value in fields if "\n" in value.strip("\n")]
    if fields and not blocks:
        expected = clean(f.expected) if f.expected is not None else "-"
        found = clean(f.found) if f.found is not None else "-"
        line += f" (expected {expected}, found {found})"
    inline = [f"{label} {clean(value)}" for label, value in fields if label not in dict(blocks)]
    if blocks and inline:
        line += f" ({', '.join(inline)})"
    for label, rows in blocks:
        line += f"\n        {label}:" + "".join(f"\n        | {clean(row)}" for row in rows[:_BLOCK_LINES])
        if len(rows) > _BLOCK_LINES:
            line += f"\n        | ... {len(rows) - _BLOCK_LINES} more line(s) in the JSON report"
    if f.hint:
        line += f"\n        hint: {clean(f.hint)}"
    return line


def render_text(report: Report, *, verbose: bool = False) -> str:
    """The human rendering: phases with times, one line per finding, a PASSED/FAILED footer."""
    lines: list[str] = []
    _render_into(report, lines, verbose=verbose, indent="")
    errors = sum(1 for f in report.findings if f.severity is Severity.ERROR)
    warnings = sum(1 for f in report.findings if f.severity is Severity.WARNING)
    verdict = "PASSED" if report.passed else "FAILED"
    strict = " (--strict: warnings fail)" if report.strict and warnings and not errors else ""
    lines.append(f"{verdict}: {errors} error(s), {warnings} warning(s){strict}")
    # what a pass did not check, said under the verdict with or without -v (once for all devices)
    caveats = dict.fromkeys((clean(f.message), clean(f.hint or "")) for f in report.findings if f.code in VERDICT_CAVEATS)
    for message, hint in caveats:
        lines.append(f"  NOT CHECKED: {message}" + (f"\n        hint: {hint}" if hint else ""))
    return "\n".join(lines) + "\n"


def _render_into(report: Report, lines: list[str], *, verbose: bool, indent: str) -> None:
    head = report.title or f"{report.kind} {report.package.get('path', '')}".strip()
    lines.append(f"{indent}{clean(head)}")
    for p in report.phases:
        why = f"  ({clean(str(p.detail['reason']).removeprefix('skipped: '))})" if p.status == SKIPPED and p.detail.get("reason") else ""
        lines.append(f"{indent}  {clean(p.name):<10} {p.status:<8} {p.seconds:7.2f}s{why}")
        lines.extend(f"{indent}    {line}" for line in detail_lines(p))
        for f in p.findings:
            # In a failed phase an informational finding explains the failure (the remedy the
            # ladder verified, the kernels that ran), so it is shown; elsewhere only with -v.
            if f.severity is Severity.INFO and not verbose and p.status != FAILED:
                continue
            for sub in format_finding(f).splitlines():
                lines.append(f"{indent}    {sub}")
    for s in report.sections:
        _render_into(s, lines, verbose=verbose, indent=indent + "  ")


def detail_lines(p: PhaseResult) -> list[str]:
    """The phase's detail as text lines (latency, coverage, margins, stage table), for every
    rendering of the report (text, markdown)."""
    return [
        *_signature_lines(p),
        *_latency_lines(p),
        *_user_sample_lines(p),
        *_coverage_lines(p),
        *_golden_lines(p),
        *_margin_lines(p),
        *_stage_lines(p),
    ]


def _signature_lines(p: PhaseResult) -> list[str]:
    """The archive phase's signature check: which key verified it (its file and fingerprint)."""
    sig = p.detail.get("signature")
    if not isinstance(sig, Mapping) or sig.get("verified") is not True:
        return []
    where = f" ({clean(sig['key_file'])})" if sig.get("key_file") else ""
    return [f"signature verified with key {clean(sig.get('key_id'))}{where}"]


def _golden_lines(p: PhaseResult) -> list[str]:
    """How the build stored each golden sample (whole, compact, dropped), and which samples the
    probe checked and how."""
    rows = [r for r in p.detail.get("golden_storage") or [] if isinstance(r, Mapping)]
    whole = [clean(r.get("sample")) for r in rows if r.get("stored") == "full"]
    out = [f"golden stored whole: {', '.join(whole)}"] if whole else []
    for r in rows:
        if r.get("stored") == "compact":
            how = f"compact (over the cap): inputs {clean(r.get('inputs'))}; outputs {clean(r.get('outputs'))}"
        elif r.get("stored") == "dropped":
            how = f"DROPPED: {clean(r.get('why'))}"
        else:
            continue
        out.append(f"golden {clean(r.get('sample'))} ({clean(r.get('origin'))}) stored {how}")
    checked = p.detail.get("checked")
    if isinstance(checked, list) and checked:
        out.append(f"checked: {', '.join(clean(c) for c in checked)}")
    for run in p.detail.get("runs") or []:  # the user's --inputs file, said to have run (and with what)
        if isinstance(run, Mapping) and run.get("sample") == "inputs" and run.get("file"):
            names = run.get("inputs")
            fed = ", ".join(clean(n) for n in names) if isinstance(names, list) and names else "-"
            out.append(f"ran --inputs {clean(run['file'])}: inputs {fed}")
    return out


def _user_sample_lines(p: PhaseResult) -> list[str]:
    """The build's golden samples of the user's own (build --samples): each one's id, file, sizes."""
    rows = p.detail.get("user_samples")
    if not isinstance(rows, list) or not rows:
        return []
    parts = []
    for r in rows:
        if not isinstance(r, Mapping):
            continue
        symbols = r.get("symbols")
        symbols = symbols if isinstance(symbols, Mapping) else {}
        sizes = ", ".join(f"{clean(k)}={clean(v)}" for k, v in symbols.items())
        parts.append(f"{clean(r.get('id'))} (from {clean(r.get('source'))}{'; ' + sizes if sizes else ''})")
    return [f"your samples: {'; '.join(parts)}"] if parts else []


def _coverage_lines(p: PhaseResult) -> list[str]:
    """The build's golden coverage, one line: each symbol's range and the sizes a sample tested,
    a bound no sample reached marked (the build fails on it unless --allow-partial-coverage)."""
    coverage = p.detail.get("coverage")
    if not isinstance(coverage, Mapping) or not coverage:
        return []
    parts = []
    for name, c in coverage.items():
        if not isinstance(c, Mapping):
            continue
        lo, hi, tested = c.get("min"), c.get("max"), c.get("tested") or []
        if c.get("output_only"):  # a data-dependent output size: no input sets it
            parts.append(f"{clean(name)} {clean(lo)}..{clean(hi)} set by no input (a data-dependent output size)")
            continue
        missing = [label for label, bound in (("min", lo), ("max", hi)) if bound not in tested]
        mark = f" MISSING {' and '.join(missing)}" if missing else ""
        parts.append(f"{clean(name)} {clean(lo)}..{clean(hi)} tested {', '.join(clean(t) for t in tested) or 'none'}{mark}")
    return [f"coverage: {'; '.join(parts)}"] if parts else []


def _num(value: object) -> str:
    return f"{value:.3g}" if isinstance(value, float) else clean(value)


def _margin_lines(p: PhaseResult) -> list[str]:
    """The build's margin per output: the worst error, on which sample, against the tolerance it
    was judged by (and the share of it used), and the tolerance the package stores."""
    out = []
    for m in p.detail.get("margins") or []:
        if not isinstance(m, Mapping) or m.get("max_abs") is None:
            continue
        used = m.get("tolerance_used")
        share = f", {used:.0%} of it" if isinstance(used, float) else (", beyond a zero tolerance" if used == "inf" else "")
        how = " (accepted: as close to float64 as eager)" if m.get("accepted_by") == "fp64" else ""
        stored = f"; stored atol {_num(m['stored_atol'])}, rtol {_num(m.get('stored_rtol'))}" if m.get("stored_atol") is not None else ""
        out.append(
            f"margin {clean(m.get('output'))}: worst |compiled - eager| {_num(m.get('max_abs'))} on {clean(m.get('sample'))} "
            f"against atol {_num(m.get('atol'))} + rtol {_num(m.get('rtol'))}*|eager|{share}{how}{stored}"
        )
    return out


def _stage_lines(p: PhaseResult) -> list[str]:
    """The stage bisection's table (build.first_divergence): each stage rerun on the failing sample."""
    rows = p.detail.get("stages")
    if not isinstance(rows, list) or not rows:
        return []
    out = ["stages (rerun on the failing sample, each against eager):"]
    for r in rows:
        if not isinstance(r, Mapping):
            continue
        err = "-" if r.get("max_abs") is None else _num(r.get("max_abs"))
        tail = f"  {clean(r['note'])}" if r.get("note") else ""
        out.append(f"  {clean(r.get('stage')):<9} {clean(r.get('status')):<8} max abs {err:<9}{tail}")
    return out


def _latency_lines(p: PhaseResult) -> list[str]:
    """The golden phase's --iterations timings, one line per sample (trtexec's summary)."""
    out = []
    for run in p.detail.get("runs") or []:
        lat = run.get("latency_ms") if isinstance(run, Mapping) else None
        if isinstance(lat, Mapping) and lat.get("n"):
            label = str(clean(run.get("sample")))
            if run.get("shapes"):  # a --shapes run says which sizes it timed
                label += f" ({clean(run['shapes'])})"
            out += latency_lines(label, lat)
    return out


def latency_lines(sample: str, lat: Mapping[str, Any]) -> list[str]:
    """One sample's timing as text: the percentiles there are enough calls for (and which are
    left out), mean ± std, min/max, throughput, and a warning line when the timings vary."""
    from runtime_probe.reporting.latency import unstable_message

    def ms(key: str) -> str:
        value = lat.get(key)
        return f"{value:.4g}" if isinstance(value, (int, float)) else "?"  # 480 ms and 4 us both readable

    shown = [f"{name} {ms(name)}" for name in ("p50", "p90", "p95", "p99") if name in lat]
    omitted = [o for o in lat.get("omitted") or [] if isinstance(o, Mapping)]
    head = f"latency {sample}: " + (", ".join(shown) + " ms, " if shown else "")
    line = f"{head}mean {ms('mean')} ± {ms('std')} ms (min {ms('min')}, max {ms('max')}, {lat['n']} runs"
    if lat.get("warmup"):
        line += f" after {lat['warmup']} warm-up"
    line += ")"
    if isinstance(lat.get("throughput_per_s"), (int, float)):
        line += f", {lat['throughput_per_s']:.1f} calls/s"
    if isinstance(lat.get("threads"), int):  # torch's intra-op threads where the calls ran
        line += f", {lat['threads']} thread{'s' if lat['threads'] != 1 else ''}"
    lines = [line]
    if omitted:
        lines.append("  " + ", ".join(f"{o.get('name')} omitted (needs {o.get('needs')} runs)" for o in omitted))
    if lat.get("unstable"):
        lines.append("  warning: " + unstable_message(dict(lat)))
    return lines


def write_json(report: Report, path: str | os.PathLike[str]) -> None:
    """Write the JSON report: ``-`` is stdout; a FIFO or device is written in place (reporting/output.py)."""
    write_output(os.fspath(path), (json.dumps(report.to_dict(), indent=2, sort_keys=False) + "\n").encode())


def junit_xml(report: Report) -> bytes:
    """A testsuite per report (and per device section), a testcase per phase."""
    suites = ET.Element("testsuites")
    _junit_suite(report, suites)
    for s in report.sections:
        _junit_suite(s, suites)
    ET.indent(suites)
    data: bytes = ET.tostring(suites, encoding="utf-8", xml_declaration=True)
    return data


def _junit_suite(report: Report, parent: ET.Element) -> None:
    name = report.title or f"aoti-guard.{report.kind}"
    failures = sum(1 for p in report.phases if p.status == FAILED)
    skipped = sum(1 for p in report.phases if p.status == SKIPPED)
    suite = ET.SubElement(
        parent,
        "testsuite",
        name=name,
        tests=str(len(report.phases)),
        failures=str(failures),
        skipped=str(skipped),
        time=f"{sum(p.seconds for p in report.phases):.3f}",
    )
    for p in report.phases:
        case = ET.SubElement(suite, "testcase", classname=name, name=p.name, time=f"{p.seconds:.3f}")
        text = "\n".join(format_finding(f) for f in p.findings)
        if p.status == FAILED:
            first = next((f for f in p.findings if f.severity is Severity.ERROR), None)
            fail = ET.SubElement(case, "failure", message=clean(first.message) if first else "failed", type=first.code if first else "")
            fail.text = text
        elif p.status == SKIPPED:
            ET.SubElement(case, "skipped", message=str(p.detail.get("reason", "skipped")))
        elif text:
            out = ET.SubElement(case, "system-out")
            out.text = text


def write_junit(report: Report, path: str | os.PathLike[str]) -> None:
    write_output(os.fspath(path), junit_xml(report))


def make_phase(
    name: str, seconds: float, findings: Sequence[Finding], detail: Mapping[str, Any] | None = None, *, skipped_reason: str | None = None
) -> PhaseResult:
    if skipped_reason is not None:
        return PhaseResult(name, SKIPPED, seconds, tuple(findings), {**(detail or {}), "reason": skipped_reason})
    return PhaseResult(name, phase_status(findings), seconds, tuple(findings), dict(detail or {}))

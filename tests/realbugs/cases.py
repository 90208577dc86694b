"""What a case of the corpus is (the corpus itself: corpus.py): a failure users reported in public,
re-expressed as a small model (models.py) and a serving mistake, with what aoti-guard must do about
it. Declarative only: runner.py runs them, test_realbugs.py asserts them, report.py tabulates them
(docs/realbugs.md).

A case's ``expect`` is aoti-guard's duty, one of:

- ``build``: ``aoti-guard build`` fails (exit 1) with one of ``codes`` among its error findings;
- ``warn``: the build passes and says why with one of ``codes`` (a warning);
- ``probe``: ``python -m runtime_probe PKG`` reports one of ``codes`` (``codes`` empty: it passes);
- ``serve``: the build passes and ``runtime_probe.load(PKG)`` refuses the call (or the weights)
  with one of ``codes``, its message naming each of ``names``;
- ``runs``: the build passes and the guarded call returns what eager returns (fixed upstream, or
  the mistake is harmless); with ``codes``, a torch that still has the bug meets it by the build
  refusing with one of them (never by serving wrong values);
- ``cannot``: aoti-guard lacks the information; ``why`` says which (never reported as passed).

``bare`` is what plain AOTI must be seen doing for the case to be described right (asserted);
``None``: measured for the table only.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CLASSES", "IN_PROGRESS", "Case", "Expect", "Package", "Serve"]

CLASSES = (
    "layout",
    "shape range",
    "guard specialisation",
    "python constant",
    "custom op",
    "data-dependent",
    "half precision",
    "weights",
    "state",
    "package size",
    "threads",
    "device",
    "toolchain/ISA",
    "export failure",
)
# classes being fixed by others right now (issue 42): their cases are strict xfails until then
IN_PROGRESS: tuple[str, ...] = ()

NO_TWIN = ("--no-debug-twin",)


@dataclass(frozen=True)
class Package:
    """How a case's package is made: an ``aoti-guard build`` of ``target`` with ``flags``, or a
    ready ``file`` in the repository. Cases naming the same package share one build."""

    target: str | None
    flags: tuple[str, ...] = NO_TWIN
    file: str | None = None


@dataclass(frozen=True)
class Serve:
    """What the serving process does: ``inputs`` (a ``models.py`` function: one call's args and
    kwargs), ``weights`` (a ``{name: tensor}`` map given to load_constants first), ``calls`` in a
    row (a model with state); ``eager=False``: the serving process has no eager model to compare
    with (it must not import the model's module); ``device``: the load's device (GPU cases)."""

    inputs: str
    weights: str | None = None
    calls: int = 1
    eager: bool = True
    device: str | None = None
    env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Expect:
    stage: str  # build | warn | probe | serve | runs | cannot
    codes: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    why: str = ""  # for cannot: the information aoti-guard does not have
    probe_args: tuple[str, ...] = ()  # extra probe flags (threads)
    message: tuple[str, ...] = ()  # words a finding's text or hint must hold (the remedy)


@dataclass(frozen=True)
class Case:
    name: str
    report: str  # owner/repo#number
    title: str  # the report, in our words
    klass: str
    package: str  # a key of PACKAGES
    serve: Serve
    expect: Expect
    bare: str | None = None  # ok | wrong | error | crash | export failed: asserted where it is the point
    gpu: bool = False
    gap: str = ""  # a new gap nobody owns: a strict xfail until it is fixed (listed in the report)
    no_gpu_host: bool = False  # the report's user had no GPU: on a host with one the case does not apply (skipped)
    pending: bool | None = None  # a strict xfail until its class's fix lands; None: as its class (IN_PROGRESS)

    @property
    def in_progress(self) -> bool:
        return self.klass in IN_PROGRESS if self.pending is None else self.pending

    @property
    def url(self) -> str:
        repo, number = self.report.split("#")
        return f"https://github.com/{repo}/issues/{number}"

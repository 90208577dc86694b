"""Did aoti-guard do what a case expects (cases.Expect), and the words the table uses for each side."""

from __future__ import annotations

from .runner import Outcome

__all__ = ["bare_text", "guard_text", "meets"]


def _has_words(texts: list[str], words: tuple[str, ...]) -> bool:
    return all(any(w in t for t in texts) for w in words)


def meets(o: Outcome) -> tuple[bool, str]:
    """(met, what was seen instead)."""
    e, b = o.case.expect, o.build
    if o.bare.result == "skipped":  # the case does not apply on this host (Case.no_gpu_host)
        return True, f"not applicable here: {o.bare.detail}"
    texts = [f.text for f in b.findings]
    if e.stage == "build":
        codes_ok = not e.codes or any(c in b.errors() for c in e.codes)
        ok = b.returncode == 1 and codes_ok and _has_words(texts, e.message)
        return ok, f"build exit {b.returncode}, findings {list(b.codes)}"
    if e.stage == "warn":
        codes_ok = not e.codes or any(c in b.codes for c in e.codes)
        ok = b.returncode == 0 and codes_ok and _has_words(texts, e.message)
        return ok, f"build exit {b.returncode}, findings {list(b.codes)}"
    if e.stage == "probe":
        p = o.probe or {}
        codes = [f["code"] for f in p.get("findings", [])]
        if e.codes:
            ok = any(c in codes for c in e.codes)
        else:
            ok = p.get("returncode") == 0
        ok = ok and _has_words([p.get("text", "")], e.names)
        return ok, f"probe exit {p.get('returncode')}, findings {codes}"
    g = o.guard
    seen = f"build exit {b.returncode}; guarded call: {g.result if g else 'not run'} {g.code or '' if g else ''} {g.detail if g else ''}"
    if e.stage == "runs" and _caught_at_build(o):
        return True, seen  # fixed in later torch releases; this one still has it, and the build refuses it
    if b.returncode != 0 or g is None:
        return False, seen
    if e.stage == "serve":
        ok = g.result == "refused" and (not e.codes or g.code in e.codes) and all(n in g.detail for n in e.names)
        return ok, seen
    if e.stage == "runs":
        return g.result in ("ok", "ran"), seen
    return True, seen  # cannot: nothing asserted of aoti-guard


def _caught_at_build(o: Outcome) -> bool:
    """A ``runs`` case with ``codes``: the build refused with one of them (the torch at hand still has
    the bug the case's report is about)."""
    return bool(o.case.expect.codes) and o.build.returncode == 1 and any(c in o.build.errors() for c in o.case.expect.codes)


def bare_text(o: Outcome) -> str:
    r = o.bare
    words = {
        "ok": "returns eager's values",
        "wrong": "returns wrong values",
        "ran": "runs",
        "error": "raises",
        "crash": "crashes the process",
        "timeout": "hangs",
        "export failed": "torch.export refuses",
        "skipped": "not run",
    }
    text = words.get(r.result, r.result)
    return f"{text}: {r.detail}" if r.detail else text


def guard_text(o: Outcome) -> str:
    e, b = o.case.expect, o.build
    met, seen = meets(o)
    if o.bare.result == "skipped":
        return seen
    if e.stage == "cannot":
        return f"cannot catch: {e.why}"
    if e.stage == "build":
        codes = ", ".join(dict.fromkeys(b.errors())) or "none"
        return f"caught at build: {codes}" if met else f"NOT caught ({seen})"
    if e.stage == "warn":
        codes = ", ".join(c for c in b.codes if not e.codes or c in e.codes) or "-"
        return f"explained at build: {codes}" if met else f"NOT explained ({seen})"
    if e.stage == "probe":
        p = o.probe or {}
        found = p.get("findings", [])
        errors = sorted({f["code"] for f in found if f["severity"] == "error"})
        said = sorted({f["code"] for f in found if f["severity"] != "error" and f["code"].startswith(("golden.throughput", "env."))})
        codes = ", ".join(errors) if errors else "passes" + (f", and says {', '.join(said)}" if said else "")
        measured = next((line.strip() for line in str(p.get("text", "")).splitlines() if line.strip().startswith("throughput ")), "")
        return (f"probe: {codes}" + (f"; {measured}" if measured else "")) if met else f"NOT explained by the probe ({seen})"
    g = o.guard
    if e.stage == "runs" and _caught_at_build(o):
        return f"caught at build: {', '.join(dict.fromkeys(b.errors()))}"
    if e.stage == "serve":
        return f"refused at serving: {g.code}: {g.detail}" if met and g else f"NOT refused ({seen})"
    return f"builds and serves: {g.detail}" if met and g else f"does not serve ({seen})"

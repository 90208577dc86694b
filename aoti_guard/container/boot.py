"""The first code that runs inside a probe container: is this image able to run the probe at all?

``aoti_guard.container.probe`` runs this file's text as ``<python> -c TEXT OUT_DIR SOURCE PROBE_PARENT
-- PROBE_ARGS...`` (the image's own interpreter, whatever its version). It writes what it found
to ``OUT_DIR/facts.json`` and, when the image can run the probe, replaces itself with
``python -P -m runtime_probe PROBE_ARGS`` (which writes ``OUT_DIR/report.json``).

SOURCE says which runtime_probe to run: ``image`` (the image's own, e.g. the pre-flight image's),
``local`` (the copy mounted read-only at PROBE_PARENT/runtime_probe), ``auto`` (the image's own
when it has one, else the mounted copy).

Keep this file runnable by any Python 3 (it must be able to say "too old" on an old one): no
syntax or modules newer than 3.6 (annotations stay strings: they are never evaluated), standard
library only, and no import of runtime_probe.
"""

import importlib.util
import json
import os
import sys

MIN_PYTHON = (3, 11)  # runtime_probe's own floor (enum.StrEnum, datetime.UTC)


def _write(out_dir: str, facts: "dict[str, object]") -> None:
    tmp = os.path.join(out_dir, ".facts.json.tmp")
    with open(tmp, "w") as fh:
        json.dump(facts, fh)
    os.replace(tmp, os.path.join(out_dir, "facts.json"))


def _origin(name: str) -> "str | None":
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    return spec.origin or (list(spec.submodule_search_locations or []) or ["?"])[0]


def main(argv: "list[str]") -> int:
    out_dir, source, probe_parent = argv[0], argv[1], argv[2]
    probe_args = argv[4:] if len(argv) > 3 and argv[3] == "--" else argv[3:]
    facts: dict[str, object] = {  # a local annotation is never evaluated
        "status": "checking",
        "python": ".".join(str(v) for v in sys.version_info[:3]),
        "python_executable": sys.executable,
        "uid": os.getuid(),
        "gid": os.getgid(),
        "torch": None,
        "probe_source": None,
        "probe_path": None,
    }
    if tuple(sys.version_info[:2]) < MIN_PYTHON:
        facts["status"] = "python_too_old"
        _write(out_dir, facts)
        return 0
    # '' (the working directory) is sys.path[0] under -c: never let it shadow the image's modules
    sys.path[:] = [p for p in sys.path if p not in ("", os.getcwd())]
    facts["torch"] = _origin("torch")
    own = _origin("runtime_probe")
    env = dict(os.environ)
    first = [probe_parent] if source == "local" or (source == "auto" and own is None) else []
    # absolute entries only: an empty or relative one would put the working directory back
    # (runtime_probe/child/isolation.py, which this file may not import)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [*first, *env.get("PYTHONPATH", "").split(os.pathsep)] if os.path.isabs(p))
    if first:
        facts["probe_source"] = "injected"
        facts["probe_path"] = os.path.join(probe_parent, "runtime_probe")
        facts["image_probe_path"] = own
    elif own is not None:
        facts["probe_source"] = "image"
        facts["probe_path"] = own
    if facts["torch"] is None:
        facts["status"] = "no_torch"
    elif facts["probe_source"] is None:
        facts["status"] = "no_probe"
    else:
        facts["status"] = "probing"
    _write(out_dir, facts)
    if facts["status"] != "probing":
        return 0
    sys.stdout.flush()
    # -P: the image's working directory never shadows runtime_probe or torch (Python 3.11+, checked above)
    os.execve(sys.executable, [sys.executable, "-P", "-m", "runtime_probe", *probe_args], env)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

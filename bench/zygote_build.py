"""Issue 41 (CI's time): one build as the tests start it, a fresh interpreter against a fork of the
test worker's zygote (tests/tools/zygote.py), side by side.

Both arms run ``python -m aoti_guard build tests/integration/models.py:static --no-debug-twin``
with the tests' Inductor settings (tests/conftest.py) and a warm Inductor cache, interleaved, the
order rotating each round. Wall seconds from the client's side; CPU seconds of the build and
everything it waited for (its validation child, the compilers): the real arm's from this
process's reaped children, the forked arm's from the zygote's reaped children (/proc/PID/stat).

    python -m bench.zygote_build [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET = f"{REPO}/tests/integration/models.py:static"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _reaped_cpu_of(pid: int) -> float:
    """CPU seconds of PID's reaped children (cutime + cstime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    rounds = parser.parse_args().rounds
    sys.path.insert(0, str(REPO))
    from tests.conftest import _inductor_settings_for_the_tests
    from tests.tools.zygote import Zygote

    _inductor_settings_for_the_tests()
    zygote = Zygote()
    assert zygote.start() and zygote.pid is not None, "the zygote did not start"
    results: dict[str, list[tuple[float, float]]] = {"fresh interpreter": [], "zygote fork": []}
    with tempfile.TemporaryDirectory(prefix="bench-zygote-") as tmp:
        args = ["build", TARGET, "-o", f"{tmp}/m.pt2", "--no-debug-twin"]
        env = dict(os.environ)
        subprocess.run([sys.executable, "-m", "aoti_guard", *args], capture_output=True, check=True, env=env)  # warm the caches
        for round_no in range(rounds):
            arms = list(results) if round_no % 2 == 0 else list(reversed(results))
            for arm in arms:
                cpu0 = _children_cpu() if arm == "fresh interpreter" else _reaped_cpu_of(zygote.pid)
                t0 = time.perf_counter()
                if arm == "fresh interpreter":
                    done = subprocess.run([sys.executable, "-m", "aoti_guard", *args], capture_output=True, text=True, env=env)
                else:
                    forked = zygote.run("aoti_guard", args, env=env)
                    assert forked is not None, "the zygote stepped aside"
                    done = forked
                wall = time.perf_counter() - t0
                cpu = (_children_cpu() if arm == "fresh interpreter" else _reaped_cpu_of(zygote.pid)) - cpu0
                assert done.returncode == 0, done.stderr[-2000:]
                results[arm].append((wall, cpu))
    zygote.close()
    print(f"a build of the static model (--no-debug-twin, warm Inductor cache), median of {rounds}:")
    medians = {arm: (statistics.median(w for w, _ in r), statistics.median(c for _, c in r)) for arm, r in results.items()}
    for arm, r in results.items():
        walls = ", ".join(f"{w:.2f}" for w, _ in r)
        print(f"  {arm:20s} {medians[arm][0]:6.2f} s wall  {medians[arm][1]:6.2f} CPU-s   walls: {walls}")
    fresh, fork = medians["fresh interpreter"], medians["zygote fork"]
    print(f"  fork / fresh          {fork[0] / fresh[0]:6.2f} wall   {fork[1] / fresh[1]:6.2f} CPU")


if __name__ == "__main__":
    main()

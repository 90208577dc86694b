"""Issue 41 (CI's time): one build as the tests start it, a fresh interpreter against a fork of the
test worker's zygote (tests/tools/zygote.py), side by side.

Both arms run ``python -m aoti_guard build tests/integration/models.py:static --no-debug-twin``
with the tests' Inductor settings (tests/conftest.py) and a warm Inductor cache, interleaved, the
order rotating each round. Wall seconds from the client's side; CPU seconds of the build and
everything it waited for (its validation child, the compilers): the real arm's from this
process's reaped children (bench/_common.py), the forked arm's from the zygote's (/proc/PID/stat).

    python -m bench.zygote_build [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from bench._common import Sample, interleave, measure, run_timed, summarize

REPO = Path(__file__).resolve().parents[1]
TARGET = f"{REPO}/tests/integration/models.py:static"


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
    zygote_pid = zygote.pid
    with tempfile.TemporaryDirectory(prefix="bench-zygote-") as tmp:
        args = ["build", TARGET, "-o", f"{tmp}/m.pt2", "--no-debug-twin"]
        env = dict(os.environ)

        def forked() -> Sample:
            cpu0 = _reaped_cpu_of(zygote_pid)  # the fork is the zygote's child, not ours
            with measure() as m:
                done = zygote.run("aoti_guard", args, env=env)
            assert done is not None and done.returncode == 0, "the zygote stepped aside" if done is None else done.stderr[-2000:]
            return Sample(m["seconds"], _reaped_cpu_of(zygote_pid) - cpu0, m["foreign_cores"])

        arms = [("fresh interpreter", lambda: run_timed([sys.executable, "-m", "aoti_guard", *args], env=env)), ("zygote fork", forked)]
        results = interleave(arms, rounds)  # its warm-up round warms the Inductor cache
    zygote.close()
    print(f"a build of the static model (--no-debug-twin, warm Inductor cache), median of {rounds}:")
    medians = {arm: (summarize([x.seconds for x in r]).median, summarize([x.own_cpu_s for x in r]).median) for arm, r in results.items()}
    for arm, r in results.items():
        walls = ", ".join(f"{x.seconds:.2f}" for x in r)
        print(f"  {arm:20s} {medians[arm][0]:6.2f} s wall  {medians[arm][1]:6.2f} CPU-s   walls: {walls}")
    fresh, fork = medians["fresh interpreter"], medians["zygote fork"]
    print(f"  fork / fresh          {fork[0] / fresh[0]:6.2f} wall   {fork[1] / fresh[1]:6.2f} CPU")


if __name__ == "__main__":
    main()

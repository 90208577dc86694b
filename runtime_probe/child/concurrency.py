"""Throughput at several caller counts (``probe --threads``): N Python threads call one loaded
model at once for a fixed time, as a serving process's request threads do. Standard library only;
the caller passes the call, so this module never imports torch.

AOTInductor's runner releases the GIL while it runs, so N threads can overlap inside the model
when the package was loaded with N runners (``num_runners``); with the default one runner, each
call waits for the one before it and the calls/s stays that of one caller.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["measure"]


def measure(call: Callable[[], Any], callers: int, seconds: float, intra_op: Callable[[], int]) -> dict[str, Any]:
    """``callers`` threads each calling ``call`` until ``seconds`` have passed (a call that began
    before the end counts whole). Returns calls, seconds (wall, all threads joined), calls_per_s,
    per_caller (each thread's calls) and intra_op_threads (what ``intra_op`` says inside a caller
    thread: a CPU package's OpenMP regions take their thread count from the calling thread, which
    need not be the main thread's ``torch.get_num_threads()``). Raises the first caller's error."""
    done = [0] * callers
    seen = [0] * callers
    errors: list[BaseException] = []
    start = threading.Barrier(callers + 1)
    deadline = [0.0]

    def caller(index: int) -> None:
        seen[index] = intra_op()
        start.wait()
        try:
            while time.perf_counter() < deadline[0] and not errors:
                call()
                done[index] += 1
        except BaseException as exc:  # noqa: BLE001 - handed to the requesting thread below
            errors.append(exc)

    threads = [threading.Thread(target=caller, args=(i,), name=f"caller-{i}", daemon=True) for i in range(callers)]
    for t in threads:
        t.start()
    begun = time.perf_counter()
    deadline[0] = begun + seconds
    start.wait()
    for t in threads:
        t.join()
    wall = time.perf_counter() - begun
    if errors:
        raise errors[0]
    total = sum(done)
    return {
        "callers": callers,
        "calls": total,
        "seconds": round(wall, 4),
        "calls_per_s": round(total / wall, 2) if wall > 0 else None,
        "per_caller": done,
        "intra_op_threads": max(seen),
    }

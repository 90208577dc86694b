"""child.Worker: crashes, hangs, floods and errors of the child become data, never our crash."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from runtime_probe.child.worker import BoundedCapture, ChildCrashed, ChildRaised, ChildTimeout, Worker, native_lines, python_stack

SELFTEST = {"RUNTIME_PROBE_SELFTEST": "1"}


def test_ping_round_trip() -> None:
    with Worker(env=SELFTEST) as w:
        assert w.request("ping", 30)["pid"] == w.pid


@pytest.mark.parametrize("sig", ["SIGSEGV", "SIGABRT", "SIGILL", "SIGBUS"])
def test_signal_becomes_crash_with_evidence(sig: str) -> None:
    with Worker(env=SELFTEST) as w:
        with pytest.raises(ChildCrashed) as info:
            w.request("selftest", 30, action="signal", name=sig)
    exc = info.value
    assert exc.signal == sig
    assert exc.returncode == -getattr(signal, sig)
    assert "about to die" in exc.stdout
    assert "Error: selftest native failure" in exc.evidence["native"]
    # faulthandler's Python stack names the op that was running
    assert any("op_selftest" in frame for frame in exc.evidence["python_stack"])


def test_what_the_child_wrote_before_raising_is_in_the_exception() -> None:
    """The reply and the child's stderr travel on different pipes: the capture must hold every byte
    written before the reply (the twin's "At least one NaN in buf3" is such a line)."""
    with Worker(env=SELFTEST) as w:
        for i in range(200):
            with pytest.raises(ChildRaised) as info:
                w.request("selftest", 30, action="raise", note=f"native reason {i}")
            assert f"native reason {i}" in info.value.stderr, i


def test_exception_keeps_child_alive() -> None:
    with Worker(env=SELFTEST) as w:
        with pytest.raises(ChildRaised) as info:
            w.request("selftest", 30, action="raise")
        assert info.value.error_type == "RuntimeError"
        assert "selftest error" in info.value.message
        assert w.request("ping", 30)["pid"] == w.pid


def test_exit_without_answer_is_a_crash() -> None:
    with Worker(env=SELFTEST) as w:
        with pytest.raises(ChildCrashed) as info:
            w.request("selftest", 30, action="exit", code=7)
    assert info.value.returncode == 7 and info.value.signal is None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); check its state
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except OSError:
        return False


def test_timeout_kills_the_process_group(tmp_path) -> None:  # type: ignore[no-untyped-def]
    pidfile = tmp_path / "grandchild.pid"
    w = Worker(env=SELFTEST)
    started = time.monotonic()
    with pytest.raises(ChildTimeout):
        w.request("selftest", 5, action="hang", pidfile=str(pidfile))
    assert time.monotonic() - started < 30
    w.close()
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 10
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(grandchild), "the child's own child survived the timeout"
    assert not _alive(w.pid)


def test_output_flood_is_bounded() -> None:
    with Worker(env=SELFTEST) as w:
        assert w.request("selftest", 60, action="print", kib=8 * 1024) == "printed"  # 8 MiB on each stream
        time.sleep(0.5)
    assert w.stdout.total >= 8 * 1024 * 1024
    assert len(w.stdout.head) + len(w.stdout.tail) <= 64 * 1024 + 1024 * 1024
    assert w.stdout.dropped > 0
    assert "bytes not kept" in w.stdout.text()


def test_killed_child_reports_sigkill() -> None:
    with Worker(env=SELFTEST) as w:
        w.submit("selftest", action="hang", pidfile=os.devnull)
        time.sleep(1.0)
        os.kill(w.pid, signal.SIGKILL)  # what the OOM killer does
        with pytest.raises(ChildCrashed) as info:
            w.collect("selftest", 30)
    assert info.value.signal == "SIGKILL"


@pytest.mark.parametrize("prefix", [(), ("env",)], ids=["fast exit", "under a prefix: ordinary exit"])
def test_close_ends_the_child_cleanly(prefix: tuple[str, ...]) -> None:
    w = Worker(env=SELFTEST, prefix=prefix)
    assert w.request("ping", 30)["pid"]
    w.close()
    assert w.proc.returncode == 0
    assert not _alive(w.pid)


def test_selftest_ops_are_off_by_default() -> None:
    with Worker(env={"RUNTIME_PROBE_SELFTEST": None}) as w:
        with pytest.raises(ChildRaised) as info:
            w.request("selftest", 30, action="raise")
    assert info.value.error_type == "KeyError"


def test_bounded_capture_since_mark() -> None:
    cap = BoundedCapture(head=8, tail=16)
    cap.feed(b"0123456789")
    mark = cap.total
    cap.feed(b"abcdef")
    assert cap.since(mark) == "abcdef"
    cap.feed(b"X" * 100)
    assert cap.dropped > 0
    assert cap.text().startswith("01234567")


def test_parsers_of_faulthandler_output() -> None:
    stderr = (
        "Error: input_handles[0]: unmatched dtype\n"
        "Fatal Python error: Segmentation fault\n\n"
        "Current thread 0x00007f (most recent call first):\n"
        '  File "/x/_ops.py", line 10 in op_load\n'
        '  File "/x/_worker.py", line 40 in main\n'
        "\nExtension modules: torch._C (total: 1)\n"
    )
    assert python_stack(stderr) == ["/x/_ops.py:10 in op_load", "/x/_worker.py:40 in main"]
    assert native_lines(stderr) == ["Error: input_handles[0]: unmatched dtype"]


def test_a_device_assert_in_a_run_is_run_device_assert_naming_the_line() -> None:
    """Issue 13 case 4: the golden phase said run.error for a device-side assert."""
    from runtime_probe.child.failures import Reporter, failure_finding
    from runtime_probe.child.worker import ChildRaised

    stderr = (
        "/tmp/x.py:18: triton_poi_fused_embedding_0: block: [0,0,0], thread: [5,0,0] Assertion `index out of bounds: 0 <= tmp4 < 1000` failed.\n"
        "Error: CUDA error: device-side assert triggered\n"
    )
    exc = ChildRaised("run", "", stderr, 0.1, evidence={"type": "RuntimeError", "message": "CUDA error: device-side assert triggered"})
    f = failure_finding(exc, "running the --inputs", "run", Reporter("golden"))
    assert f.code == "run.device_assert" and "0 <= tmp4 < 1000" in (f.found or "")
    cpu = ChildRaised(
        "run", "", "", 0.1, evidence={"type": "IndexError", "message": "index 5 is out of bounds for dimension 0 with size 3"}
    )
    assert failure_finding(cpu, "running", "run", Reporter("golden")).code == "run.error"


def test_a_gpu_out_of_memory_gets_the_gpu_hint_not_the_ulimit_one() -> None:
    """The GPU zoo: gpt2's compiled run at its max sample raised torch's OutOfMemoryError in the
    validation child; the host-memory hint (ulimit, the container's limit) sent a user the wrong way."""
    from runtime_probe.child.failures import Reporter, failure_finding
    from runtime_probe.child.worker import ChildRaised

    message = "CUDA out of memory. Tried to allocate 3.07 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.2 GiB is free."
    gpu = ChildRaised("run", "", "", 0.1, evidence={"type": "OutOfMemoryError", "message": message})
    f = failure_finding(gpu, "running the compiled release model on golden sample max", "run", Reporter("golden"))
    assert f.code == "run.error" and "GPU ran out of memory" in (f.hint or "") and "nvidia-smi" in (f.hint or "")
    host = ChildRaised("run", "", "", 0.1, evidence={"type": "MemoryError", "message": "std::bad_alloc"})
    h = failure_finding(host, "running", "run", Reporter("golden"))
    assert "ulimit" in (h.hint or "") and "GPU" not in (h.hint or "")


def test_the_input_that_broke_the_table_bounds_is_named(tmp_path: Path) -> None:
    import torch

    from runtime_probe.formats import safetensors as _safetensors
    from runtime_probe.package.manifest import InputSpec, TensorSpec
    from runtime_probe.probe.input_values import name_the_index

    ids = torch.randint(0, 1000, (4, 6))
    ids[2, 5] = 1_000_000_000
    path = tmp_path / "ids.safetensors"
    _safetensors.dump({"x": torch.randn(3), "ids": ids}, str(path))
    specs = [
        InputSpec("x", "x", "tensor", 0, TensorSpec("float32", (3,), (1,), True, "cuda")),
        InputSpec("ids", "ids", "tensor", 1, TensorSpec("int64", (4, 6), (6, 1), True, "cuda")),
    ]
    line = "Assertion `index out of bounds: 0 <= tmp4 < 1000` failed."
    header = _safetensors.read_header(str(path))
    assert name_the_index(line, str(path), header, specs) == "ids holds 1000000000 at [2, 5]; the table has 1000 rows"
    assert name_the_index("device-side assert triggered", str(path), header, specs) is None


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"  # a zombie has died already
    except FileNotFoundError:
        return True


def test_the_child_dies_with_the_probe(tmp_path: Path) -> None:
    """Issue 16 (5): the child runs in a session of its own (so a timeout kills its group); killed
    outright, the probe must not leave it running (PR_SET_PDEATHSIG)."""
    import subprocess
    import sys

    # the child is busy (a hang in "native" code): it never reads the EOF of its request pipe
    script = (
        "import sys, time\nfrom runtime_probe.child.worker import Worker\nw = Worker()\nw.request('ping', 60)\n"
        "w.submit('selftest', action='hang', pidfile=sys.argv[1])\nprint(w.pid, flush=True)\ntime.sleep(120)\n"
    )
    pidfile = tmp_path / "grandchild.pid"
    env = {**os.environ, "RUNTIME_PROBE_SELFTEST": "1"}
    parent = subprocess.Popen([sys.executable, "-c", script, str(pidfile)], stdout=subprocess.PIPE, text=True, env=env)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    deadline = time.monotonic() + 30
    while not pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.1)  # the child is inside the hanging op
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 15
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    try:
        assert _gone(child), "the child outlived the killed probe"
    finally:
        for pid in (child, int(pidfile.read_text()) if pidfile.exists() else None):
            if pid is not None and not _gone(pid):
                os.kill(pid, signal.SIGKILL)  # the hang's own grandchild: PDEATHSIG covers the child only


def test_a_device_assert_on_the_inputs_names_the_id_in_the_golden_phase(tmp_path: Path) -> None:
    """Issue 13 case 4, the wiring: a package with no recorded value range (built before 1.1, or by
    torch alone) runs the --inputs and the child reports Triton's bounds assert; the golden phase's
    finding is run.device_assert and names the input, the value and its index."""
    import json
    from typing import Any

    import torch

    from runtime_probe.child.worker import ChildRaised
    from runtime_probe.formats import safetensors as _safetensors
    from runtime_probe.package.manifest import parse_manifest
    from runtime_probe.probe.options import ProbeOptions
    from runtime_probe.probe.phases import Device, Shared, golden_phase

    from .test_manifest import minimal

    m = minimal()
    ids = {"dtype": "int64", "shape": [4, 6], "stride": [6, 1], "contiguous": True, "device": "cuda"}
    m["io"].update(
        params=[{"name": "ids", "kind": "positional_or_keyword", "passed": "positional"}],
        inputs=[{"name": "ids", "param": "ids", "kind": "tensor", "index": 0, "tensor": ids}],
        symbols=[],
    )
    m["target"]["device_type"] = "cuda"
    del m["golden"]
    bad = torch.randint(0, 1000, (4, 6))
    bad[2, 5] = 1_000_000_000
    inputs = tmp_path / "ids.safetensors"
    _safetensors.dump({"ids": bad}, str(inputs))
    stderr = (
        "/tmp/x.py:18: triton_poi_fused_embedding_0: block: [0,0,0], thread: [5,0,0] Assertion `index out of bounds: 0 <= tmp4 < 1000` failed.\n"
        "Error: CUDA error: device-side assert triggered\n"
    )

    class Worker:
        def request(self, op: str, timeout: float, **kwargs: Any) -> dict[str, Any]:
            assert op == "run" and kwargs["sample"]["id"] == "inputs"
            raise ChildRaised(
                "run", "", stderr, 0.1, evidence={"type": "RuntimeError", "message": "CUDA error: device-side assert triggered"}
            )

    shared = Shared(
        str(tmp_path / "m.pt2"), ProbeOptions(inputs=str(inputs)), str(tmp_path), manifest=parse_manifest(json.dumps(m).encode())
    )
    shared.archive = object()  # type: ignore[assignment]  # the phase only needs the archive phase to have run
    findings, _detail, _go_on = golden_phase(shared, Device("cuda", 0, worker=Worker()))  # type: ignore[arg-type]
    assert [f.code for f in findings if f.severity.value == "error"] == ["run.device_assert"]
    named = next(f for f in findings if f.code == "run.device_assert")
    assert named.message.startswith("ids holds 1000000000 at [2, 5]; the table has 1000 rows"), named.message
    assert named.evidence["named"] == "ids holds 1000000000 at [2, 5]; the table has 1000 rows"

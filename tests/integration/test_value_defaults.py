"""Issue 25, defect 2: by default no request can take the serving process down.

On main, ``runtime_probe.load`` read no value unless asked (``check_values=False``), and a CPU
DistilBERT package called with ``input_ids=ids + 5000`` aborted the whole process in native code
(``terminate called after throwing an instance of 'c10::Error' ... index out of bounds``, exit 134).
Now the CPU default reads the ids before the call and raises ``input.value_range``; the device-side
design ("device", the CUDA default) is checked here on CPU tensors, end to end through a package.
The calls that could abort run in a child process, so a regression fails the test, not the run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

_CALL = """
import sys, warnings
warnings.filterwarnings("ignore")
import torch, runtime_probe
from runtime_probe.reporting.errors import InputContractError
model = runtime_probe.load(sys.argv[1], **({"check_values": False} if sys.argv[2] == "off" else {}))
torch.manual_seed(0)
ids, mask = torch.randint(0, 1000, (2, 12)), torch.ones(2, 12, dtype=torch.int64)
try:
    model(input_ids=ids + 5000, attention_mask=mask)
    print("accepted")
except InputContractError as exc:
    print("refused", exc.code, exc.argument, str(exc).splitlines()[0])
print("alive, next call:", tuple(model(input_ids=ids, attention_mask=mask).logits.shape))
"""


def _call(package: Path, values: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    """``values``: "default" (load's defaults) or "off" (check_values=False). The child's TMPDIR is
    ``tmp``: torch's loader extracts the package into a folder there, which a process aborted in
    native code never removes (it was left in the system's TMPDIR by every run)."""
    env = {**os.environ, "TMPDIR": str(tmp)}
    return subprocess.run([sys.executable, "-c", _CALL, str(package), values], capture_output=True, text=True, timeout=300, env=env)


def test_an_id_past_the_vocabulary_is_refused_and_the_process_lives(guard_pkg: Callable[[str], Path], tmp_path: Path) -> None:
    proc = _call(guard_pkg("distilbert"), "default", tmp_path)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-1500:]}"
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("refused input.value_range input_ids input_ids holds 50"), proc.stdout
    assert lines[0].endswith("the table has 1000 rows (valid values: 0..999)"), proc.stdout
    assert lines[1] == "alive, next call: (2, 3)"


def test_check_values_false_is_the_opt_out_and_risks_the_process(guard_pkg: Callable[[str], Path], tmp_path: Path) -> None:
    """What docs/api.md says the opt-out risks: the id reaches native code, which aborts on CPU."""
    proc = _call(guard_pkg("distilbert"), "off", tmp_path)
    assert proc.returncode < 0, (proc.returncode, proc.stdout, proc.stderr[-800:])  # killed by a signal (SIGABRT)
    assert proc.returncode == -signal.SIGABRT, proc.returncode
    # two of the kernel's threads may throw at once: then the C++ runtime's first words are
    # "terminate called recursively" and the c10::Error's name can be cut (seen under CI's load)
    assert "terminate called" in proc.stderr and "refused" not in proc.stdout and "alive" not in proc.stdout


def test_the_device_mode_returns_nan_for_a_bad_call_and_raises_at_the_sync(guard_pkg: Callable[[str], Path]) -> None:
    """check_values="device": clamped ids reach native code (no abort), the bad call's logits are
    NaN, raise_for_values() raises what "sync" raises; a good call is bit for bit the sync mode's."""
    import torch

    import runtime_probe
    from runtime_probe.reporting.errors import InputContractError

    package = guard_pkg("distilbert")
    device, sync = runtime_probe.load(package, check_values="device"), runtime_probe.load(package)
    assert (device.value_mode, sync.value_mode) == ("device", "sync")
    torch.manual_seed(1)
    ids, mask = torch.randint(0, 1000, (3, 10)), torch.ones(3, 10, dtype=torch.int64)
    assert device(input_ids=ids, attention_mask=mask).logits.equal(sync(input_ids=ids, attention_mask=mask).logits)
    device.raise_for_values()
    bad = ids.clone()
    bad[2, 7] = 1_000_000
    logits = device(input_ids=bad, attention_mask=mask).logits
    assert logits.shape == (3, 3) and bool(logits.isnan().all())
    with pytest.raises(InputContractError) as info:
        device.raise_for_values()
    assert (info.value.code, info.value.argument) == ("input.value_range", "input_ids")
    assert str(info.value).startswith("input_ids holds 1000000 at [2, 7]")
    with pytest.raises(InputContractError, match=r"input_ids holds 1000000 at \[2, 7\]"):
        sync(input_ids=bad, attention_mask=mask)
    assert not bool(device(input_ids=ids, attention_mask=mask).logits.isnan().any())

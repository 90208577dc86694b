"""probe/load_log.py: the model .so's own [AOTI_LOAD] lines as the load phase's evidence.

The lines are what a .so built by torch 2.15 printed on this CPU (issue 27): a package with its
weights logs its constant load, one built with package_constants_in_so=False prints nothing."""

from __future__ import annotations

from runtime_probe.probe.load_log import ENV, read_load_log

WITH_WEIGHTS = (
    "[WARNING] unrelated\n"
    "[AOTI_LOAD] load_constants: starting H2D copy of 12 constants\n"
    "[AOTI_LOAD] load_constants: H2D copy completed in 0 ms\n"
)
CAN_LOG = {"load_log": True, "did_call_load_constants": True, "constants_from_cpu": True}
CANNOT_LOG = {"load_log": False, "did_call_load_constants": False, "constants_from_cpu": True}


def test_a_so_that_loaded_its_constants() -> None:
    log = read_load_log(WITH_WEIGHTS, CAN_LOG, ENV)
    assert log.constants == 12 and not log.loaded_none
    assert log.lines == (
        "[AOTI_LOAD] load_constants: starting H2D copy of 12 constants",
        "[AOTI_LOAD] load_constants: H2D copy completed in 0 ms",
    )
    assert log.to_detail() == {"lines": list(log.lines), "so_logs_loading": True, "constants_loaded_by_so": 12}


def test_a_weightless_so_says_it_loaded_none() -> None:
    assert read_load_log("", CAN_LOG, ENV).loaded_none


def test_silence_means_nothing_when_the_so_cannot_log_or_was_not_asked() -> None:
    assert not read_load_log("", CANNOT_LOG, ENV).loaded_none  # built before 2.14
    assert not read_load_log("", None, ENV).loaded_none  # its .so could not be read
    assert not read_load_log("", CAN_LOG, {}).loaded_none  # AOTI_LOG_LOADING unset
    assert not read_load_log("", CAN_LOG, {"AOTI_LOG_LOADING": "0"}).loaded_none

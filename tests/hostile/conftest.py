"""The attack pass runs on the integration tests' real packages (built once per run, shared)."""

from tests.integration.conftest import pkg_dir, static_pkg  # noqa: F401 (session fixtures re-exported)

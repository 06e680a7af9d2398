"""The real-runtime tier: fixtures for the installed tools, the scripted model
endpoint, bounded processes and a real OpenClaw Gateway.

Each test module that drives a real tool sets ``pytestmark = pytest.mark.real_runtimes``
(excluded from the default run); select them with ``pytest -m real_runtimes`` after
``bash .ci/runtimes.sh``. The model server's own tests need no install and run by default.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.real_runtimes.gateway import GatewayProcess
from tests.real_runtimes.hermetic import SKIPPED, ProcessGroups, Tool, installed
from tests.real_runtimes.model_server import ModelServer, Script


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    report.real_runtime = item.get_closest_marker("real_runtimes") is not None


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """One line saying how many real-runtime cases ran, and which tools were skipped."""
    counts: dict[str, int] = {}
    for outcome in ("passed", "failed", "error", "skipped"):
        for report in terminalreporter.stats.get(outcome, []):
            if getattr(report, "real_runtime", False) and (
                report.when == "call" or outcome in ("skipped", "error")
            ):
                counts[outcome] = counts.get(outcome, 0) + 1
    if not counts:
        return
    summary = ", ".join(f"{n} {outcome}" for outcome, n in counts.items())
    terminalreporter.write_sep("=", f"real runtimes: {summary}")
    for tool, detail in sorted(SKIPPED.items()):
        terminalreporter.write_line(
            f"REAL RUNTIME NOT RUN: {tool} could not be installed ({detail})", red=True
        )


@pytest.fixture
def processes() -> Iterator[ProcessGroups]:
    groups = ProcessGroups()
    yield groups
    groups.kill_all()


@pytest.fixture
def model_server(tmp_path: Path) -> Iterator[ModelServer]:
    server = ModelServer(log_file=tmp_path / "model-requests.jsonl").start()
    yield server
    server.stop()


@pytest.fixture
def claude_code() -> Tool:
    return installed("claude-code")


@pytest.fixture
def codex() -> Tool:
    return installed("codex")


@pytest.fixture
def hermes() -> Tool:
    return installed("hermes")


@pytest.fixture(scope="session")
def _gateway_session(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[GatewayProcess, ModelServer]]:
    """One real gateway for the session (it takes seconds to start and ~1 GB)."""
    tool = installed("openclaw")
    root = tmp_path_factory.mktemp("openclaw")
    server = ModelServer(log_file=root / "model-requests.jsonl").start()
    gateway = GatewayProcess(tool=tool, root=root, model_url_v1=server.url_v1).start()
    try:
        gateway.wait_ready()
        yield gateway, server
    finally:
        gateway.stop()
        server.stop()


@pytest.fixture
def gateway(_gateway_session: tuple[GatewayProcess, ModelServer]) -> Iterator[GatewayProcess]:
    gateway, server = _gateway_session
    server.script = Script()
    yield gateway
    server.script = Script()


@pytest.fixture
def gateway_model(_gateway_session: tuple[GatewayProcess, ModelServer]) -> ModelServer:
    """The model server behind the session's gateway; set ``.script`` per test."""
    return _gateway_session[1]

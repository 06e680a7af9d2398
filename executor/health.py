"""The preflight: can this agent's runtime run here, where this worker runs it?

A one-shot CLI's binary must resolve (on the PATH its runs would see, or as its
``binary`` setting names it) and answer its version probe; a ``command`` agent's
argv[0] must resolve; an ``openclaw`` agent's gateway must answer the operator
handshake. ``human`` agents have nothing to probe. The verdict is stored on the
agent (:func:`core.registry.record_health`): the claim statement refuses an
unhealthy agent, and the admin, the board, ``/api/agents`` and ``/healthz`` show it.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from core import registry
from core.models import Agent
from core.procs import run_within
from executor import gateway
from executor.runtimes import RunRequest, adapter_for, capabilities
from executor.runtimes.base import executable_missing
from executor.runtimes.oneshot import OneShotCliAdapter, SettingsError, child_environment

VERSION_TIMEOUT_S = 20.0
DETAIL_MAX = 300


@dataclass(frozen=True)
class Health:
    ok: bool
    detail: str


def probe_interval_s() -> float:
    """How often a worker re-probes its agents (``CLAWBOO_HEALTH_PROBE_MS``)."""
    return float(settings.CLAWBOO_HEALTH_PROBE_MS) / 1000.0


def probe(agent: Agent) -> Health:
    """The preflight of ``agent`` in this process's environment."""
    if not capabilities(agent.runtime).automated:
        return Health(True, "a person works it: nothing to probe")
    adapter = adapter_for(agent.runtime)
    if isinstance(adapter, OneShotCliAdapter):
        return _probe_cli(adapter, agent)
    return _probe_gateway()


def _probe_cli(adapter: OneShotCliAdapter, agent: Agent) -> Health:
    with tempfile.TemporaryDirectory(prefix="clawboo-preflight-") as tmp:
        request = RunRequest(
            task_id="preflight",
            title="preflight",
            prompt="",
            cwd=Path(tmp),
            timeout_s=VERSION_TIMEOUT_S,
            settings=dict(agent.settings or {}),
        )
        try:
            name = adapter.executable_name(request)
        except SettingsError as exc:
            return Health(False, f"bad {agent.runtime} settings: {exc}")
        if agent.runtime == "command" and os.sep in name and not os.path.isabs(name):
            # Relative to the task's checkout, which exists only when a run starts.
            return Health(True, f"{name} (resolved in the task's checkout)")
        env = child_environment(request)
        path = adapter.locate(name, request, env)
        if path is None:
            return Health(False, executable_missing(name))
        if agent.runtime == "command" or not version_probe():
            return Health(True, path)  # argv[0] resolving is a command agent's preflight
        return _version(path, env)


def version_probe() -> bool:
    """Whether the preflight asks a CLI for its version (``CLAWBOO_HEALTH_VERSION_PROBE``,
    on by default), beyond finding its binary."""
    return bool(settings.CLAWBOO_HEALTH_VERSION_PROBE)


def _version(path: str, env: dict[str, str]) -> Health:
    try:
        done = run_within([path, "--version"], VERSION_TIMEOUT_S, env=env)
    except OSError as exc:
        return Health(False, f"{path} --version could not start: {exc}")
    if done is None:
        return Health(False, f"{path} --version did not answer in {VERSION_TIMEOUT_S:g}s")
    text = (done.stdout or done.stderr or "").strip().splitlines()
    first = text[0][:DETAIL_MAX] if text else ""
    if done.returncode != 0:
        return Health(False, f"{path} --version exited {done.returncode}: {first}")
    return Health(True, f"{path}: {first}" if first else path)


def _probe_gateway() -> Health:
    config = gateway.configured()
    if config is None:
        return Health(False, gateway.NOT_CONFIGURED)
    try:
        with gateway.GatewayClient(config):
            pass
    except gateway.GatewayUnavailable as exc:
        return Health(False, f"gateway unreachable: {exc.detail}"[:DETAIL_MAX])
    except gateway.GatewayRejected as exc:
        return Health(False, f"gateway refused the operator: {exc.detail}"[:DETAIL_MAX])
    return Health(True, f"gateway {config.url} answers")


def check(agent: Agent) -> Health:
    """Probe ``agent`` and store the verdict on it."""
    health = probe(agent)
    registry.record_health(agent.id, health.ok, health.detail)
    return health

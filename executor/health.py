"""The preflight: can this agent's runtime run here, where this worker runs it?

A one-shot CLI's binary must resolve (on the PATH its runs would see, or as its
``binary`` setting names it) and answer its version probe; a ``command`` agent's
argv[0] must resolve (:mod:`executor.preflight`, which a remote worker asks on its
own host too); an ``openclaw`` agent's gateway must answer the operator
handshake. ``human`` agents have nothing to probe. The verdict is stored on the
agent (:func:`core.registry.record_health`): the claim statement refuses an
unhealthy agent, and the admin, the board, ``/api/agents`` and ``/healthz`` show it.
"""

from __future__ import annotations

from django.conf import settings

from core import registry
from core.models import Agent
from executor import gateway
from executor.preflight import DETAIL_MAX, Gate, Health
from executor.preflight import probe as probe_here

__all__ = ["Gate", "Health", "check", "probe", "probe_interval_s", "version_probe"]


def probe_interval_s() -> float:
    """How often a worker re-probes its agents (``CLAWBOO_HEALTH_PROBE_MS``)."""
    return float(settings.CLAWBOO_HEALTH_PROBE_MS) / 1000.0


def probe(agent: Agent) -> Health:
    """The preflight of ``agent`` in this process's environment
    (:func:`executor.preflight.probe`, with the gateway's handshake)."""
    return probe_here(
        agent.runtime, agent.settings, version=version_probe(), gateway=_probe_gateway
    )


def version_probe() -> bool:
    """Whether the preflight asks a CLI for its version (``CLAWBOO_HEALTH_VERSION_PROBE``,
    on by default), beyond finding its binary."""
    return bool(settings.CLAWBOO_HEALTH_VERSION_PROBE)


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

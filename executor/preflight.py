"""The preflight without Django: can an agent's runtime run on this host? And the
one gate every worker asks before it claims for an agent (:class:`Gate`).

A one-shot CLI's binary must resolve (on the PATH its runs would see, or as its
``binary`` setting names it) and answer its version probe; a ``command`` agent's
argv[0] must resolve. The local executor (:meth:`executor.runner.Executor.before`,
through :mod:`executor.health`, which adds the gateway's handshake and stores the
verdict on the agent) and the remote worker (:class:`executor.remote.Worker`, on
its own host) gate their claims through the same :class:`Gate`: probed again every
``CLAWBOO_HEALTH_PROBE_MS`` and whenever the agent changed, no claim while it fails.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.procs import run_within
from executor.runtimes.base import RunRequest, executable_missing
from executor.runtimes.oneshot import OneShotCliAdapter, SettingsError, child_environment
from executor.runtimes.registry import UnknownRuntime, adapter_for, capabilities

VERSION_TIMEOUT_S = 20.0
DETAIL_MAX = 300
DEFAULT_PROBE_MS = 30_000


def probe_interval_s() -> float:
    """How often a worker off the server probes its agents again: the environment's
    ``CLAWBOO_HEALTH_PROBE_MS``, as the server's settings read it (30 s)."""
    try:
        return int(os.environ.get("CLAWBOO_HEALTH_PROBE_MS", DEFAULT_PROBE_MS)) / 1000
    except ValueError:
        return DEFAULT_PROBE_MS / 1000


def version_probe() -> bool:
    """Whether a worker off the server asks a CLI for its version: the environment's
    ``CLAWBOO_HEALTH_VERSION_PROBE``, as the server's settings read it (on)."""
    raw = os.environ.get("CLAWBOO_HEALTH_VERSION_PROBE")
    return raw is None or raw.strip().lower() in {"1", "true", "yes", "on"}


@dataclass(frozen=True)
class Health:
    ok: bool
    detail: str


def probe(
    runtime: str,
    settings: Mapping[str, Any] | None,
    *,
    version: bool = True,
    gateway: Callable[[], Health] | None = None,
) -> Health:
    """The preflight of an agent running ``runtime`` with ``settings`` on this host:
    its CLI (asked ``--version`` when ``version``), or ``gateway`` for a runtime
    reached through one (None: nothing to probe here)."""
    if not capabilities(runtime).automated:
        return Health(True, "a person works it: nothing to probe")
    adapter = adapter_for(runtime)
    if isinstance(adapter, OneShotCliAdapter):
        return _probe_cli(adapter, runtime, settings, version)
    if gateway is None:
        return Health(True, f"{runtime}: nothing to probe on this host")
    return gateway()


def _probe_cli(
    adapter: OneShotCliAdapter, runtime: str, settings: Mapping[str, Any] | None, version: bool
) -> Health:
    with tempfile.TemporaryDirectory(prefix="clawboo-preflight-") as tmp:
        request = RunRequest(
            task_id="preflight",
            title="preflight",
            prompt="",
            cwd=Path(tmp),
            timeout_s=VERSION_TIMEOUT_S,
            settings=dict(settings or {}),
        )
        try:
            name = adapter.executable_name(request)
        except SettingsError as exc:
            return Health(False, f"bad {runtime} settings: {exc}")
        if runtime == "command" and os.sep in name and not os.path.isabs(name):
            # Relative to the task's checkout, which exists only when a run starts.
            return Health(True, f"{name} (resolved in the task's checkout)")
        env = child_environment(request)
        path = adapter.locate(name, request, env)
        if path is None:
            return Health(False, executable_missing(name))
        if runtime == "command" or not version:
            return Health(True, path)  # argv[0] resolving is a command agent's preflight
        return _version(path, env)


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


class Gate:
    """One agent's health gate on one worker: the last preflight, probed again
    every ``interval_s()`` seconds and whenever the agent changed (its ``version``:
    runtime and last edit), so installing a missing CLI puts it to work within one
    interval."""

    def __init__(self, interval_s: Callable[[], float]) -> None:
        self.interval_s = interval_s
        self.health: Health | None = None
        self._probed: tuple[Hashable, float] | None = None

    def due(self, version: Hashable) -> bool:
        """Whether the agent at ``version`` is to be probed again now."""
        return (
            self._probed is None
            or self._probed[0] != version
            or time.monotonic() - self._probed[1] >= self.interval_s()
        )

    def refusal(self, version: Hashable, check: Callable[[], Health]) -> str | None:
        """Why the agent takes no work on this host now (its preflight fails), or
        None; ``check`` probes it when :meth:`due`."""
        if self.due(version):
            self.health = check()
            self._probed = (version, time.monotonic())
        if self.health is not None and not self.health.ok:
            return f"agent is unhealthy: {self.health.detail}"
        return None


class AgentGates:
    """A remote worker's :class:`Gate` for each of its agents, over each agent as the
    server last showed it (``read`` asks again when a gate is due)."""

    def __init__(self, read: Callable[[str], Mapping[str, Any]]) -> None:
        self.read = read
        self.gates: dict[str, Gate] = {}
        self.seen: dict[str, Mapping[str, Any]] = {}

    def refusal(self, agent_id: str) -> str | None:
        """Why ``agent_id`` takes no work on this host (its runtime fails the
        preflight here), or None: probed again every ``CLAWBOO_HEALTH_PROBE_MS``
        (the agent read afresh then) and whenever it changed."""
        gate = self.gates.setdefault(agent_id, Gate(probe_interval_s))
        agent = self.seen.get(agent_id)
        if agent is None or gate.due((agent.get("runtime"), agent.get("updated_at"))):
            agent = self.read(agent_id)
        if "settings" not in agent:
            return None  # not this token's agent: the claim answers why (403)
        refused = not_runnable_here(agent)  # changed since the start
        if refused is not None:
            return refused  # claimed, it would only be handed back
        settings = agent.get("settings")
        return gate.refusal(
            (agent.get("runtime"), agent.get("updated_at")),
            lambda: probe(str(agent.get("runtime")), settings, version=version_probe()),
        )


def remote_refusal(agent: Mapping[str, Any]) -> str | None:
    """Why this host will not run ``agent`` (as ``GET /api/agents/{id}`` shows it),
    or None: a run that may ask a person about a tool call (its runtime's
    ``asks_people``) has no route to the board's prompt from here yet."""
    try:
        rule = capabilities(str(agent.get("runtime"))).asks_people
    except UnknownRuntime as exc:  # a runtime newer than this host's clawboo
        return f"agent {agent.get('id')!r}: {exc} on this host (upgrade clawboo here)"
    value = rule.asks(agent.get("settings")) if rule is not None else None
    if rule is None or value is None:
        return None
    return (
        f"agent {agent.get('id')!r} ({agent.get('runtime')}, {rule.setting} {value!r}) may "
        "ask for tool approvals, which a remote worker cannot route to the board yet: run "
        "it on the server (clawboo up / manage.py work), or set its "
        f"{rule.setting} to one of {', '.join(sorted(rule.never))}"
    )


def nothing_to_run(agents: Sequence[Mapping[str, Any]]) -> str | None:
    """Why a worker given ``agents`` would run none of them (:func:`not_runnable_here`
    for each: a person's or an outside agent's runtime), or None when it can run one.
    Such a worker polled for ever, its one line per agent lost in its log."""
    why = [not_runnable_here(agent) for agent in agents]
    if not agents or not all(why):
        return None
    named = "; ".join(f"agent {a.get('id')!r}: {w}" for a, w in zip(agents, why, strict=True))
    return f"{named} -- nothing for this worker to run (give it an agent it can run)"


class Refused(Exception):
    """This worker will not run an agent it was given (:func:`remote_refusal`)."""


def run_refusal(agent: Mapping[str, Any]) -> str | None:
    """Why a worker does not start the run its claim opened for ``agent`` (as ``GET
    /api/agents/{id}`` shows it after the claim), or None: it was paused since -- its
    breaker tripped on another run, or a person paused it (the local executor's
    message, :meth:`executor.runner.Executor.before`) -- its runtime needs a person,
    or this host will not run it (:func:`remote_refusal`: its settings changed since
    the worker started). The run is closed as not started and the server settles it
    by the local executor's rule (:func:`executor.settle.refuse_paused`)."""
    if agent.get("state") == "paused":
        return f"agent is paused: {agent.get('state_reason')}"
    return not_runnable_here(agent)


def not_runnable_here(agent: Mapping[str, Any]) -> str | None:
    """Why this host runs nothing for ``agent`` whatever its state, or None: its
    runtime needs a person, or :func:`remote_refusal`. Asked before each claim (an
    agent changed so since the worker started claims nothing more: claimed, it would
    only be handed back, again and again) and again before the run."""
    runtime = str(agent.get("runtime"))
    try:
        automated = capabilities(runtime).automated
    except UnknownRuntime:
        automated = True  # remote_refusal says why
    if not automated:
        return f"runtime {runtime!r} needs a person; the executor does not run it"
    return remote_refusal(agent)

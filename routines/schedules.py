"""The unified Scheduler surface: one merged read over exactly two sources.

* :class:`ClawbooRoutineScheduleSource` — ``team-task`` / ``managed``: a thin
  projection over the routines ledger, which Clawboo owns.
* :class:`OpenClawGatewayCronScheduleSource` — ``runtime-own-life`` /
  ``external-write``: the Gateway's own cron over its operator RPC, which Clawboo
  operates but never owns and never fires team work into.

``read()`` never raises: a source whose backend is down reports ``degraded`` with
what it has (a stale cache, or nothing). Writes route by the owning source and refuse
with a typed error the API maps to 403/422/404/409/503.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol, get_args

from core.errors import ValidationFailed
from executor import gateway
from executor.gateway import GatewayUnavailable
from routines import store as routine_store
from routines.errors import (
    ObserveOnlyError,
    ScheduleNotFound,
    TeamTaskDomainViolationError,
)
from routines.models import Routine

log = logging.getLogger(__name__)

Domain = Literal["team-task", "runtime-own-life"]
Manageability = Literal["managed", "external-write", "observe-only"]
ROUTINE_SOURCE = "clawboo-routine"
GATEWAY_SOURCE = "openclaw-gateway-cron"
GATEWAY_READ_TIMEOUT_S = 3.0


@dataclass(frozen=True)
class ScheduleRow:
    """The normalized schedule row every source projects."""

    id: str  # "<source>:<native id>"
    source: str
    domain: Domain
    manageability: Manageability
    name: str
    spec: str
    timezone: str | None
    enabled: bool
    status: str
    agent_id: str | None = None
    team: str | None = None
    next_run_at_ms: int | None = None
    last_run_at_ms: int | None = None
    last_error: str | None = None

    @property
    def native_id(self) -> str:
        """The id in the owning system (the part after ``<source>:``)."""
        return self.id.partition(":")[2]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class SourceRead:
    status: Literal["ok", "degraded"]
    rows: list[ScheduleRow] = field(default_factory=list)
    error: str | None = None


class ScheduleSource(Protocol):
    name: str
    domain: Domain
    manageability: Manageability

    def read(self) -> SourceRead: ...  # never raises

    def create(self, body: dict[str, Any]) -> ScheduleRow: ...

    def update(self, native_id: str, patch: dict[str, Any]) -> ScheduleRow: ...

    def delete(self, native_id: str) -> None: ...

    def run(self, native_id: str) -> dict[str, Any]: ...


def _is_team_task_body(body: dict[str, Any]) -> bool:
    """A create that asks for team-task work (the domain the ledger owns)."""
    return body.get("domain") == "team-task" or "task_template" in body or "team" in body


class ClawbooRoutineScheduleSource:
    name = ROUTINE_SOURCE
    domain: Domain = "team-task"
    manageability: Manageability = "managed"

    def __init__(self, team: str | list[str] | None = None) -> None:
        self.team = team

    def project(self, routine: Routine) -> ScheduleRow:
        return ScheduleRow(
            id=f"{self.name}:{routine.id}",
            source=self.name,
            domain=self.domain,
            manageability=self.manageability,
            name=str(routine.task_template.get("title") or routine_store.DEFAULT_TITLE),
            spec=routine.cron_spec,
            timezone=routine.timezone,
            enabled=routine.status != "paused",
            status=routine.status,
            agent_id=routine.agent_id,
            team=routine.team_id,
            next_run_at_ms=routine.next_run_at,
            last_run_at_ms=routine.last_run_at,
            last_error=routine.last_error,
        )

    def read(self) -> SourceRead:
        try:
            return SourceRead(
                "ok", [self.project(r) for r in routine_store.list_routines(team=self.team)]
            )
        except Exception as exc:  # read() never raises: degrade instead
            log.exception("routine schedule read failed")
            return SourceRead("degraded", [], f"routines ledger unreadable: {exc}")

    def create(self, body: dict[str, Any]) -> ScheduleRow:
        fields = {k: v for k, v in body.items() if k != "domain"}
        return self.project(routine_store.create_routine(**fields))

    def update(self, native_id: str, patch: dict[str, Any]) -> ScheduleRow:
        action = patch.get("action")
        if action == "pause":
            return self.project(routine_store.pause_routine(native_id))
        if action == "resume":
            return self.project(routine_store.resume_routine(native_id))
        return self.project(routine_store.update_routine(native_id, patch))

    def delete(self, native_id: str) -> None:
        routine_store.delete_routine(native_id)

    def run(self, native_id: str) -> dict[str, Any]:
        return self.project(routine_store.run_routine_now(native_id)).as_dict()


class OpenClawGatewayCronScheduleSource:
    """The Gateway's own-life cron. Read+write over ``cron.*``; never team tasks."""

    name = GATEWAY_SOURCE
    domain: Domain = "runtime-own-life"
    manageability: Manageability = "external-write"

    def __init__(
        self,
        config: gateway.GatewayConfig | None = None,
        *,
        timeout_s: float = GATEWAY_READ_TIMEOUT_S,
    ) -> None:
        self.config = config if config is not None else gateway.configured()
        self.timeout_s = timeout_s
        self._cache: list[ScheduleRow] = []

    def _call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if self.config is None:
            raise GatewayUnavailable("the OpenClaw gateway is not configured")
        with gateway.GatewayClient(self.config, timeout_s=self.timeout_s) as client:
            return client.request(method, params)

    def project(self, job: dict[str, Any]) -> ScheduleRow:
        schedule = job.get("schedule") or {}
        kind = schedule.get("kind")
        if kind == "cron":
            spec = str(schedule.get("expr", ""))
        elif kind == "every":
            spec = f"every {schedule.get('everyMs')}ms"
        elif kind == "at":
            spec = f"once@{schedule.get('at')}"
        else:
            spec = str(schedule)
        state = job.get("state") or {}
        enabled = bool(job.get("enabled", True))
        # The gateway seeds jobs of its own (heartbeat, memory, skills review), marked
        # by a declarationKey; it refuses cron clients' edits and removals of them, so
        # they are observe-only rows: nothing offers what the gateway would refuse.
        manageability: Manageability = (
            "observe-only" if job.get("declarationKey") else self.manageability
        )
        return ScheduleRow(
            id=f"{self.name}:{job.get('id')}",
            source=self.name,
            domain=self.domain,
            manageability=manageability,
            name=str(job.get("displayName") or job.get("name") or job.get("id")),
            spec=spec,
            timezone=schedule.get("tz"),
            enabled=enabled,
            status=str(state.get("lastStatus") or ("enabled" if enabled else "disabled")),
            # A job made without --agent runs as the gateway's default agent, which the
            # gateway names only as effectiveAgentId.
            agent_id=job.get("agentId") or job.get("effectiveAgentId"),
            next_run_at_ms=state.get("nextRunAtMs", job.get("nextRunAtMs")),
            last_run_at_ms=state.get("lastRunAtMs"),
            last_error=state.get("lastError"),
        )

    def read(self) -> SourceRead:
        if self.config is None:
            return SourceRead("degraded", [], "not configured")
        try:
            payload = self._call("cron.list", {"includeDisabled": True})
            self._cache = [
                self.project(j) for j in payload.get("jobs") or [] if isinstance(j, dict)
            ]
            return SourceRead("ok", list(self._cache))
        except Exception as exc:  # read() never raises: serve the stale cache, degraded
            detail = getattr(exc, "detail", None) or str(exc)
            return SourceRead("degraded", list(self._cache), detail)

    def create(self, body: dict[str, Any]) -> ScheduleRow:
        if _is_team_task_body(body):
            # Second wall (defense in depth): team work never goes into own-life cron.
            raise TeamTaskDomainViolationError(
                "a team-task schedule cannot be created in the gateway's own-life cron; "
                "create a Clawboo routine instead"
            )
        params = {k: v for k, v in body.items() if k != "domain"}
        # The gateway's default delivery ("announce") fails closed when it has no
        # channel: the run does its work and is still marked an error. Nothing is
        # announced unless the body asks for it.
        params.setdefault("delivery", {"mode": "none"})
        return self.project(self._call("cron.add", params))

    def update(self, native_id: str, patch: dict[str, Any]) -> ScheduleRow:
        action = patch.get("action")
        if action in ("pause", "resume"):
            patch = {"enabled": action == "resume"}
        return self.project(self._call("cron.update", {"id": native_id, "patch": patch}))

    def delete(self, native_id: str) -> None:
        self._call("cron.remove", {"id": native_id})

    def run(self, native_id: str) -> dict[str, Any]:
        return self._call("cron.run", {"id": native_id, "mode": "force"})


class ScheduleMultiplexer:
    """Fans exactly the two sources; routes writes by the owning source."""

    def __init__(self, sources: list[ScheduleSource] | None = None) -> None:
        self.sources: list[ScheduleSource] = (
            sources
            if sources is not None
            else [ClawbooRoutineScheduleSource(), OpenClawGatewayCronScheduleSource()]
        )

    def read(self) -> dict[str, Any]:
        """``{sources: [...], schedules: [...]}``; never raises (GET is always 200)."""
        out_sources: list[dict[str, Any]] = []
        rows: list[dict[str, Any]] = []
        for source in self.sources:
            try:
                result = source.read()
            except Exception as exc:  # a misbehaving source still cannot take the view down
                result = SourceRead("degraded", [], str(exc))
            entry: dict[str, Any] = {
                "name": source.name,
                "domain": source.domain,
                "manageability": source.manageability,
                "status": result.status,
            }
            if result.error:
                entry["error"] = result.error
            out_sources.append(entry)
            rows.extend(row.as_dict() for row in result.rows)
        return {"sources": out_sources, "schedules": rows}

    def source(self, name: str) -> ScheduleSource:
        for source in self.sources:
            if source.name == name:
                return source
        raise ScheduleNotFound(name)

    def _writable(self, name: str) -> ScheduleSource:
        source = self.source(name)
        if source.manageability == "observe-only":
            raise ObserveOnlyError(f"schedule source {name!r} is observe-only")
        return source

    def _split(self, schedule_id: str) -> tuple[ScheduleSource, str]:
        name, sep, native = schedule_id.partition(":")
        if not sep or not native:
            raise ScheduleNotFound(schedule_id)
        try:
            return self._writable(name), native
        except ScheduleNotFound:
            raise ScheduleNotFound(schedule_id) from None

    def create(self, source_name: str, body: dict[str, Any]) -> ScheduleRow:
        source = self._writable(source_name)
        named = body.get("domain", source.domain)
        if named not in get_args(Domain):
            raise ValidationFailed("domain", f"must be one of {', '.join(get_args(Domain))}")
        if named != source.domain:
            # A body that says it is the other domain's work is refused, never created
            # as this source's with the word dropped.
            raise TeamTaskDomainViolationError(
                f"source {source_name!r} holds {source.domain} schedules, not {named}"
            )
        if source.domain == "runtime-own-life" and _is_team_task_body(body):
            # First wall: refuse at the gate before the source is even asked.
            raise TeamTaskDomainViolationError(
                f"source {source_name!r} is runtime-own-life; team-task schedules "
                "belong to Clawboo routines"
            )
        return source.create(body)

    def update(self, schedule_id: str, patch: dict[str, Any]) -> ScheduleRow:
        source, native = self._split(schedule_id)
        return source.update(native, patch)

    def delete(self, schedule_id: str) -> None:
        source, native = self._split(schedule_id)
        source.delete(native)

    def run(self, schedule_id: str) -> dict[str, Any]:
        source, native = self._split(schedule_id)
        return source.run(native)

"""``/metrics``: Prometheus exposition (``prometheus_client``), for staff or a token.

Two kinds of series:

* **the deployment's**, read from the database at each scrape (the same answer
  from any server): tasks by team and status, ready-queue depth, claims,
  abandonments, lease lapses, stale-sweep releases, executions by runtime and
  outcome with their duration, tokens and cost, routine fires by outcome and
  lateness, each part's heartbeat age. Counters here are sums over durable rows
  (a claim is a task's ``attempts``), so they survive restarts and agree
  across hosts;
* **this process's**, kept in memory: request latency by route, claim conflicts
  answered (409 on a claim), open websocket clients. Scrape every server process
  for these.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable, Iterator
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings
from django.db import connection
from django.db.models import Count, Sum
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from board.models import ExecutionProcess, Task
from board.money import MILLICENTS_PER_CENT
from board.store import ready_filter
from board.store.recovery import ORPHAN_ERROR, STALE_ERROR
from board.transitions import Status
from core import beats, consumers, storage
from core.models import Team
from routines.models import RoutineFire
from worktrees.models import EntryState, MergeBatch, QueuedLanding

REGISTRY = CollectorRegistry(auto_describe=False)

REQUEST_SECONDS = Histogram(
    "clawboo_http_request_duration_seconds",
    "Time to answer an HTTP request, by method, route pattern and status (this process).",
    ["method", "route", "status"],
    registry=REGISTRY,
)
CLAIM_CONFLICTS = Counter(
    "clawboo_claim_conflicts",
    "Claims answered 409 conflict: someone else had the task (this process).",
    registry=REGISTRY,
)
ProcessCollector(registry=REGISTRY)

DURATION_BUCKETS = (1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0)
LATENESS_BUCKETS = (0.1, 0.5, 1.0, 5.0, 30.0, 60.0, 300.0)
LEASE_LAPSED = "lease lapsed"  # the execution error of a lapse (claim path or lapse sweep)


def _seconds_between(start: str, end: str) -> str:
    if connection.vendor == "postgresql":
        return f"EXTRACT(EPOCH FROM ({end} - {start}))"
    return f"((julianday({end}) - julianday({start})) * 86400.0)"


def _epoch_seconds(column: str) -> str:
    if connection.vendor == "postgresql":
        return f"EXTRACT(EPOCH FROM {column})"
    return f"((julianday({column}) - 2440587.5) * 86400.0)"


def _bucketed(
    sql_from: str, value: str, groups: list[str], buckets: tuple[float, ...], params: list[Any]
) -> list[tuple[tuple[str, ...], list[float], float, int]]:
    """(group values, cumulative bucket counts, sum, count) per group, in one query."""
    cases = ", ".join(f"SUM(CASE WHEN {value} <= {bound!r} THEN 1 ELSE 0 END)" for bound in buckets)
    group_sql = ", ".join(groups)
    sql = (
        f"SELECT {group_sql}, {cases}, COALESCE(SUM({value}), 0), COUNT(*) "  # noqa: S608
        f"FROM {sql_from} GROUP BY {group_sql} ORDER BY {group_sql}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    width = len(groups)
    return [
        (
            tuple("" if v is None else str(v) for v in row[:width]),
            [float(c or 0) for c in row[width : width + len(buckets)]],
            float(row[-2] or 0),
            int(row[-1]),
        )
        for row in rows
    ]


def _histogram(
    name: str,
    doc: str,
    labels: list[str],
    rows: list[tuple[tuple[str, ...], list[float], float, int]],
    buckets: tuple[float, ...],
) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, doc, labels=labels)
    for values, counts, total, count in rows:
        pairs = [(repr(b), c) for b, c in zip(buckets, counts, strict=True)]
        family.add_metric(list(values), [*pairs, ("+Inf", float(count))], total)
    return family


class DeploymentCollector:
    """The deployment's series, read from the database at scrape time."""

    def collect(self) -> Iterator[Metric]:
        yield from self.board()
        yield from self.executions()
        yield from self.routines()
        yield from self.heartbeats()
        yield from self.merge_queues()

    def board(self) -> Iterator[Metric]:
        teams = list(Team.objects.order_by("id").values_list("id", flat=True))
        tasks = GaugeMetricFamily(
            "clawboo_tasks", "Tasks by team and status.", labels=["team", "status"]
        )
        counts = {
            (row["team_id"], row["status"]): row["n"]
            for row in Task.objects.order_by().values("team_id", "status").annotate(n=Count("id"))
        }
        for team in teams:
            for status in Status.values:
                tasks.add_metric([team, status], counts.get((team, status), 0))
        yield tasks

        ready = GaugeMetricFamily(
            "clawboo_ready_tasks",
            "Ready-queue depth: tasks a claim could take now.",
            labels=["team"],
        )
        depth = dict(
            Task.objects.filter(ready_filter())
            .order_by()
            .values("team_id")
            .annotate(n=Count("id"))
            .values_list("team_id", "n")
        )
        for team in teams:
            ready.add_metric([team], depth.get(team, 0))
        yield ready

        sums: dict[str, dict[str, Any]] = {
            row["team_id"]: dict(row)
            for row in Task.objects.order_by()
            .values("team_id")
            .annotate(claims=Sum("attempts"), abandoned=Sum("abandonments"))
        }
        claims = CounterMetricFamily(
            "clawboo_claims", "Claims of tasks (each claim is one attempt).", labels=["team"]
        )
        abandoned = CounterMetricFamily(
            "clawboo_abandonments",
            "Claims given up without their owner settling them (lapsed, stale, orphaned).",
            labels=["team"],
        )
        for team in teams:
            row = sums.get(team, {})
            claims.add_metric([team], row.get("claims") or 0)
            abandoned.add_metric([team], row.get("abandoned") or 0)
        yield claims
        yield abandoned

    def executions(self) -> Iterator[Metric]:
        by_error = dict(
            ExecutionProcess.objects.filter(error__in=[LEASE_LAPSED, STALE_ERROR, ORPHAN_ERROR])
            .order_by()
            .values("error")
            .annotate(n=Count("id"))
            .values_list("error", "n")
        )
        yield CounterMetricFamily(
            "clawboo_lease_lapses",
            "Leases that ran out and were handed back (by the claim path or the lapse sweep).",
            value=by_error.get(LEASE_LAPSED, 0),
        )
        yield CounterMetricFamily(
            "clawboo_stale_sweep_releases",
            "Tasks the stale sweep released (no heartbeat within the window).",
            value=by_error.get(STALE_ERROR, 0),
        )
        yield CounterMetricFamily(
            "clawboo_orphans_reaped",
            "Running executions reaped at boot (their process was gone).",
            value=by_error.get(ORPHAN_ERROR, 0),
        )

        runs = CounterMetricFamily(
            "clawboo_executions",
            "Executions by runtime and outcome (running ones included).",
            labels=["runtime", "outcome"],
        )
        tokens = CounterMetricFamily(
            "clawboo_execution_tokens",
            "Tokens used by executions, by runtime and direction.",
            labels=["runtime", "direction"],
        )
        cost = CounterMetricFamily(
            "clawboo_execution_cost_cents",
            "Cost of executions in cents (from their millicents: cheap runs count).",
            labels=["runtime"],
        )
        per_runtime: dict[str, list[int]] = {}
        for row in (
            ExecutionProcess.objects.order_by()
            .values("runtime", "status")
            .annotate(
                n=Count("id"),
                t_in=Sum("tokens_in"),
                t_out=Sum("tokens_out"),
                c=Sum("cost_millicents"),
            )
            .order_by("runtime", "status")
        ):
            runtime = row["runtime"] or ""
            runs.add_metric([runtime, row["status"]], row["n"])
            acc = per_runtime.setdefault(runtime, [0, 0, 0])
            acc[0] += row["t_in"] or 0
            acc[1] += row["t_out"] or 0
            acc[2] += row["c"] or 0
        for runtime, (t_in, t_out, millicents) in sorted(per_runtime.items()):
            tokens.add_metric([runtime, "in"], t_in)
            tokens.add_metric([runtime, "out"], t_out)
            cost.add_metric([runtime], millicents / MILLICENTS_PER_CENT)
        yield runs
        yield tokens
        yield cost

        table = ExecutionProcess._meta.db_table
        duration = _seconds_between("started_at", "finished_at")
        rows = _bucketed(
            f"{table} WHERE finished_at IS NOT NULL",
            duration,
            ["COALESCE(runtime, '')", "status"],
            DURATION_BUCKETS,
            [],
        )
        yield _histogram(
            "clawboo_execution_duration_seconds",
            "Wall time of finished executions, by runtime and outcome.",
            ["runtime", "outcome"],
            rows,
            DURATION_BUCKETS,
        )

    def routines(self) -> Iterator[Metric]:
        fires = CounterMetricFamily(
            "clawboo_routine_fires", "Routine fires by outcome.", labels=["outcome"]
        )
        for outcome, n in (
            RoutineFire.objects.order_by("outcome")
            .values("outcome")
            .annotate(n=Count("id"))
            .values_list("outcome", "n")
        ):
            fires.add_metric([outcome], n)
        yield fires
        table = RoutineFire._meta.db_table
        lateness = f"({_epoch_seconds('fired_at')} - slot_at / 1000.0)"
        rows = _bucketed(table, lateness, ["outcome"], LATENESS_BUCKETS, [])
        yield _histogram(
            "clawboo_routine_fire_lateness_seconds",
            "How long after its slot each routine fire was recorded.",
            ["outcome"],
            rows,
            LATENESS_BUCKETS,
        )

    def merge_queues(self) -> Iterator[Metric]:
        length = GaugeMetricFamily(
            "clawboo_merge_queue_length",
            "Approvals waiting in each repository's merge queue (sent back: not counted).",
            labels=["repo_path"],
        )
        for path, n in (
            QueuedLanding.objects.filter(state=EntryState.QUEUED)
            .order_by("repo_path")
            .values("repo_path")
            .annotate(n=Count("id"))
            .values_list("repo_path", "n")
        ):
            length.add_metric([path], n)
        yield length
        gates = CounterMetricFamily(
            "clawboo_merge_queue_gate_runs",
            "Verify-command runs of merge batches (the stacked tip and each bisect step).",
            labels=["repo_path"],
        )
        for path, n in (
            MergeBatch.objects.order_by("repo_path")
            .values("repo_path")
            .annotate(n=Sum("gate_runs"))
            .values_list("repo_path", "n")
        ):
            gates.add_metric([path], n or 0)
        yield gates
        table = QueuedLanding._meta.db_table
        rows = _bucketed(
            f"{table} WHERE state = %s AND landed_at IS NOT NULL",  # noqa: S608
            _seconds_between("approved_at", "landed_at"),
            ["repo_path"],
            DURATION_BUCKETS,
            [EntryState.LANDED.value],
        )
        yield _histogram(
            "clawboo_merge_queue_time_to_land_seconds",
            "From approval to landing on the base, for tasks landed by a merge queue.",
            ["repo_path"],
            rows,
            DURATION_BUCKETS,
        )

    def heartbeats(self) -> Iterator[Metric]:
        age = GaugeMetricFamily(
            "clawboo_heartbeat_age_seconds",
            "Seconds since the newest heartbeat of each part.",
            labels=["part"],
        )
        now = timezone.now()
        for part, at in sorted(beats.last_beats().items()):
            age.add_metric([part], (now - at).total_seconds())
        yield age


class SocketCollector:
    """This process's open websocket clients, by team."""

    def collect(self) -> Iterator[Metric]:
        clients = GaugeMetricFamily(
            "clawboo_websocket_clients",
            "Open board websockets served by this process, by team.",
            labels=["team"],
        )
        for team, n in sorted(consumers.connected.items()):
            clients.add_metric([team], n)
        yield clients


class PoolCollector:
    """This process's PostgreSQL connection pool, at each scrape (none: no series)."""

    HELP = {
        "max_size": "Connections this process's database pool may hold (CLAWBOO_DB_POOL_MAX_SIZE).",
        "size": "Connections this process's database pool holds now (in use or free).",
        "available": "Free connections in this process's database pool.",
        "waiting": "Borrowers waiting for a connection of this process's database pool.",
    }

    def collect(self) -> Iterator[Metric]:
        stats = storage.pool_stats()
        if stats is None:
            return
        for key, text in self.HELP.items():
            yield GaugeMetricFamily(f"clawboo_db_pool_{key}", text, value=stats[key])
        yield CounterMetricFamily(
            "clawboo_db_pool_timeouts",
            "Borrowers of this process's database pool that gave up waiting.",
            value=stats["timeouts"],
        )


REGISTRY.register(DeploymentCollector())  # type: ignore[arg-type]
REGISTRY.register(SocketCollector())  # type: ignore[arg-type]
REGISTRY.register(PoolCollector())  # type: ignore[arg-type]


def may_scrape(request: HttpRequest) -> bool:
    """Staff, or a bearer token equal to ``CLAWBOO_METRICS_TOKEN`` (when one is set)."""
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated and user.is_staff:
        return True
    token = settings.CLAWBOO_METRICS_TOKEN
    given = request.headers.get("Authorization", "")
    if token and given.startswith("Bearer "):
        return hmac.compare_digest(given.removeprefix("Bearer ").strip(), token)
    return False


@never_cache
def metrics_view(request: HttpRequest) -> HttpResponse:
    if request.method != "GET":
        return JsonResponse({"error": "method_not_allowed", "detail": "GET /metrics"}, status=405)
    if not may_scrape(request):
        response = JsonResponse(
            {
                "error": "unauthenticated",
                "detail": "staff session or 'Authorization: Bearer <CLAWBOO_METRICS_TOKEN>'",
            },
            status=401,
        )
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)


CLAIM_ROUTE_SUFFIXES = ("/claim", "/claim-next")


# Every label comes from a closed set: the method any client may invent is one of
# these or ``other``, the route is a URL pattern, never the raw path.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"})


def _observe(request: HttpRequest, status: int, started: float) -> None:
    match = getattr(request, "resolver_match", None)
    route = match.route if match is not None else "unmatched"
    method = request.method if request.method in METHODS else "other"
    REQUEST_SECONDS.labels(method, route, str(status)).observe(time.perf_counter() - started)
    if status == 409 and route.endswith(CLAIM_ROUTE_SUFFIXES):
        CLAIM_CONFLICTS.inc()


class RequestMetricsMiddleware:
    """Request latency by route pattern (never the raw path: one series per route)."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self._acall(request)
        started = time.perf_counter()
        response = self.get_response(request)
        _observe(request, response.status_code, started)
        return response

    async def _acall(self, request: HttpRequest) -> Any:
        started = time.perf_counter()
        response = await self.get_response(request)
        _observe(request, response.status_code, started)
        return response

"""Django settings for Clawboo.

Everything an operator tunes comes from the environment (see docs/operating.md,
"Configuration"). The embedded default needs nothing: SQLite, the in-memory
channel layer and django-q2's ORM broker, all under ``CLAWBOO_STATE_DIR``.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from clawboo.statedir import state_dir

BASE_DIR = Path(__file__).resolve().parent.parent


def env_int(name: str, default: int, *, low: int = 1, high: int = 2**31 - 1) -> int:
    """An integer knob; anything missing, malformed or out of range reads as the default."""
    raw = os.environ.get(name, "").strip()
    try:
        value = int(raw)
    except ValueError:
        return default
    return value if low <= value <= high else default


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return raw.strip().lower() in {"1", "true", "yes", "on"}


STATE_DIR = state_dir()


def ensure_private_dir(path: Path) -> None:
    """Create the state dir owner-only: it holds the database, and with it every API
    token, and the generated secret key. An existing directory is left as it is
    (``clawboo up`` reports and tightens a state dir others can read)."""
    if not path.exists():
        path.mkdir(parents=True, mode=0o700, exist_ok=True)
        path.chmod(0o700)


def ensure_private_file(path: Path) -> None:
    """Create an empty file owner-only unless it exists. SQLite gives its -wal and
    -shm files the database file's permissions, so this covers all three."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return
    os.close(fd)


DEBUG = env_bool("DJANGO_DEBUG", False)
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "")
if not SECRET_KEY:
    # A local, single-user install still needs a stable key (tickets and sessions
    # are signed with it): keep one in the state dir rather than refusing to start.
    key_file = STATE_DIR / "secret_key"
    if key_file.exists():
        SECRET_KEY = key_file.read_text().strip()
    elif DEBUG or os.environ.get("CLAWBOO_ALLOW_GENERATED_SECRET", "1") == "1":
        from django.core.management.utils import get_random_secret_key

        ensure_private_dir(STATE_DIR)
        # Written whole under a private name, then linked into place: a deployment's
        # separate commands (docs/operating.md) start at once, and none may read a
        # half-written key or keep one another process replaced (the first link
        # wins; all read that).
        staged = STATE_DIR / f".secret_key.{os.getpid()}"
        ensure_private_file(staged)
        staged.write_text(get_random_secret_key())
        try:
            os.link(staged, key_file)
        except FileExistsError:
            pass
        finally:
            staged.unlink()
        SECRET_KEY = key_file.read_text().strip()
    else:
        raise ImproperlyConfigured("DJANGO_SECRET_KEY must be set")

ALLOWED_HOSTS = [
    h.strip()
    for h in os.environ.get("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]").split(",")
    if h.strip()
]

INSTALLED_APPS = [
    # First: its ``runserver`` (daphne's, serving the ASGI app, websockets too) wins
    # over staticfiles'. daphne itself is no app here: its app imports its server
    # (Twisted) into every process at start, every worker and command too.
    "clawboo",
    "clawboo.console.ClawbooAdminConfig",  # the admin, as the Clawboo console
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_q",
    "channels",
    "core",
    "board",
    "worktrees",
    "boardmcp",
    "executor",
    "routines",
    "ops",
    "ops.queue",  # django-q2's tables in the admin, as the background queue
]

MIDDLEWARE = [
    # First, so its latency covers every other middleware too.
    "ops.metrics.RequestMetricsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Before everything that reads the request: oversized bodies and unstorable
    # paths under /api/ are refused as JSON here (core.api.middleware).
    "core.api.middleware.ApiGuardMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Page and admin writes go through the roles table (core.roles, GOVERNANCE §6).
    "core.roles.PageRolesMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "clawboo.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = "clawboo.wsgi.application"
ASGI_APPLICATION = "clawboo.asgi.application"


# PostgreSQL connections come from a pool per process (psycopg's, through Django's
# own ``OPTIONS["pool"]``): a request or a worker's write borrows an open connection
# instead of paying a new one (15-70 ms under load), and a process never holds
# more than CLAWBOO_DB_POOL_MAX_SIZE, so servers x processes x max_size bounds
# the database's connections (keep it under its max_connections). A borrower
# waits at most CLAWBOO_DB_POOL_TIMEOUT_S for one. CLAWBOO_DB_POOL_MAX_SIZE=0:
# no pool (a connection per request, closed after it). SQLite has none.
CLAWBOO_DB_POOL_MIN_SIZE = env_int("CLAWBOO_DB_POOL_MIN_SIZE", 1, low=0, high=1000)
CLAWBOO_DB_POOL_MAX_SIZE = env_int("CLAWBOO_DB_POOL_MAX_SIZE", 8, low=0, high=1000)
CLAWBOO_DB_POOL_TIMEOUT_S = env_int("CLAWBOO_DB_POOL_TIMEOUT_S", 30, high=3600)


def db_pool_options(
    min_size: int = CLAWBOO_DB_POOL_MIN_SIZE,
    max_size: int = CLAWBOO_DB_POOL_MAX_SIZE,
    timeout_s: int = CLAWBOO_DB_POOL_TIMEOUT_S,
) -> dict[str, object] | None:
    """psycopg_pool.ConnectionPool's arguments, or None (no pool)."""
    if max_size == 0:
        return None
    return {"min_size": min(min_size, max_size), "max_size": max_size, "timeout": timeout_s}


def database_config(
    url: str | None, state_dir: Path, *, pool: dict[str, object] | None = None
) -> dict[str, object]:
    """One DATABASES entry from a URL; SQLite in the state dir when there is none.

    The SQLite pragmas are applied per connection by ``core.storage``; here we
    only ask Django to open every transaction with ``BEGIN IMMEDIATE`` so a
    multi-step write takes the write lock up front instead of escalating mid-way.
    On PostgreSQL, ``pool`` (:func:`db_pool_options`) turns on Django's pool.
    """
    if not url:
        ensure_private_dir(state_dir)
        ensure_private_file(state_dir / "clawboo.sqlite3")
        url = f"sqlite:///{state_dir / 'clawboo.sqlite3'}"
    # No persistent connections: under ASGI each request's sync code runs in a
    # thread of its own, so a kept connection would only leak (Django's advice).
    config: dict[str, object] = dict(dj_database_url.parse(url, conn_max_age=0))
    if config["ENGINE"] == "django.db.backends.postgresql" and not any(
        importlib.util.find_spec(driver) for driver in ("psycopg", "psycopg2")
    ):
        # Django would say "Error loading psycopg2 or psycopg module" at the first query.
        raise ImproperlyConfigured(
            "DATABASE_URL names PostgreSQL but its driver is not installed: "
            "pip install -e '.[postgres]'"
        )
    if config["ENGINE"] == "django.db.backends.sqlite3":
        config["OPTIONS"] = {"transaction_mode": "IMMEDIATE"}
    elif pool is not None and config["ENGINE"] == "django.db.backends.postgresql":
        # A pooled connection goes back to the pool when Django closes it (request
        # end, close_old_connections); CONN_MAX_AGE stays 0, as the pool requires.
        options: dict[str, object] = dict(config.get("OPTIONS") or {})  # type: ignore[call-overload]
        config["OPTIONS"] = {**options, "pool": dict(pool)}
        # A borrowed connection is checked first (an empty query): one the database
        # dropped while it sat in the pool (a restart, pg_terminate_backend) is
        # replaced, not handed to a request or a worker's loop.
        config["CONN_HEALTH_CHECKS"] = True
    return config


# Processes that fork children which go on using the database get no pool: a
# pool's connections and threads do not survive a fork (django-q2's cluster forks
# its workers, and each then opens connections of its own, as before).
UNPOOLED_COMMANDS = frozenset({"qcluster"})
_unpooled = len(sys.argv) > 1 and sys.argv[1] in UNPOOLED_COMMANDS
DATABASES = {
    "default": database_config(
        os.environ.get("DATABASE_URL"),
        STATE_DIR,
        pool=None if _unpooled else db_pool_options(),
    )
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = STATE_DIR / "static"

# The board's own login, for every team member; the admin's stays staff-only.
LOGIN_URL = "/board/login/"
LOGIN_REDIRECT_URL = "/board/"
LOGOUT_REDIRECT_URL = "/board/login/"
# Under /api/ a CSRF refusal is the API's JSON envelope (core.api.errors).
CSRF_FAILURE_VIEW = "core.api.errors.csrf_failure"

# --- Clawboo knobs -----------------------------------------------------------
CLAWBOO_STATE_DIR = STATE_DIR
CLAWBOO_REDIS_URL = os.environ.get("CLAWBOO_REDIS_URL", "")
CLAWBOO_BOARD_STALE_TTL_MS = env_int("CLAWBOO_BOARD_STALE_TTL_MS", 180_000)
CLAWBOO_BOARD_STALE_SWEEP_MS = env_int("CLAWBOO_BOARD_STALE_SWEEP_MS", 60_000)
# Approvals (GOVERNANCE §5): a task's approval unanswered this long expires; a tool
# call waiting for a person this long is denied (fail closed).
CLAWBOO_APPROVAL_TTL_MS = env_int("CLAWBOO_APPROVAL_TTL_MS", 24 * 3600 * 1000)
CLAWBOO_TOOL_APPROVAL_TIMEOUT_MS = env_int("CLAWBOO_TOOL_APPROVAL_TIMEOUT_MS", 600_000)
CLAWBOO_DB_WRITE_BUDGET_MS = env_int("CLAWBOO_DB_WRITE_BUDGET_MS", 1_500)
# Days of event log and chat kept (core.retention); 0 keeps everything.
CLAWBOO_HISTORY_RETENTION_DAYS = env_int("CLAWBOO_HISTORY_RETENTION_DAYS", 30, low=0)
# At most this many events kept per team (0: no bound by count).
CLAWBOO_HISTORY_MAX_EVENTS = env_int("CLAWBOO_HISTORY_MAX_EVENTS", 0, low=0)
CLAWBOO_HEARTBEAT_MS = env_int("CLAWBOO_HEARTBEAT_MS", 30_000)
# The longest lease a claim or heartbeat may ask for (lease_ms; board.checks), so a
# holder that is gone loses its claim within it: 1 s to ~74 days. The default is seed
# 001's own ceiling, where sizing a lease to cover a whole job is a legitimate answer;
# an operator who wants every stranded claim back sooner lowers it.
_LEASE_CEILING_MS = 74 * 24 * 60 * 60 * 1000
CLAWBOO_LEASE_MAX_MS = env_int(
    "CLAWBOO_LEASE_MAX_MS", _LEASE_CEILING_MS, low=1_000, high=_LEASE_CEILING_MS
)
# The most of one execution's output kept in its full log (core.runlogs).
CLAWBOO_RUNLOG_MAX_BYTES = env_int("CLAWBOO_RUNLOG_MAX_BYTES", 16 * 1024 * 1024, low=1024)
# Builder is not judge (GOVERNANCE §4; executor.judge): a file-mutating run with no
# verify command is a failed verification unless this is false; a failing gate or
# critic sends the task back to its builder this many times before it is blocked
# with its debt; the critic reviews changes over these sizes (or with a parent, or
# the label risk).
CLAWBOO_VERIFY_REQUIRED = env_bool("CLAWBOO_VERIFY_REQUIRED", True)
CLAWBOO_MAX_FIX_CYCLES = env_int("CLAWBOO_MAX_FIX_CYCLES", 1, low=0)
# How often the forge poll asks about open pull requests where no webhook arrives
# (seconds; django-q2 rounds up to whole minutes).
CLAWBOO_FORGE_POLL_S = env_int("CLAWBOO_FORGE_POLL_S", 120, low=60)
CLAWBOO_CRITIC_MIN_FILES = env_int("CLAWBOO_CRITIC_MIN_FILES", 5, low=0)
CLAWBOO_CRITIC_MIN_LINES = env_int("CLAWBOO_CRITIC_MIN_LINES", 300, low=0)
CLAWBOO_HTTP_RATE_LIMIT = env_int("CLAWBOO_HTTP_RATE_LIMIT", 3_000, low=0)
# Health and breakers (GOVERNANCE §2; executor.health, executor.breakers): an agent
# whose last this-many runs failed is paused; a worker re-probes its agents' runtimes
# this often, asking each CLI for its version unless the version probe is off.
CLAWBOO_BREAKER_FAILURES = env_int("CLAWBOO_BREAKER_FAILURES", 3)
CLAWBOO_HEALTH_PROBE_MS = env_int("CLAWBOO_HEALTH_PROBE_MS", 30_000)
CLAWBOO_HEALTH_VERSION_PROBE = env_bool("CLAWBOO_HEALTH_VERSION_PROBE", True)
CLAWBOO_ROUTINE_OPENCLAW_TIMEOUT_MS = env_int("CLAWBOO_ROUTINE_OPENCLAW_TIMEOUT_MS", 600_000)
# django-q2's timeout of a fire is whole seconds: under one would be none at all
# (its alarm of 0), so such a value reads as the default, as any out of range.
CLAWBOO_ROUTINE_DISPATCH_DEADLINE_MS = env_int(
    "CLAWBOO_ROUTINE_DISPATCH_DEADLINE_MS", 900_000, low=1_000
)
# The OpenClaw Gateway (operator websocket): empty URL = not configured, and the
# gateway cron schedule source reports "degraded: not configured".
CLAWBOO_OPENCLAW_GATEWAY_URL = os.environ.get("CLAWBOO_OPENCLAW_GATEWAY_URL", "")
CLAWBOO_OPENCLAW_TOKEN = os.environ.get("CLAWBOO_OPENCLAW_TOKEN", "")


def env_json(name: str, kind: type[list[object]] | type[dict[str, object]]) -> Any:
    """A JSON list (or object) knob, empty when unset. One that does not parse stops
    the server: a security allowlist must not silently allow nothing or everything."""
    import json

    raw = os.environ.get(name, "").strip()
    if not raw:
        return kind()
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} is not JSON: {exc}") from None
    if not isinstance(value, kind):
        raise ImproperlyConfigured(f"{name} must be a JSON {'list' if kind is list else 'object'}")
    return value


# What non-staff users may make the server run (core.server_commands). Agents:
# [{"runtime": "claude-code", "settings": {}}, ...], matched exactly (timeout_s aside).
CLAWBOO_AGENT_ALLOWLIST = env_json("CLAWBOO_AGENT_ALLOWLIST", list)
if not all(
    isinstance(e, dict)
    and isinstance(e.get("runtime"), str)
    and isinstance(e.get("settings", {}), dict)
    for e in CLAWBOO_AGENT_ALLOWLIST
):
    raise ImproperlyConfigured(
        'CLAWBOO_AGENT_ALLOWLIST entries are {"runtime": "...", "settings": {...}}'
    )
# Task metadata commands (install_cmd / verify_cmd / start_cmd): exact strings.
CLAWBOO_TASK_COMMAND_ALLOWLIST = env_json("CLAWBOO_TASK_COMMAND_ALLOWLIST", list)
if not all(isinstance(e, str) for e in CLAWBOO_TASK_COMMAND_ALLOWLIST):
    raise ImproperlyConfigured("CLAWBOO_TASK_COMMAND_ALLOWLIST is a JSON list of strings")

# What a model's tokens cost, in cents per million tokens, for runs whose runtime
# reports tokens but no price (executor.pricing): {model: {in, out, cache_read,
# cache_write}}. The shipped table covers the models the pinned runtimes use;
# CLAWBOO_MODEL_PRICES (JSON, same shape) adds models or replaces their rates.
DEFAULT_MODEL_PRICES: dict[str, dict[str, int]] = {
    # Claude Code 2.1's default model; its own price list charges these rates.
    "claude-opus-5-5": {"in": 400, "out": 2000, "cache_read": 40, "cache_write": 500},
    "claude-sonnet-x": {"in": 300, "out": 1500, "cache_read": 30, "cache_write": 375},
    "gpt-5": {"in": 125, "out": 1000, "cache_read": 13, "cache_write": 0},
    "gpt-5-codex": {"in": 125, "out": 1000, "cache_read": 13, "cache_write": 0},
    # The scripted model the real-runtime tier points every CLI at.
    "fake-model": {"in": 100, "out": 400, "cache_read": 10, "cache_write": 125},
}


CLAWBOO_MODEL_PRICES = {**DEFAULT_MODEL_PRICES, **env_json("CLAWBOO_MODEL_PRICES", dict)}

# How an approved change lands, unless the repository's own git config says
# (``clawboo.landing``, ``clawboo.onConflict``): ``squash`` (one commit) or ``merge``;
# a conflict goes back to the agent (``rework``) or parks the task (``block``).
CLAWBOO_LANDING = os.environ.get("CLAWBOO_LANDING", "squash")
CLAWBOO_LANDING_ON_CONFLICT = os.environ.get("CLAWBOO_LANDING_ON_CONFLICT", "rework")
# A repository that lands by ``queue``: its merge queue stacks this many approvals
# and runs the verify command once on the stacked tip.
CLAWBOO_MERGE_BATCH = env_int("CLAWBOO_MERGE_BATCH", 8, low=1)
# Rebase rounds a queued task that conflicts with its base gets before it is blocked
# for a person: not fix rounds (the work ahead of it landed first), but bounded all
# the same, since two builders could otherwise trade conflicts for ever.
CLAWBOO_MAX_REBASE_ROUNDS = env_int("CLAWBOO_MAX_REBASE_ROUNDS", 5, low=1)
# A remote worker's submitted task keeps its claim this long while it waits for the
# server's intake (fetch, verify, critic); a recovery pass runs an intake again once
# it has been pending CLAWBOO_INTAKE_RECOVER_S (a killed one), and git's network
# calls of the intake and of the push after a landing give up after
# CLAWBOO_REMOTE_GIT_TIMEOUT_S.
# A lease the board refuses (board.checks: 1 s to CLAWBOO_LEASE_MAX_MS) would refuse
# every submission as the worker's own bad lease_ms: such a value reads as the default,
# itself held under the ceiling.
CLAWBOO_INTAKE_LEASE_MS = min(
    env_int("CLAWBOO_INTAKE_LEASE_MS", 600_000, low=1_000, high=CLAWBOO_LEASE_MAX_MS),
    CLAWBOO_LEASE_MAX_MS,
)
CLAWBOO_INTAKE_RECOVER_S = env_int("CLAWBOO_INTAKE_RECOVER_S", 120)
CLAWBOO_REMOTE_GIT_TIMEOUT_S = env_int("CLAWBOO_REMOTE_GIT_TIMEOUT_S", 120)
# The board's MCP endpoint as agents' runtimes reach it (`clawboo up` sets it to its
# own server); unset, runs get no MCP configuration.
CLAWBOO_MCP_URL = os.environ.get("CLAWBOO_MCP_URL", "")

# Heartbeats of the ticker, workers and qcluster (core.beats), and how old the
# newest may be before /healthz names that part as failing.
CLAWBOO_BEAT_MS = env_int("CLAWBOO_BEAT_MS", 10_000)
CLAWBOO_HEALTH_BEAT_STALE_MS = env_int("CLAWBOO_HEALTH_BEAT_STALE_MS", 60_000)
# The parts whose beat /healthz requires (`clawboo up --no-ticker` drops the ticker).
CLAWBOO_HEALTH_PARTS = [
    p.strip()
    for p in os.environ.get("CLAWBOO_HEALTH_PARTS", "ticker,workers,qcluster").split(",")
    if p.strip()
]
# /metrics answers staff sessions, and `Authorization: Bearer <this>` when set.
CLAWBOO_METRICS_TOKEN = os.environ.get("CLAWBOO_METRICS_TOKEN", "")
# Notifications: how often a failed delivery is tried in all, and the sender address.
CLAWBOO_NOTIFY_MAX_ATTEMPTS = env_int("CLAWBOO_NOTIFY_MAX_ATTEMPTS", 6)
CLAWBOO_NOTIFY_TIMEOUT_S = env_int("CLAWBOO_NOTIFY_TIMEOUT_S", 10)  # a whole attempt, not a read
# Threads per process that send notifications (not django-q2 workers: see ops.notify).
CLAWBOO_NOTIFY_SENDERS = env_int("CLAWBOO_NOTIFY_SENDERS", 4)
DEFAULT_FROM_EMAIL = os.environ.get("CLAWBOO_NOTIFY_FROM", "clawboo@localhost")
# Where people reach this server (https://board.example.com): notifications link to
# the task on the board from it. Unset: they carry no link (`clawboo up` sets its own).
CLAWBOO_PUBLIC_URL = os.environ.get("CLAWBOO_PUBLIC_URL", "").rstrip("/")
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
# Agent settings keys kept secret besides those whose names say so (core.agent_secrets).
CLAWBOO_SECRET_SETTINGS = [
    k.strip() for k in os.environ.get("CLAWBOO_SECRET_SETTINGS", "").split(",") if k.strip()
]
CLAWBOO_REPO_ROOTS = [
    Path(p).expanduser().resolve()
    for p in os.environ.get("CLAWBOO_REPO_ROOTS", "").split(os.pathsep)
    if p.strip()
]

# --- Channels ----------------------------------------------------------------
if CLAWBOO_REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [CLAWBOO_REDIS_URL]},
        }
    }
else:
    CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels.layers.InMemoryChannelLayer", "CONFIG": {"capacity": 1000}}
    }

# --- django-q2: the ORM broker keeps the embedded default server-free ---------
Q_TIMEOUT_S = 900
Q_CLUSTER = {
    "name": "clawboo",
    "orm": "default",
    "workers": env_int("CLAWBOO_Q_WORKERS", 2),
    "timeout": Q_TIMEOUT_S,
    # A task not acknowledged within ``retry`` is handed to another worker, so it
    # outlasts the longest timeout a task is given -- a routine fire's
    # CLAWBOO_ROUTINE_DISPATCH_DEADLINE_MS too -- or a fire still running is started again.
    "retry": max(Q_TIMEOUT_S, CLAWBOO_ROUTINE_DISPATCH_DEADLINE_MS // 1000) + 60,
    "max_attempts": 1,
    "catch_up": False,
    "ack_failures": True,
    "save_limit": 500,
    # The ORM broker whose pusher waits out a database outage instead of dying.
    "broker_class": "core.qbroker.ReconnectingORM",
}

# --- REST framework ----------------------------------------------------------
REST_FRAMEWORK = {
    # Token first: its WWW-Authenticate header makes an anonymous call a 401, not a 403.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "core.api.auth.TokenAuthentication",
        # A run's credential (the agent side, GOVERNANCE §6), as on the MCP server.
        "boardmcp.auth.RunAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # Every API view wants a signed-in caller, and every write is admitted by the
    # roles table (core.roles, GOVERNANCE §6); a view names permission_classes only
    # to ask for more (staff), with RoleTable first.
    "DEFAULT_PERMISSION_CLASSES": ["core.api.permissions.RoleTable"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PARSER_CLASSES": ["core.api.parsers.StrictJSONParser"],
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "core.api.renderers.BrowsableAPIRenderer",
    ],
    # ?format= a renderer does not write: 406 not_acceptable, as Accept (DRF: 404).
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "core.api.renderers.ContentNegotiation",
    "DEFAULT_THROTTLE_CLASSES": ["core.api.throttling.ClientRateThrottle"],
    "EXCEPTION_HANDLER": "core.api.errors.exception_handler",
    # ASCII-escaped JSON: any text renders, so a response never fails after its write.
    "UNICODE_JSON": False,
}
# A request body larger than this is refused (413) while it arrives, before it is
# stored or parsed (clawboo.bodylimit), anonymous or not.
DATA_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024

SPECTACULAR_SETTINGS = {
    "TITLE": "Clawboo API",
    "DESCRIPTION": "The board, routines and worktrees of Clawboo for Django.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Two "status" choice sets (board tasks, routine ledger): name the routine one.
    "ENUM_NAME_OVERRIDES": {
        "RoutineStatusEnum": "routines.models.RoutineStatus",
        "TaskStatusEnum": "board.transitions.Status",
        "StepKindEnum": "board.runs.StepKind.values",
        "StepStatusEnum": "board.runs.StepStatus.values",
        # A task approval's "decision" (approve/deny) and a tool approval's.
        "ToolDecisionEnum": "board.models.ToolDecision.values",
        # A budget's, in its body and in the body the reads add may_resume to.
        "BudgetStatusEnum": "board.models.BUDGET_STATUSES",
    },
    # A summary on every operation, from one table (clawboo.openapi).
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "clawboo.openapi.add_summaries",
        "clawboo.openapi.add_busy",
        "clawboo.openapi.add_validation_refusals",
        "clawboo.openapi.add_forbidden",
        "clawboo.openapi.close_request_bodies",
    ],
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("CLAWBOO_LOG_LEVEL", "INFO")},
    # The MCP SDK logs every stateless request ("Terminating session: None") at INFO.
    "loggers": {"mcp": {"level": "WARNING"}},
}

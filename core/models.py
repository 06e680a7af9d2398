"""Core registry of record: teams, agents, and the durable per-team event log.

The board, routines and worktrees reference agents and teams by id. Writes to
these tables go through :mod:`core.registry` and :mod:`core.events`.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings as django_settings
from django.db import models


class Runtime(models.TextChoices):
    COMMAND = "command"
    CLAUDE_CODE = "claude-code"
    CODEX = "codex"
    HERMES = "hermes"
    OPENCLAW = "openclaw"
    # The server runs nothing: a person, or an agent process that talks to the API
    # itself (``create_agent_token --agent``). Named so in the admin, so an agent of
    # participant kind "Agent" does not read as runtime "Human".
    HUMAN = "human", "None — acts through the API (a person or an outside agent)"


class ParticipantKind(models.TextChoices):
    AGENT = "agent"
    HUMAN = "human"


class Team(models.Model):
    id = models.CharField(primary_key=True, max_length=64)
    name = models.CharField(max_length=200)
    members = models.ManyToManyField(
        django_settings.AUTH_USER_MODEL, related_name="teams", blank=True
    )
    # Highest event sequence handed out for this team. Bumped with a row-locking
    # UPDATE inside each mutation's transaction, so sequence order is commit order.
    last_event_seq = models.BigIntegerField(default=0, editable=False)
    # Every task of this team waits for a person's approval before any claim.
    approval_required = models.BooleanField(default=False)
    # The critic of the team's risky changes (GOVERNANCE §4): an agent of this team
    # reviews a change its builder finished; null: no critic.
    reviewer_agent = models.ForeignKey(
        "Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # How many of the team's tasks may be in_progress at once (null: no limit),
    # held by the claim's own transaction (board.store.claims).
    max_concurrent = models.PositiveIntegerField(null=True, blank=True)
    tenant_id = models.CharField(max_length=64, null=True, blank=True, editable=False)

    class Meta:
        db_table = "teams"
        ordering = ["id"]

    def __str__(self) -> str:
        return self.name or self.id


class AgentState(models.TextChoices):
    """What an agent's body says. Only ``active`` and ``paused`` are stored;
    ``unhealthy`` is an active agent whose last preflight failed."""

    ACTIVE = "active"
    PAUSED = "paused"
    UNHEALTHY = "unhealthy"


class Agent(models.Model):
    id = models.CharField(primary_key=True, max_length=128)
    display_name = models.CharField(max_length=200)
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="agents")
    runtime = models.CharField(max_length=32, choices=Runtime.choices)
    participant_kind = models.CharField(
        max_length=16, choices=ParticipantKind.choices, default=ParticipantKind.AGENT
    )
    settings = models.JSONField(default=dict, blank=True)
    # Who may act as this agent (claim, heartbeat, settle, be assigned, create as it):
    # its owner, or staff. No owner: staff only.
    owner = models.ForeignKey(
        django_settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="agents",
    )
    # What the agent runs on the server is an operator's decision (core.execution):
    # the fingerprint of the runtime and settings a staff user last saved. The
    # executor runs the agent only while its current fingerprint matches (or the
    # settings are allowlisted), so a row changed around the registry does not run.
    approved_fingerprint = models.CharField(max_length=64, blank=True, default="", editable=False)
    approved_by = models.ForeignKey(
        django_settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        editable=False,
    )
    # Dispatch (GOVERNANCE §1-2): the labels a task's route may ask for, how many
    # tasks it holds in_progress at once, and whether it takes work at all. The
    # claim statement reads these in its own transaction (board.store.claims).
    labels = models.JSONField(default=list, blank=True)
    max_concurrent = models.PositiveIntegerField(default=1)
    # active | paused (a person or the breaker paused it); unhealthy is derived
    # from the preflight below and never stored here.
    state = models.CharField(max_length=16, default=AgentState.ACTIVE, editable=False)
    state_reason = models.TextField(blank=True, default="", editable=False)
    paused_by = models.CharField(max_length=200, blank=True, default="", editable=False)
    paused_at = models.DateTimeField(null=True, blank=True, editable=False)
    # The last preflight where a worker runs it (null: never probed, e.g. a person).
    health_ok = models.BooleanField(null=True, blank=True, editable=False)
    health_detail = models.TextField(blank=True, default="", editable=False)
    health_checked_at = models.DateTimeField(null=True, blank=True, editable=False)
    # Consecutive failed (or empty file-mutating) runs; the breaker pauses at
    # CLAWBOO_BREAKER_FAILURES, a resume resets it.
    breaker_failures = models.IntegerField(default=0, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    tenant_id = models.CharField(max_length=64, null=True, blank=True, editable=False)

    class Meta:
        db_table = "agents"
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.display_name} ({self.runtime})"

    @property
    def dispatch_state(self) -> str:
        """``paused`` over ``unhealthy`` over ``active`` (the body's ``state``)."""
        if self.state == AgentState.PAUSED:
            return AgentState.PAUSED
        if self.health_ok is False:
            return AgentState.UNHEALTHY
        return AgentState.ACTIVE

    @staticmethod
    def in_dispatch_state(state: str) -> models.Q:
        """The rows whose ``dispatch_state`` is ``state``: the same rule as a query, so a
        list filtered by state holds the rows its state column shows as that state."""
        paused = models.Q(state=AgentState.PAUSED)
        unhealthy = ~paused & models.Q(health_ok=False)
        if state == AgentState.PAUSED:
            return paused
        if state == AgentState.UNHEALTHY:
            return unhealthy
        return ~paused & ~unhealthy


class AgentToken(models.Model):
    """An API key bound to one agent: it authenticates as the agent's owner and may
    act as that agent and no other (``create_agent_token <user> --agent A``)."""

    key = models.CharField(primary_key=True, max_length=40)
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="tokens")
    user = models.ForeignKey(
        django_settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_tokens"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "agent_tokens"

    def __str__(self) -> str:
        return f"token of {self.agent_id} for {self.user_id}"


class RowIdField(models.BigAutoField):
    """A ``BigAutoField`` that is SQLite's plain rowid, without ``AUTOINCREMENT``.

    ``AUTOINCREMENT`` makes every insert also update ``sqlite_sequence``: one more
    page written per event, i.e. per board write, on the claim's path. Its only
    gain, never reusing the id of a deleted newest row, means nothing for an
    append-only log addressed by (team, seq).
    """

    def db_type_suffix(self, connection: Any) -> str | None:
        if connection.vendor == "sqlite":
            return None
        return super().db_type_suffix(connection)


class Event(models.Model):
    """One committed mutation, in per-team commit order; the replay log for "since N"."""

    id = RowIdField(primary_key=True)

    # No index of its own: (team, seq) below leads with it, and every board write
    # inserts an event, so each index here is paid on the claim path.
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="events", db_index=False)
    seq = models.BigIntegerField()
    kind = models.CharField(max_length=48)
    task_id = models.CharField(max_length=128, null=True, blank=True)
    prev_status = models.CharField(max_length=16, null=True, blank=True)
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField()
    tenant_id = models.CharField(max_length=64, null=True, blank=True, editable=False)

    class Meta:
        db_table = "events"
        ordering = ["team", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["team", "seq"], name="events_team_seq_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.team_id}#{self.seq} {self.kind}"


class IdempotencyRecord(models.Model):
    """The first answer to a POST carrying an ``Idempotency-Key`` (kept 24 h).

    A row is inserted *before* the request runs (``status`` 0 = in flight), so two
    concurrent retries cannot both run: the unique key makes the second one wait
    its turn as a 409.
    """

    user = models.ForeignKey(django_settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    key = models.CharField(max_length=255)
    method = models.CharField(max_length=8)
    path = models.CharField(max_length=1024)
    body_sha256 = models.CharField(max_length=64)
    status = models.IntegerField(default=0)
    response = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        db_table = "idempotency_records"
        constraints = [
            models.UniqueConstraint(fields=["user", "key"], name="idempotency_user_key_unique"),
        ]
        indexes = [models.Index(fields=["created_at"], name="idempotency_created_idx")]

    def __str__(self) -> str:
        return f"{self.method} {self.path} [{self.key}]"


class ChatMessage(models.Model):
    """A line in a team's chat room. Narration of board changes lands here; chat is
    never a write path back to the board."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="chat_messages")
    author = models.CharField(max_length=200)
    body = models.TextField()
    task_id = models.CharField(max_length=128, null=True, blank=True)
    event_seq = models.BigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField()
    tenant_id = models.CharField(max_length=64, null=True, blank=True, editable=False)

    class Meta:
        db_table = "chat_messages"
        ordering = ["team", "created_at", "id"]
        indexes = [models.Index(fields=["team", "created_at"], name="chat_team_created_idx")]

    def __str__(self) -> str:
        return f"{self.team_id}: {self.body[:60]}"


class Heartbeat(models.Model):
    """The last beat of one running part of Clawboo (the ticker, the executor
    workers, the django-q2 cluster) in one process: ``/healthz`` reads them."""

    part = models.CharField(max_length=32)
    # host:pid, so two hosts (or two processes of one host) beat side by side.
    instance = models.CharField(max_length=200)
    host = models.CharField(max_length=200)
    pid = models.IntegerField()
    started_at = models.DateTimeField()
    beat_at = models.DateTimeField()
    # A remote worker's beat says what it runs: {"agents": [...], "running": [...]}.
    detail = models.JSONField(default=dict, blank=True)
    # When a loop of this process last lost the database, and got it back (null
    # while it is down, or never lost): written with the first beat that gets through.
    db_lost_at = models.DateTimeField(null=True, blank=True)
    db_back_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "heartbeats"
        ordering = ["part", "instance"]
        constraints = [
            models.UniqueConstraint(fields=["part", "instance"], name="heartbeats_one_per_part"),
        ]

    def __str__(self) -> str:
        return f"{self.part} {self.instance} @ {self.beat_at.isoformat()}"


class MachineToken(models.Model):
    """A worker host's credential (``create_machine_token --host H --agent A``).

    Only the SHA-256 of the key is kept: the key is shown once, when minted. It
    authenticates as a service user of its own (a member of the bound agents' teams,
    so it reads nothing else) and may act as the bound agents only. Revoked: it
    authenticates no more, which stops the worker at its next heartbeat.
    """

    host = models.CharField(max_length=200)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    # The key's first characters, to tell tokens apart in the admin.
    prefix = models.CharField(max_length=8, editable=False)
    user = models.OneToOneField(
        django_settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="machine_token",
        editable=False,
    )
    agents = models.ManyToManyField(Agent, related_name="machine_tokens")
    created_by = models.ForeignKey(
        django_settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        editable=False,
    )
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        db_table = "machine_tokens"
        ordering = ["host", "id"]

    def __str__(self) -> str:
        return f"machine token {self.prefix}… of {self.host}"


class Repository(models.Model):
    """A git repository registered to a team: the only places worktrees are made.

    Registered by staff (``core.repositories``); ``path`` is the real path of the
    repository's top level (symlinks and ``..`` resolved when it was registered), so
    tasks, agents and routine templates name a repository by id, never by path.
    """

    id = models.CharField(primary_key=True, max_length=128)
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="repositories")
    path = models.CharField(max_length=1024)
    remote = models.CharField(max_length=1024, blank=True, default="")
    base_branch = models.CharField(max_length=255, blank=True, default="")
    # "" keeps the repository's git config (clawboo.landing) and the settings' default.
    landing = models.CharField(
        max_length=16, blank=True, default="", choices=[("squash", "squash"), ("merge", "merge")]
    )
    # How approved work reaches the base: "direct" lands each approval on its own (the
    # default); "queue" stacks approvals in the repository's merge queue; "pull_request"
    # opens a pull request on the repository's forge and merges through it.
    landing_mode = models.CharField(
        max_length=16,
        default="direct",
        choices=[("direct", "direct"), ("queue", "queue"), ("pull_request", "pull_request")],
    )
    install_cmd = models.TextField(blank=True, default="")
    verify_cmd = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "repositories"
        ordering = ["team", "id"]
        verbose_name_plural = "repositories"
        constraints = [
            models.UniqueConstraint(fields=["team", "path"], name="repositories_team_path_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.id} ({self.path})"


class Forge(models.Model):
    """The code host a repository's pull requests live on (``landing_mode:
    pull_request``): GitHub or Gitea/Forgejo, its API, the ``owner/name`` there, and
    the token the server acts with. The token and the webhook secret are write-only
    (``core.repositories`` shows their place, never their value)."""

    repository = models.OneToOneField(
        Repository, primary_key=True, on_delete=models.CASCADE, related_name="forge"
    )
    kind = models.CharField(max_length=16, choices=[("github", "github"), ("gitea", "gitea")])
    api_url = models.CharField(max_length=1024)
    repo = models.CharField(max_length=255)  # owner/name on the forge
    token = models.TextField(blank=True, default="")
    webhook_secret = models.TextField(blank=True, default="")
    # How an approval merges the pull request on the forge.
    merge_method = models.CharField(
        max_length=16,
        default="merge",
        choices=[("merge", "merge"), ("squash", "squash"), ("rebase", "rebase")],
    )
    # Names of the checks that decide; empty: every check on the head commit does.
    required_checks = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "repository_forges"

    def __str__(self) -> str:
        return f"{self.kind}:{self.repo}"

"""The credential the executor hands one run of an agent: it acts as that agent, in
its team, on the board's MCP server, for as long as that run's claim holds."""

from __future__ import annotations

from django.db import models

from core.models import Agent


class RunCredential(models.Model):
    """Minted when a run starts, deleted when it ends. Only the key's SHA-256 is
    stored; the key itself is written once, into the run's MCP configuration."""

    key_sha256 = models.CharField(primary_key=True, max_length=64)
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="run_credentials")
    task_id = models.CharField(max_length=128)
    # The run's claim ticket: the credential is void once the claim is lost, and
    # the run's heartbeats over MCP are fenced by it.
    ticket = models.TextField()
    # A critic's credential: it reads the task's team board while the builder's
    # claim holds, and settles nothing (every writing tool refuses it).
    read_only = models.BooleanField(default=False)
    created_at = models.DateTimeField()

    class Meta:
        db_table = "mcp_run_credentials"
        indexes = [models.Index(fields=["task_id"], name="mcp_cred_task_idx")]

    def __str__(self) -> str:
        return f"run credential of {self.agent_id} for {self.task_id}"

    @property
    def principal_kind(self) -> str:
        """Its side in GOVERNANCE §6 (core.roles): a critic's is a reviewer's."""
        return "reviewer" if self.read_only else "agent"

    @property
    def bound_agent_id(self) -> str:
        """The one agent it acts as (core.api.auth.bound_agent)."""
        return str(self.agent_id)

    @property
    def run_task_id(self) -> str:
        """The task of its run, which the executor settles (core.api.auth.run_task)."""
        return str(self.task_id)

"""A remote worker whose agent was paused after its claim opened the run -- its
breaker tripped on another of its runs meanwhile, or a person paused it -- runs
nothing: the run is closed as not started and the server settles it by the local
executor's rule (``executor.settle.refuse_paused``, GOVERNANCE §2): ``cancelled``,
``error_class: breaker`` for the breaker's pause, never counted, the task back in
``todo``. The real worker code, its API answered in process (:class:`InProcessApi`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from board import store
from board.models import ExecutionProcess
from core import machines, registry
from executor import breakers
from executor.remote import Worker
from tests.executor.test_remote_rebase import InProcessApi

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]


class ChangedAfterClaim(InProcessApi):
    """The server, with the agent edited by ``changes`` right after the first claim."""

    def __init__(self, key: str, changes: dict[str, Any]) -> None:
        super().__init__(key)
        self.changes: dict[str, Any] | None = changes

    def call_patiently(self, method: str, path: str, body: Any = None, *, stop: Any = None):
        answer = super().call_patiently(method, path, body, stop=stop)
        if path == "/api/board/claim-next" and answer[0] == 200 and self.changes:
            registry.update_agent("far", self.changes)
            self.changes = None
        return answer


class PausedAfterClaim(InProcessApi):
    """The server, with the agent paused (by ``by``) right after the claim's answer."""

    def __init__(self, key: str, by: str) -> None:
        super().__init__(key)
        self.by = by

    def call_patiently(self, method: str, path: str, body: Any = None, *, stop: Any = None):
        answer = super().call_patiently(method, path, body, stop=stop)
        if path == "/api/board/claim-next" and answer[0] == 200:
            reason = "breaker: 3 consecutive failed runs" if self.by == "breaker" else "lunch"
            store.pause_agent("far", reason, by=self.by)
        return answer


@pytest.mark.parametrize(("by", "error_class"), [("breaker", "breaker"), ("ada", "cancelled")])
def test_a_remote_run_whose_agent_was_paused_after_its_claim_is_not_run_and_closed_as_breaker(
    default_team, tmp_path: Path, by: str, error_class: str
):
    # It ran the task all the same, for a paused agent.
    marker = tmp_path / "ran"
    registry.create_agent(
        id="far",
        display_name="Far",
        team="default",
        runtime="command",
        max_concurrent=2,
        settings={"argv": [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]},
    )
    _, key = machines.mint("laptop", ["far"])
    task = store.create_task(title="t", file_mutating=False).task
    worker = Worker(PausedAfterClaim(key, by), ["far"], tmp_path / "w", 0.5, 1.0, 60.0)

    assert worker.work_one("far") is True

    assert not marker.exists()
    (run,) = ExecutionProcess.objects.filter(task_id=task.id)
    assert (run.status, run.error_class) == ("cancelled", error_class)
    assert "agent is paused" in (run.error or "")
    assert not breakers.counts(run.error_class)
    after = store.get_task(task.id)
    assert (after.status, after.assignee_agent_id) == ("todo", None)
    assert registry.get_agent("far").breaker_failures == 0


def test_an_agent_changed_to_ask_for_tool_approvals_while_its_worker_runs_claims_nothing(
    tmp_path: Path, monkeypatch
):
    # A worker refuses such an agent at its start (it cannot route a tool approval to
    # the board); changed while the worker ran, it claimed task after task and failed
    # each. Now its gate refuses the claim, as it does an agent its host cannot run.
    monkeypatch.setenv("CLAWBOO_HEALTH_PROBE_MS", "0")  # the agent read at every look

    class Server:
        def __init__(self) -> None:
            self.claims: list[dict] = []
            self.agent = {
                "id": "far",
                "runtime": "claude-code",
                "settings": {"binary": sys.executable, "permission_mode": "dontAsk"},
                "updated_at": "1",
            }

        def call_patiently(self, method, path, body=None, *, stop=None):
            if (method, path) == ("GET", "/api/agents/far"):
                return 200, dict(self.agent)
            assert (method, path) == ("POST", "/api/board/claim-next")
            self.claims.append(dict(body))
            return 204, None

    api = Server()
    worker = Worker(api, ["far"], tmp_path, heartbeat_s=1, poll_s=1, run_timeout_s=10)
    assert worker.work_one("far") is False
    assert len(api.claims) == 1
    api.agent = {
        **api.agent,
        "settings": {"binary": sys.executable, "permission_mode": "default"},
        "updated_at": "2",
    }
    assert worker.work_one("far") is False
    assert len(api.claims) == 1
    assert "may ask for tool approvals" in worker.paused["far"]


def test_an_agent_switched_to_a_persons_runtime_after_its_claim_is_handed_back_once(
    default_team, tmp_path: Path
):
    # The worker failed the task it had claimed ("needs a person") and claimed the next
    # one, and the next, failing each: the queue eaten by an agent nobody can run here.
    # Now the run is closed not started, saying why, the task back in todo, and the
    # worker claims nothing more for that agent.
    registry.create_agent(
        id="far",
        display_name="Far",
        team="default",
        runtime="command",
        settings={"argv": ["true"]},
    )
    _, key = machines.mint("laptop", ["far"])
    ids = [store.create_task(title=f"t{n}", file_mutating=False).task.id for n in range(3)]
    api = ChangedAfterClaim(key, {"runtime": "human", "settings": {}})
    worker = Worker(api, ["far"], tmp_path / "w", 0.5, 1.0, 60.0)

    for _ in range(3):
        worker.work_one("far")

    (run,) = ExecutionProcess.objects.all()
    assert (run.status, run.error_class) == ("cancelled", "cancelled")
    assert "needs a person" in (run.error or "")
    assert [store.get_task(i).status for i in ids] == ["todo"] * 3
    assert "needs a person" in worker.paused["far"]


def test_a_worker_that_can_run_none_of_its_agents_says_why_and_stops(tmp_path: Path):
    # `clawboo worker --agent ada-bot` (an agent that acts through the API itself, as
    # `create_agent_token --agent` makes) logged "takes no work on this host" once and
    # polled for ever; a new user saw a worker that was up and did nothing.
    from executor.preflight import Refused, nothing_to_run

    agents = {
        "ada-bot": {"id": "ada-bot", "runtime": "human", "settings": {}, "team": "default"},
        "coder": {"id": "coder", "runtime": "command", "settings": {"argv": ["true"]}},
    }

    class Server:
        def call_patiently(self, method, path, body=None, *, stop=None):
            assert method == "GET", (method, path)  # nothing claimed
            return 200, dict(agents[path.rsplit("/", 1)[1]])

    worker = Worker(Server(), ["ada-bot"], tmp_path, heartbeat_s=1, poll_s=1, run_timeout_s=10)
    with pytest.raises(Refused) as refused:
        worker.serve()
    assert str(refused.value) == (
        "agent 'ada-bot': runtime 'human' needs a person; the executor does not run it "
        "-- nothing for this worker to run (give it an agent it can run)"
    )
    # One agent it can run among them: the worker runs that one.
    assert nothing_to_run(list(agents.values())) is None

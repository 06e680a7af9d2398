"""A remote worker's run through the API: it opens the claim's execution, reports
usage (answered ``stop`` at a limit), appends its log and closes the run -- with the
claim's ticket, as the task's assignee, and only for its own team's tasks."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from board import store
from board.models import CostStatus, ExecutionProcess, TaskComment
from core import machines, registry, runlogs
from core.models import Event
from tests.api.conftest import fingerprint

pytestmark = pytest.mark.django_db


@pytest.fixture
def state(tmp_path, settings):
    settings.CLAWBOO_STATE_DIR = tmp_path
    return tmp_path


@pytest.fixture
def fleet(db, state):
    for agent_id in ("a-bot", "b-bot"):
        registry.create_agent(
            id=agent_id, display_name=agent_id, team="default", runtime="claude-code"
        )
    registry.create_team("red", "Red")
    registry.create_agent(id="red-bot", display_name="R", team="red", runtime="claude-code")


def client_for(*agents: str) -> APIClient:
    _, key = machines.mint("gpu-1", list(agents))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def claimed(client: APIClient, agent: str = "a-bot", **task) -> tuple[str, str]:
    created = store.create_task(title="remote", file_mutating=False, **task).task
    answer = client.post("/api/board/claim-next", {"agent_id": agent}, format="json")
    assert answer.status_code == 200, answer.json()
    assert answer.json()["task"]["id"] == created.id
    return created.id, answer.json()["ticket"]


def opened(client: APIClient, task_id: str, ticket: str) -> int:
    answer = client.post(
        f"/api/board/tasks/{task_id}/executions",
        {"ticket": ticket, "runtime": "claude-code"},
        format="json",
    )
    assert answer.status_code == 201, answer.json()
    assert answer.json()["status"] == "running" and answer.json()["agent_id"] == "a-bot"
    return answer.json()["id"]


def test_a_remote_run_opens_reports_usage_and_closes_with_its_cost(fleet):
    client = client_for("a-bot")
    task_id, ticket = claimed(client)
    run = opened(client, task_id, ticket)
    base = f"/api/board/tasks/{task_id}/executions/{run}"
    usage = {"ticket": ticket, "tokens_in": 100_000, "tokens_out": 10, "model": "claude-opus-5-5"}
    answer = client.post(f"{base}/usage", usage, format="json").json()
    # 100000 × 400 / 1e6 + 10 × 2000 / 1e6 = 40.02¢, priced by the server's table.
    assert answer["stop"] is False and answer["reason"] is None
    assert (answer["cost_cents"], answer["cost_status"]) == (40, "estimated")
    # What the worker needs to stop the run at its ceiling by itself: none here.
    assert answer["max_run_cents"] is None
    assert answer["rates"] == {"in": 400, "out": 2000, "cache_read": 40, "cache_write": 500}
    assert store.get_task(task_id).cost_cents == 40  # live while it runs
    close = {
        "ticket": ticket,
        "outcome": "succeeded",
        "exit_code": 0,
        "tokens_in": 200_000,
        "tokens_out": 20,
        "cost_cents": 90,
        "model": "claude-opus-5-5",
        "log": "tail",
    }
    closed = client.post(f"{base}/close", close, format="json")
    assert closed.status_code == 200, closed.json()
    row = ExecutionProcess.objects.get(pk=run)
    assert (row.status, row.exit_code, row.error_class, row.log) == ("succeeded", 0, "", "tail")
    assert (row.tokens_in, row.tokens_out, row.cost_cents) == (200_000, 20, 90)
    assert row.cost_status == CostStatus.REPORTED
    # The final figure replaced the streamed one: the task counts the run once.
    assert store.get_task(task_id).cost_cents == 90
    # Closing again changes nothing; a closed run takes no more usage.
    again = client.post(f"{base}/close", {**close, "cost_cents": 5}, format="json")
    assert again.status_code == 200 and again.json()["cost_cents"] == 90
    late = client.post(f"{base}/usage", usage, format="json")
    assert late.status_code == 409 and late.json()["reason"] == "lost-claim"


def test_a_usage_report_over_the_ceiling_is_answered_stop_and_the_close_says_budget(fleet):
    client = client_for("a-bot")
    task_id, ticket = claimed(client, max_run_cents=100)
    run = opened(client, task_id, ticket)
    base = f"/api/board/tasks/{task_id}/executions/{run}"
    turn = {"ticket": ticket, "model": "claude-opus-5-5", "tokens_out": 0}
    first = client.post(f"{base}/usage", {**turn, "tokens_in": 200_000}, format="json").json()
    assert first["stop"] is False and first["cost_cents"] == 80
    assert first["max_run_cents"] == 100
    second = client.post(f"{base}/usage", {**turn, "tokens_in": 300_000}, format="json").json()
    assert second["stop"] is True and "ceiling of 100¢" in second["reason"]
    closed = client.post(
        f"{base}/close",
        {**turn, "tokens_in": 300_000, "outcome": "cancelled", "exit_code": -15},
        format="json",
    ).json()
    assert closed["status"] == "cancelled" and closed["error_class"] == "budget"
    assert closed["cost_cents"] == 120
    task = store.get_task(task_id)
    assert task.status == "blocked" and "ceiling of 100¢" in task.error
    (comment,) = TaskComment.objects.filter(task_id=task_id)
    assert "ceiling of 100¢" in comment.body
    assert Event.objects.filter(task_id=task_id, kind="budget_stopped").count() == 1


def test_a_paused_team_cap_stops_a_remote_run_at_its_next_report(fleet):
    from board.store import spend

    cap = {"scope": "team", "scope_id": "default", "window": "day", "mode": "cap"}
    spend.create_budget("default", {**cap, "limit_cents": 50})
    client = client_for("a-bot")
    task_id, ticket = claimed(client)
    run = opened(client, task_id, ticket)
    report = {"ticket": ticket, "model": "claude-opus-5-5", "tokens_in": 200_000}
    answer = client.post(
        f"/api/board/tasks/{task_id}/executions/{run}/usage", report, format="json"
    ).json()
    assert answer["stop"] is True and "50¢ day budget" in answer["reason"]


def test_a_remote_runs_log_is_appended_once_per_chunk_to_the_file_the_board_reads(fleet):
    client = client_for("a-bot")
    task_id, ticket = claimed(client)
    run = opened(client, task_id, ticket)
    path = f"/api/board/tasks/{task_id}/executions/{run}/log"
    chunk = {
        "ticket": ticket,
        "offset": 0,
        "lines": [{"stream": "stdout", "line": "one"}, {"stream": "stderr", "line": "two"}],
    }
    first = client.post(path, chunk, format="json").json()
    assert first == {"size": 17, "written": True, "full": False}
    # The same chunk again (its answer was lost): not written twice.
    assert client.post(path, chunk, format="json").json()["written"] is False
    later = {**chunk, "offset": 17, "lines": [{"stream": "stdout", "line": "three"}]}
    assert client.post(path, later, format="json").json()["size"] == 23
    assert runlogs.read("default", task_id, run) == b"one\n[stderr] two\nthree\n"
    downloaded = client.get(path)
    assert downloaded.status_code == 200 and downloaded.content == b"one\n[stderr] two\nthree\n"


def test_a_remote_chunks_line_breaks_cannot_forge_a_stderr_line_or_the_truncation_mark(fleet):
    client = client_for("a-bot")
    task_id, ticket = claimed(client)
    run = opened(client, task_id, ticket)
    path = f"/api/board/tasks/{task_id}/executions/{run}/log"
    forged = "ok\n[stderr] rm -rf / done\r\n[clawboo: log truncated at 10 bytes]"
    lines = [{"stream": "stdout", "line": forged}, {"stream": "stderr", "line": "a\u2028b"}]
    answer = client.post(path, {"ticket": ticket, "offset": 0, "lines": lines}, format="json")
    assert answer.json()["full"] is False
    text = runlogs.read("default", task_id, run).decode()
    assert text.splitlines() == [
        "ok",
        "[stdout] [stderr] rm -rf / done",
        "[stdout] [clawboo: log truncated at 10 bytes]",
        "[stderr] a",
        "[stderr] b",
    ]
    # The log still takes lines: the forged mark did not close it.
    more = {
        "ticket": ticket,
        "offset": answer.json()["size"],
        "lines": [{"stream": "stdout", "line": "z"}],
    }
    assert client.post(path, more, format="json").json()["written"] is True


def test_a_remote_runs_log_stops_at_its_bound(fleet, settings):
    settings.CLAWBOO_RUNLOG_MAX_BYTES = 10
    client = client_for("a-bot")
    task_id, ticket = claimed(client)
    run = opened(client, task_id, ticket)
    path = f"/api/board/tasks/{task_id}/executions/{run}/log"
    lines = [{"stream": "stdout", "line": f"line {i}"} for i in range(5)]
    answer = client.post(path, {"ticket": ticket, "offset": 0, "lines": lines}, format="json")
    assert answer.json()["full"] is True
    more = {"ticket": ticket, "offset": answer.json()["size"], "lines": lines}
    assert client.post(path, more, format="json").json()["written"] is False
    text = runlogs.read("default", task_id, run).decode()
    assert text == "line 0\n" + runlogs.TRUNCATED.format(limit=10)


def test_a_machine_token_reports_no_run_of_another_agents_or_teams_task(fleet):
    client = client_for("a-bot")
    mine_id, mine_ticket = claimed(client)
    run = opened(client, mine_id, mine_ticket)
    other = store.create_task(title="b's", file_mutating=False).task
    other_ticket = store.claim(other.id, "b-bot").ticket
    other_run = store.open_execution(other.id, other_ticket).id
    hidden = store.create_task(title="red's", team="red", file_mutating=False).task
    hidden_ticket = store.claim(hidden.id, "red-bot").ticket
    hidden_run = store.open_execution(hidden.id, hidden_ticket).id
    for task_id, ticket, execution, status in (
        (other.id, other_ticket, other_run, 403),
        (hidden.id, hidden_ticket, hidden_run, 404),
    ):
        base = f"/api/board/tasks/{task_id}/executions"
        before = fingerprint()
        for path, body in (
            (base, {"ticket": ticket}),
            (f"{base}/{execution}/usage", {"ticket": ticket, "tokens_in": 5}),
            (f"{base}/{execution}/log", {"ticket": ticket, "offset": 0, "lines": []}),
            (f"{base}/{execution}/close", {"ticket": ticket, "outcome": "failed"}),
        ):
            answer = client.post(path, body, format="json")
            assert answer.status_code == status, (path, answer.json())
        assert fingerprint() == before
    # Its own run, with another claim's ticket or another task's execution: refused.
    base = f"/api/board/tasks/{mine_id}/executions"
    stale = client.post(f"{base}/{run}/usage", {"ticket": other_ticket}, format="json")
    assert stale.status_code == 409 and stale.json()["reason"] == "not-my-task"
    elsewhere = client.post(f"{base}/{other_run}/usage", {"ticket": mine_ticket}, format="json")
    assert elsewhere.status_code == 404
    twice = client.post(base, {"ticket": mine_ticket}, format="json")
    assert twice.status_code == 409  # one running execution per task


def test_bad_report_bodies_are_refused_and_write_nothing(fleet):
    client = client_for("a-bot")
    task_id, ticket = claimed(client)
    run = opened(client, task_id, ticket)
    base = f"/api/board/tasks/{task_id}/executions/{run}"
    before = fingerprint()
    for path, body, field in (
        ("usage", {"ticket": ticket, "tokens_in": -1}, "tokens_in"),
        ("usage", {"ticket": ticket, "cost_cents": "lots"}, "cost_cents"),
        ("usage", {"ticket": ticket, "surprise": 1}, "surprise"),
        ("log", {"ticket": ticket, "offset": 0, "lines": [{"stream": "x", "line": ""}]}, None),
        ("log", {"ticket": ticket, "offset": -1, "lines": []}, "offset"),
        ("close", {"ticket": ticket, "outcome": "exploded"}, "outcome"),
        ("close", {"ticket": "forged", "outcome": "failed"}, "ticket"),
    ):
        answer = client.post(f"{base}/{path}", body, format="json")
        assert answer.status_code == 400, (path, body, answer.json())
        if field:
            assert answer.json()["field"] == field
    assert fingerprint() == before
    assert not runlogs.exists("default", task_id, run)


def test_an_open_sent_again_with_its_idempotency_key_answers_the_execution_it_opened(fleet):
    client = client_for("a-bot")
    task_id, ticket = claimed(client)
    path = f"/api/board/tasks/{task_id}/executions"
    first, again = (
        client.post(path, {"ticket": ticket}, format="json", HTTP_IDEMPOTENCY_KEY="open-1")
        for _ in range(2)
    )
    assert first.status_code == again.status_code == 201
    assert first.json()["id"] == again.json()["id"]
    assert ExecutionProcess.objects.filter(task_id=task_id).count() == 1


def test_a_claim_opens_one_run_and_a_second_open_is_409_until_a_fix_round(fleet):
    # A worker that lost track (restarted, re-asking without its key) may not open
    # run after run on one claim: each would start the work again.
    client = client_for("a-bot")
    task_id, ticket = claimed(client)
    run = opened(client, task_id, ticket)
    base = f"/api/board/tasks/{task_id}/executions"
    closed = {"ticket": ticket, "outcome": "failed", "error": "the worker restarted"}
    assert client.post(f"{base}/{run}/close", closed, format="json").status_code == 200

    again = client.post(base, {"ticket": ticket, "runtime": "claude-code"}, format="json")

    assert again.status_code == 409 and again.json()["error"] == "conflict"
    assert "already had its run" in again.json()["detail"]
    assert ExecutionProcess.objects.filter(task_id=task_id).count() == 1
    sent = store.send_back_for_fix(
        task_id, ticket, evidence="red", detail={"fix_cycles": 1}, feedback="fix it"
    )
    assert sent.recorded
    assert opened(client, task_id, ticket) != run  # the fix round's own run


def test_the_next_runs_prompt_carries_the_fix_feedback_for_its_own_agent_only(fleet):
    from executor import prompts

    client = client_for("a-bot")
    task_id, ticket = claimed(client, description="make it so")
    first = client.get(f"/api/board/tasks/{task_id}/prompt").json()
    assert first["feedback"] is None and first["fix_cycles"] == 0
    assert first["prompt"].startswith(f"Task {task_id}: remote\n\nmake it so")
    assert "TASK.md" not in first["prompt"]  # a remote clone has no scaffold
    fix = "verification gate failed: `make` exited 2\nWhy: boom\nHow to fix: make it pass"
    sent = store.send_back_for_fix(
        task_id, ticket, evidence="exit 2", detail={"fix_cycles": 1}, feedback=fix
    )
    assert not sent.declined, sent
    again = client.get(f"/api/board/tasks/{task_id}/prompt").json()
    assert again["fix_cycles"] == 1 and again["feedback"] == fix
    # The local executor's rendering, word for word.
    task = store.get_task(task_id)
    assert again["prompt"] == prompts.run_prompt(task, None, scaffolded=False)
    assert f"Feedback from the previous attempt: {fix}" in again["prompt"]
    other = store.create_task(title="b's", file_mutating=False).task
    store.claim(other.id, "b-bot")
    hidden = store.create_task(title="red's", team="red", file_mutating=False).task
    store.claim(hidden.id, "red-bot")
    assert client.get(f"/api/board/tasks/{other.id}/prompt").status_code == 403
    assert client.get(f"/api/board/tasks/{hidden.id}/prompt").status_code == 404


def test_a_remote_run_under_half_a_cent_counts_in_millicents(fleet):
    client = client_for("a-bot")
    task_id, ticket = claimed(client)
    run = opened(client, task_id, ticket)
    base = f"/api/board/tasks/{task_id}/executions/{run}"
    # 750 input tokens of claude-opus-5-5: 0.3 ¢, estimated.
    report = {"ticket": ticket, "model": "claude-opus-5-5", "tokens_in": 750}
    answer = client.post(f"{base}/usage", report, format="json").json()
    assert (answer["cost_cents"], answer["cost_millicents"]) == (0, 300)
    closed = client.post(
        f"{base}/close",
        {"ticket": ticket, "outcome": "succeeded", "cost_millicents": 420},
        format="json",
    ).json()
    assert (closed["cost_cents"], closed["cost_millicents"], closed["cost_status"]) == (
        0,
        420,
        "reported",
    )
    assert store.get_task(task_id).cost_millicents == 420


def test_claim_next_with_open_run_opens_the_claims_run_in_the_same_call(fleet):
    # A remote worker's claim and the start of its run are one write, as a local
    # worker's are: the answer carries the run, and it is the claim's one run.
    client = client_for("a-bot")
    created = store.create_task(title="remote", file_mutating=False).task
    answer = client.post(
        "/api/board/claim-next", {"agent_id": "a-bot", "open_run": True}, format="json"
    )
    assert answer.status_code == 200, answer.json()
    body = answer.json()
    assert body["task"]["id"] == created.id
    run = body["execution"]
    assert (run["status"], run["agent_id"], run["attempt"]) == ("running", "a-bot", 1)
    assert run["runtime"] == "claude-code"  # the agent's, from the registry
    row = ExecutionProcess.objects.get(task_id=created.id)
    assert row.id == run["id"] and row.pid is None  # no process of the server's
    assert row.started_at == store.get_task(created.id).started_at  # the claim's stamp

    base = f"/api/board/tasks/{created.id}/executions"
    again = client.post(base, {"ticket": body["ticket"]}, format="json")
    assert again.status_code == 409 and "already" in again.json()["detail"]
    usage = {"ticket": body["ticket"], "cost_cents": 3}
    assert client.post(f"{base}/{run['id']}/usage", usage, format="json").status_code == 200
    close = {"ticket": body["ticket"], "outcome": "succeeded", "cost_cents": 3}
    assert client.post(f"{base}/{run['id']}/close", close, format="json").status_code == 200


def test_claim_next_without_open_run_answers_as_before_and_opens_nothing(fleet):
    client = client_for("a-bot", "b-bot")
    task_id, _ = claimed(client)
    assert not ExecutionProcess.objects.filter(task_id=task_id).exists()
    created = store.create_task(title="next", file_mutating=False).task
    answer = client.post(
        "/api/board/claim-next", {"agent_id": "b-bot", "open_run": False}, format="json"
    )
    assert answer.status_code == 200 and answer.json()["task"]["id"] == created.id
    assert set(answer.json()) == {"task", "ticket", "repository"}
    assert not ExecutionProcess.objects.filter(task_id=created.id).exists()


@pytest.mark.parametrize("value", ["yes", 1, None, [True]])
def test_claim_next_with_an_open_run_not_a_boolean_is_400_and_writes_nothing(fleet, value):
    client = client_for("a-bot")
    store.create_task(title="remote", file_mutating=False)
    before = fingerprint()
    answer = client.post(
        "/api/board/claim-next", {"agent_id": "a-bot", "open_run": value}, format="json"
    )
    assert answer.status_code == 400
    assert (answer.json()["error"], answer.json()["field"]) == ("validation_error", "open_run")
    assert fingerprint() == before


def test_a_remote_runs_prompt_carries_what_a_local_runs_task_md_and_init_sh_say(fleet):
    # A local run reads the task's acceptance criteria and gotchas in TASK.md and its
    # install / verify commands in init.sh; a remote clone has neither, and its
    # prompt said only the title and description: the goal, the context and the
    # commands a person set on the task never reached a remote agent.
    client = client_for("a-bot")
    task_id, _ = claimed(
        client,
        description="make it so",
        goal="the total includes tax",
        context="prices are in cents",
        metadata={"install_cmd": "pip install -e .", "verify_cmd": "pytest -q"},
    )
    prompt = client.get(f"/api/board/tasks/{task_id}/prompt").json()["prompt"]
    assert "Acceptance criteria: the total includes tax" in prompt
    assert "Known gotchas: prices are in cents" in prompt
    assert "`pip install -e .`" in prompt and "`pytest -q`" in prompt
    assert "TASK.md" not in prompt and "init.sh" not in prompt


def test_a_remote_run_that_failed_for_its_agent_sends_its_task_back_to_todo_as_a_local_one(fleet):
    # A failure the breaker counts is the agent's, not the task's (GOVERNANCE §2): a
    # local run's task goes back to todo, and so must a remote one's -- its worker
    # closes the run, then fails the task; the fail used to block it (and cascade to
    # its dependents), so a broken remote agent blocked the queue task by task.
    client = client_for("a-bot")
    task_id, ticket = claimed(client)
    dependent = store.create_task(title="after", depends_on=[task_id]).task.id
    run = opened(client, task_id, ticket)
    closed = client.post(
        f"/api/board/tasks/{task_id}/executions/{run}/close",
        {"ticket": ticket, "outcome": "failed", "exit_code": 3, "error": "exit 3"},
        format="json",
    )
    assert closed.status_code == 200 and closed.json()["error_class"] == "unknown"
    failed = client.post(
        f"/api/board/tasks/{task_id}/fail",
        {"ticket": ticket, "error": "exit 3", "if_allowed": True},
        format="json",
    )
    assert failed.status_code == 200, failed.json()
    task = store.get_task(task_id)
    assert (task.status, task.feedback) == ("todo", "exit 3")
    assert store.get_task(dependent).status == "todo"

"""Builder is not judge (GOVERNANCE §4): the verify command's sources, ``fail (none
configured)``, the structured verdict, the critic in a branchless checkout, and the
bounded fix loop -- with the `command` runtime on a real repository."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from board import store
from board.errors import VerificationRequired
from board.models import ExecutionProcess
from core import registry
from core.models import Event
from executor.runner import Executor
from ops import notify
from tests.fixtures.gitrepos import git
from tests.fixtures.runs import VERIFY_OK
from worktrees import service as worktree_service

pytestmark = pytest.mark.django_db

# A builder that writes "ok" once its context (TASK.md) names a fix request, and
# "meh" before: a first round a critic can fail and a second that can pass.
LEARNING_BUILDER = """
import pathlib
here = pathlib.Path.cwd()
told = "feature.txt:1" in (here / "TASK.md").read_text()
(here / "feature.txt").write_text("ok\\n" if told else "meh\\n")
print("wrote", "ok" if told else "meh")
"""

# A `command` critic: one JSON object on stdout; a blocking finding unless the file
# reads "ok". It also writes a file in its checkout and notes where it ran.
CRITIC = """
import json, os, pathlib, subprocess, sys
here = pathlib.Path.cwd()
note = pathlib.Path(sys.argv[1])
branch = subprocess.run(["git", "symbolic-ref", "-q", "HEAD"], capture_output=True, text=True)
with note.open("a") as out:
    out.write(json.dumps({"cwd": str(here), "branch": branch.stdout.strip(),
                          "code": branch.returncode,
                          "base": os.environ.get("CLAWBOO_REVIEW_BASE"),
                          "head": os.environ.get("CLAWBOO_REVIEW_HEAD"),
                          "prompt": pathlib.Path(os.environ["CLAWBOO_PROMPT_FILE"]).read_text()})
              + "\\n")
(here / "critic-notes.txt").write_text("the critic was here\\n")
text = (here / "feature.txt").read_text()
mode = sys.argv[2] if len(sys.argv) > 2 else "judge"
if mode == "garbage":
    print("I think it is mostly fine?")
elif text == "ok\\n":
    print(json.dumps({"findings": [{"severity": "style", "title": "name it better"}]}))
else:
    print(json.dumps({"findings": [{"severity": "wrong_algorithm", "title": "says meh",
        "body": "feature.txt must say ok", "file": "feature.txt", "line": 1,
        "confidence": 0.9}]}))
"""


def person_reasons(task_id: str) -> list[str]:
    """What this task's events notified (one reason per event that needs a person)."""
    events = Event.objects.filter(task_id=task_id).order_by("seq")
    return [r for r in (notify.reason_for(e) for e in events) if r is not None]


@pytest.fixture
def builder(command_agent, tmp_path: Path):
    def make(agent_id: str = "builder", mode: str = "write", **settings):
        return command_agent(agent_id, mode, **settings)

    return make


@pytest.fixture
def learning_builder(db, repo: Path, tmp_path: Path):
    script = tmp_path / "learning.py"
    script.write_text(LEARNING_BUILDER)
    return registry.create_agent(
        id="builder",
        display_name="Builder",
        team="default",
        runtime="command",
        settings={"argv": [sys.executable, str(script)], "repo_path": str(repo)},
    )


@pytest.fixture
def critic(db, tmp_path: Path):
    script = tmp_path / "critic.py"
    script.write_text(CRITIC)
    notes = tmp_path / "critic-runs.jsonl"

    def make(mode: str = "judge"):
        agent = registry.create_agent(
            id="critic",
            display_name="Critic",
            team="default",
            runtime="command",
            settings={"argv": [sys.executable, str(script), str(notes), mode], "model": "m-2"},
        )
        registry.set_reviewer_agent("default", agent.id)
        return notes

    return make


# --- 1. nothing lands unverified ---------------------------------------------------


def test_a_file_mutating_task_with_no_verify_command_cannot_be_approved_without_an_override(
    builder,
):
    builder()
    task = store.create_task(title="Add feature").task
    report = Executor("builder").work_once()
    assert report.verdict == "fail"
    task = store.get_task(task.id)
    assert task.status == "in_review"
    verification = task.as_dict()["verification"]
    assert verification["verdict"] == "fail"
    assert verification["evidence"] == "(none configured)"
    assert verification["gate"] is None and len(verification["attempts"]) == 1
    with pytest.raises(VerificationRequired):
        worktree_service.approve(task.id, by="ada")
    assert store.get_task(task.id).status == "in_review"  # nothing landed
    landed = worktree_service.approve(
        task.id, by="ada", human_override={"by": "ada", "reason": "checked by hand"}
    )
    assert landed["result"] == "landed" and landed["task"].status == "done"


def test_a_missing_verify_command_is_not_sent_through_the_fix_loop(builder, settings):
    settings.CLAWBOO_MAX_FIX_CYCLES = 3
    builder()
    task = store.create_task(title="Add feature").task
    Executor("builder").work_once()
    task = store.get_task(task.id)
    assert task.status == "in_review" and task.feedback is None
    assert [e.kind for e in Event.objects.filter(kind="fix_requested")] == []


def test_verify_required_false_restores_no_verdict(builder, settings):
    settings.CLAWBOO_VERIFY_REQUIRED = False
    builder()
    task = store.create_task(title="Add feature").task
    report = Executor("builder").work_once()
    task = store.get_task(task.id)
    assert report.verdict is None and task.verdict is None and task.status == "in_review"


def test_the_agents_default_verify_command_judges_a_task_without_its_own(builder):
    builder(verify_cmd=VERIFY_OK)
    task = store.create_task(title="Add feature").task
    report = Executor("builder").work_once()
    assert report.verdict == "pass"
    gate = store.get_task(task.id).as_dict()["verification"]["gate"]
    assert gate["command"] == VERIFY_OK and gate["exit_code"] == 0
    assert gate["timed_out"] is False and gate["duration_ms"] >= 0


def test_the_tasks_own_verify_command_wins_over_the_agents(builder):
    builder(verify_cmd="false")
    task = store.create_task(title="Add feature", metadata={"verify_cmd": VERIFY_OK}).task
    assert Executor("builder").work_once().verdict == "pass"
    assert store.get_task(task.id).as_dict()["verification"]["gate"]["command"] == VERIFY_OK


# A builder that breaks the feature and rewrites the checkout's init.sh, the script
# that carries the task's verify command, to pass whatever it finds.
GATE_REWRITER = """
import pathlib
here = pathlib.Path.cwd()
(here / "feature.txt").write_text("broken\\n")
(here / "init.sh").write_text("#!/usr/bin/env bash\\necho all good\\nexit 0\\n")
print("rewrote the gate")
"""


def test_a_builder_that_rewrites_init_sh_is_still_judged_by_the_tasks_own_command(repo, tmp_path):
    # The builder is not the judge (GOVERNANCE §4, §6): the gate runs the server's
    # init.sh for the task, never the checkout's copy the builder can edit.
    script = tmp_path / "rewriter.py"
    script.write_text(GATE_REWRITER)
    registry.create_agent(
        id="builder",
        display_name="Builder",
        team="default",
        runtime="command",
        settings={"argv": [sys.executable, str(script)], "repo_path": str(repo)},
    )
    task = store.create_task(title="Add feature", metadata={"verify_cmd": VERIFY_OK}).task
    assert Executor("builder").work_once().verdict == "fail"
    verification = store.get_task(task.id).as_dict()["verification"]
    assert verification["verdict"] == "fail"
    assert verification["gate"]["command"] == VERIFY_OK
    assert verification["gate"]["exit_code"] != 0
    assert "all good" not in verification["evidence"]


def test_the_repositorys_verify_command_judges_when_task_and_agent_name_none(builder, repo):
    from core import repositories

    builder()
    registered = repositories.ensure("default", str(repo))
    repositories.update(registered.id, {"verify_cmd": VERIFY_OK})
    task = store.create_task(title="Add feature").task
    assert Executor("builder").work_once().verdict == "pass"
    assert store.get_task(task.id).as_dict()["verification"]["gate"]["command"] == VERIFY_OK


# --- 4. the fix loop ----------------------------------------------------------------


def test_a_gate_that_always_fails_gets_two_attempts_then_debt_blocked_and_one_notification(
    builder, settings
):
    settings.CLAWBOO_MAX_FIX_CYCLES = 1
    builder(mode="bad")
    task = store.create_task(title="Add feature", metadata={"verify_cmd": VERIFY_OK}).task
    first = Executor("builder").work_once()
    assert first.verdict == "fail" and first.worktree == "kept"
    sent = store.get_task(task.id)
    assert sent.status == "in_progress" and sent.assignee_agent_id == "builder"
    assert "grep -qx ok feature.txt" in sent.feedback and "exited 1" in sent.feedback
    # The fix request is in the builder's context: the handoff now, TASK.md next run.
    handoff = json.loads((Path(sent.worktree_ref) / "AGENT_HANDOFF.json").read_text())
    assert "verification gate failed" in handoff["brokenOrUnverified"][0]
    assert "make `grep -qx ok feature.txt` pass" in handoff["nextBestStep"]

    second = Executor("builder").work_once()  # the builder's executor picks it up
    assert second.task_id == task.id and second.verdict == "completed_with_debt"
    task = store.get_task(task.id)
    assert task.status == "blocked" and task.verdict == "completed_with_debt"
    assert "completed with debt after 2 attempt(s)" in task.feedback
    verification = task.as_dict()["verification"]
    assert len(verification["attempts"]) == 2
    assert all(a["gate"]["exit_code"] == 1 for a in verification["attempts"])
    assert "verification gate failed" in (Path(task.worktree_ref) / "TASK.md").read_text()
    assert person_reasons(task.id) == ["blocked"]
    from core import chat

    fixed = Event.objects.get(task_id=task.id, kind="fix_requested")
    assert chat.narration_for(fixed) == "Sent back to its builder to fix: 'Add feature'"
    assert [x.status for x in store.list_executions(task.id)] == ["succeeded", "succeeded"]


@pytest.mark.parametrize(
    "give_up",
    [
        pytest.param(lambda task_id: store.release(task_id), id="released"),
        pytest.param(lambda task_id: store.fail(task_id, "crashed", retry=True), id="soft-failed"),
    ],
)
def test_a_fix_round_given_up_does_not_start_the_fix_loop_again(builder, settings, give_up):
    settings.CLAWBOO_MAX_FIX_CYCLES = 1
    builder(mode="bad")
    task = store.create_task(title="Add feature", metadata={"verify_cmd": VERIFY_OK}).task
    assert Executor("builder").work_once().verdict == "fail"  # sent back: its one round
    give_up(task.id)
    back = store.get_task(task.id)
    assert back.status == "todo" and back.as_dict()["verification"] is None
    again = Executor("builder").work_once()
    assert again.task_id == task.id and again.verdict == "completed_with_debt"
    task = store.get_task(task.id)
    assert task.status == "blocked"
    assert len(task.as_dict()["verification"]["attempts"]) == 2
    # A person who moves it back to todo starts the loop afresh: a round to fix.
    store.unblock(task.id)
    assert Executor("builder").work_once().verdict == "fail"
    task = store.get_task(task.id)
    assert task.status == "in_progress"
    assert len(task.as_dict()["verification"]["attempts"]) == 1


def test_a_round_that_passes_after_a_fix_lands_in_review_with_both_attempts(
    learning_builder, critic, settings, repo
):
    settings.CLAWBOO_MAX_FIX_CYCLES = 1
    critic()
    task = store.create_task(
        title="Add feature", labels=["risk"], metadata={"verify_cmd": "test -s feature.txt"}
    ).task
    store.decide_approval(task.id, "approve", by="ada")  # risk waits for a person
    first = Executor("builder").work_once()
    assert first.verdict == "fail"
    sent = store.get_task(task.id)
    assert sent.status == "in_progress"
    assert "feature.txt:1" in sent.feedback and "wrong_algorithm" in sent.feedback
    # Its fix round holds the paths the judged run changed (issue 43: scope).
    assert sent.touches is None and "feature.txt" in (sent.scope or [])
    second = Executor("builder").work_once()
    assert second.verdict == "pass"
    task = store.get_task(task.id)
    assert task.status == "in_review"
    assert "feature.txt" in (task.scope or [])  # recorded again as it settled
    verification = task.as_dict()["verification"]
    assert [len(a["findings"]) for a in verification["attempts"]] == [1, 1]
    assert verification["findings"] == [{"severity": "style", "title": "name it better"}]
    # Filed with "risk": it first waited for a person's approval (GOVERNANCE §5).
    assert person_reasons(task.id) == ["approval", "review"]


# --- 3. the critic ------------------------------------------------------------------


def test_a_blocking_finding_fails_a_green_gate_and_the_critic_runs_branchless(
    builder, critic, settings, repo
):
    settings.CLAWBOO_MAX_FIX_CYCLES = 0
    notes = critic()
    builder(mode="bad")
    task = store.create_task(
        title="Add feature", labels=["risk"], metadata={"verify_cmd": "test -s feature.txt"}
    ).task
    store.decide_approval(task.id, "approve", by="ada")  # risk waits for a person
    report = Executor("builder").work_once()
    assert report.verdict == "completed_with_debt"
    task = store.get_task(task.id)
    verification = task.as_dict()["verification"]
    assert verification["gate"]["exit_code"] == 0
    assert verification["findings"][0] == {
        "severity": "wrong_algorithm",
        "title": "says meh",
        "body": "feature.txt must say ok",
        "file": "feature.txt",
        "line": 1,
        "confidence": 0.9,
    }
    assert verification["reviewer"] == {"agent": "critic", "runtime": "command", "model": "m-2"}
    run = json.loads(notes.read_text().splitlines()[0])
    assert run["code"] != 0 and run["branch"] == ""  # detached: no branch to push
    # What it reviews, as docs/agents.md says: the two commits of the change.
    # What it reviews (docs/agents.md): the change between the two commits it is
    # given, as the landing counts it -- not the task's bookkeeping files (its
    # handoff, its verification notes), which it was shown as the builder's work.
    assert git(repo, "diff", "--name-only", run["base"], run["head"]).count("feature.txt") == 1
    shown = [line for line in run["prompt"].splitlines() if line.startswith("diff --git")]
    assert shown == ["diff --git a/feature.txt b/feature.txt"]
    assert not Path(run["cwd"]).exists()  # the review checkout is gone
    # What the critic wrote reached neither the task's branch nor the base.
    branch = f"clawboo/task-{task.id}"
    assert "critic-notes.txt" not in git(repo, "ls-tree", "-r", "--name-only", branch)
    assert "critic-notes.txt" not in git(repo, "ls-tree", "-r", "--name-only", "HEAD")
    assert not (Path(task.worktree_ref) / "critic-notes.txt").exists()
    # The critic's run is recorded like any run.
    runs = {(x.agent_id, x.runtime, x.status) for x in store.list_executions(task.id)}
    assert ("critic", "command", "succeeded") in runs


def test_unparseable_critic_output_is_one_non_blocking_finding(builder, critic, settings):
    critic("garbage")
    builder()
    task = store.create_task(
        title="Add feature", labels=["risk"], metadata={"verify_cmd": VERIFY_OK}
    ).task
    store.decide_approval(task.id, "approve", by="ada")  # risk waits for a person
    assert Executor("builder").work_once().verdict == "pass"
    findings = store.get_task(task.id).as_dict()["verification"]["findings"]
    assert len(findings) == 1 and findings[0]["severity"] == "other"
    assert "mostly fine" in findings[0]["body"]


def test_a_change_built_by_the_teams_reviewer_is_not_reviewed_by_itself(builder, settings):
    builder()
    registry.set_reviewer_agent("default", "builder")
    task = store.create_task(
        title="Add feature", labels=["risk"], metadata={"verify_cmd": VERIFY_OK}
    ).task
    store.decide_approval(task.id, "approve", by="ada")  # risk waits for a person
    assert Executor("builder").work_once().verdict == "pass"
    verification = store.get_task(task.id).as_dict()["verification"]
    assert verification["reviewer"] is None
    [finding] = verification["findings"]
    assert finding["severity"] == "other" and finding["title"] == "no independent critic"
    assert "'builder' built this change" in finding["body"]
    assert [x.agent_id for x in store.list_executions(task.id)] == ["builder"]  # no critic run


@pytest.mark.parametrize("stop", ["paused", "unhealthy"])
def test_a_paused_or_unhealthy_reviewer_is_not_run_as_the_critic(builder, critic, stop):
    notes = critic()
    builder()
    if stop == "paused":
        registry.pause_agent("critic", "its reviews cost too much", by="ada")
    else:
        registry.record_health("critic", False, "argv[0] not found")
    task = store.create_task(
        title="Add feature", labels=["risk"], metadata={"verify_cmd": VERIFY_OK}
    ).task
    store.decide_approval(task.id, "approve", by="ada")  # risk waits for a person
    assert Executor("builder").work_once().verdict == "pass"
    assert not notes.exists()  # the stopped reviewer ran nothing
    assert [x.agent_id for x in store.list_executions(task.id)] == ["builder"]
    verification = store.get_task(task.id).as_dict()["verification"]
    assert verification["reviewer"] is None
    [finding] = verification["findings"]
    assert finding["severity"] == "other"
    assert finding["title"] == f"no critic: the team's reviewer is {stop}"


def test_a_reviewer_whose_runs_fail_is_paused_by_its_breaker(builder, settings):
    settings.CLAWBOO_BREAKER_FAILURES = 2
    builder()
    registry.create_agent(
        id="critic",
        display_name="Critic",
        team="default",
        runtime="command",
        settings={"argv": [sys.executable, "-c", "import sys; sys.exit(3)"]},
    )
    registry.set_reviewer_agent("default", "critic")
    titles = []
    for n in range(3):
        task = store.create_task(
            title=f"Add feature {n}", labels=["risk"], metadata={"verify_cmd": VERIFY_OK}
        ).task
        store.decide_approval(task.id, "approve", by="ada")  # risk waits for a person
        Executor("builder").work_once()
        findings = store.get_task(task.id).as_dict()["verification"]["findings"]
        titles.append(findings[0]["title"] if findings else None)
    critic_runs = list(ExecutionProcess.objects.filter(agent_id="critic"))
    assert len(critic_runs) == 2  # the third change met a paused reviewer
    assert registry.get_agent("critic").dispatch_state == "paused"
    assert titles[2] == "no critic: the team's reviewer is paused"


def test_a_small_unlabelled_change_gets_no_critic(builder, critic, settings):
    notes = critic()
    builder()
    task = store.create_task(title="Add feature", metadata={"verify_cmd": VERIFY_OK}).task
    assert Executor("builder").work_once().verdict == "pass"
    assert not notes.exists()
    assert store.get_task(task.id).as_dict()["verification"]["reviewer"] is None


@pytest.mark.parametrize("timeout_s", [None, 0])
def test_a_reviewer_with_no_timeout_s_reviews_within_the_default_as_a_build_does(
    builder, critic, settings, timeout_s
):
    # A build reads an empty timeout_s (null, 0) as the default (run_timeout_of); the
    # critic read null as a crash of the whole judgement (float(None)) and 0 as a
    # review timed out at once.
    settings.CLAWBOO_CRITIC_MIN_LINES = 0
    notes = critic()
    reviewer = registry.get_agent("critic")
    registry.update_agent("critic", {"settings": {**reviewer.settings, "timeout_s": timeout_s}})
    builder()
    task = store.create_task(title="Add feature", metadata={"verify_cmd": VERIFY_OK}).task
    assert Executor("builder").work_once().verdict == "pass"
    assert len(notes.read_text().splitlines()) == 1
    assert store.get_task(task.id).as_dict()["verification"]["reviewer"]["agent"] == "critic"


def test_a_big_change_gets_the_critic(builder, critic, settings):
    settings.CLAWBOO_CRITIC_MIN_LINES = 0  # one line is more than none
    notes = critic()
    builder()
    store.create_task(title="Add feature", metadata={"verify_cmd": VERIFY_OK})
    assert Executor("builder").work_once().verdict == "pass"
    assert notes.exists()


def test_a_change_over_clawboo_critic_min_files_gets_the_critic(builder, critic, settings):
    settings.CLAWBOO_CRITIC_MIN_FILES = 0  # one file is more than none
    notes = critic()
    builder()
    store.create_task(title="Add feature", metadata={"verify_cmd": VERIFY_OK})
    assert Executor("builder").work_once().verdict == "pass"
    assert notes.exists()


# --- 5. review like a pull request ---------------------------------------------------


def test_request_changes_carries_line_comments_to_the_agents_next_run(builder, settings):
    from tests.api.conftest import make_client

    builder()
    task = store.create_task(title="Add feature", metadata={"verify_cmd": VERIFY_OK}).task
    Executor("builder").work_once()
    client = make_client("ada")
    bad = client.post(
        f"/api/board/tasks/{task.id}/request-changes",
        {"comments": [{"file": "feature.txt", "line": 0, "body": "x"}]},
        format="json",
    )
    assert bad.status_code == 400 and bad.json()["field"] == "comments[0].line"
    sent = client.post(
        f"/api/board/tasks/{task.id}/request-changes",
        {
            "feedback": "Nearly.",
            "comments": [{"file": "feature.txt", "line": 1, "body": "say OK, loudly"}],
        },
        format="json",
    )
    assert sent.status_code == 200, sent.content
    assert sent.json()["feedback"] == "Nearly.\nLine comments:\n- feature.txt:1: say OK, loudly"
    worktree = Path(store.get_task(task.id).worktree_ref)
    handoff = json.loads((worktree / "AGENT_HANDOFF.json").read_text())
    assert "feature.txt:1: say OK, loudly" in handoff["brokenOrUnverified"][0]
    again = Executor("builder").work_once()  # the agent's next run
    assert again.task_id == task.id
    assert "- feature.txt:1: say OK, loudly" in (worktree / "TASK.md").read_text()


def test_a_critic_that_cannot_run_leaves_a_finding_not_a_failure(
    builder, critic, settings, monkeypatch
):
    from executor import critic as critic_module
    from worktrees.checkouts import ProvisionFailed

    def broken(repo, sha):
        raise ProvisionFailed("disk full")

    monkeypatch.setattr(critic_module.checkouts, "provision_review_worktree", broken)
    critic()
    builder()
    task = store.create_task(
        title="Add feature", labels=["risk"], metadata={"verify_cmd": VERIFY_OK}
    ).task
    store.decide_approval(task.id, "approve", by="ada")  # risk waits for a person
    assert Executor("builder").work_once().verdict == "pass"
    verification = store.get_task(task.id).as_dict()["verification"]
    assert verification["findings"][0]["title"] == "the critic could not run"
    assert "disk full" in verification["findings"][0]["body"]


# --- any runtime may review (GOVERNANCE §4) ---------------------------------------------


def test_an_openclaw_reviewer_reviews_over_the_gateway(builder, gateway_fake, settings):
    settings.CLAWBOO_MAX_FIX_CYCLES = 0
    gateway_fake.reply_text = json.dumps(
        {"findings": [{"severity": "security", "title": "leaks the token"}]}
    )
    registry.create_agent(id="claw", display_name="Claw", team="default", runtime="openclaw")
    registry.set_reviewer_agent("default", "claw")
    builder()
    task = store.create_task(
        title="Add feature", labels=["risk"], metadata={"verify_cmd": VERIFY_OK}
    ).task
    store.decide_approval(task.id, "approve", by="ada")
    report = Executor("builder").work_once()
    verification = store.get_task(task.id).as_dict()["verification"]
    assert verification["reviewer"]["runtime"] == "openclaw"
    assert verification["findings"][0]["title"] == "leaks the token"
    assert report.verdict == "completed_with_debt"  # a blocking finding, no fix rounds
    # The review went to the gateway with the change in its prompt.
    sent = [r for r in gateway_fake.requests if r.get("method") == "agent"]
    assert sent and "feature.txt" in sent[0]["params"]["message"]
    runs = {(x.agent_id, x.runtime) for x in store.list_executions(task.id)}
    assert ("claw", "openclaw") in runs


def test_a_person_cannot_be_named_the_teams_critic(db):
    from core.errors import ValidationFailed

    registry.create_agent(id="hal", display_name="Hal", team="default", runtime="human")
    with pytest.raises(ValidationFailed) as refused:
        registry.set_reviewer_agent("default", "hal")
    assert refused.value.field == "reviewer_agent" and "person" in refused.value.detail

"""The merge queue (issue 43): approvals stack, one gate run judges the stack, a red
stack is bisected to its culprit, conflicts go back to their builder, and every
commit the base reaches passes the gate."""

from __future__ import annotations

from pathlib import Path

import pytest

from board import store
from executor import merge_queue
from tests.fixtures.gitrepos import git
from tests.worktrees.queue_fixtures import Harness
from worktrees import queue, service

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_approval_in_a_queue_repository_is_queued_and_stays_in_review(queue_harness):
    first = queue_harness.in_review("One", {"one.txt": "1\n"})
    second = queue_harness.in_review("Two", {"two.txt": "2\n"})
    assert service.approve(first, by="reviewer")["result"] == "queued"
    answer = service.approve(second, by="reviewer")
    assert (answer["result"], answer["position"]) == ("queued", 2)
    assert answer["task"].status == "in_review"
    # Approving again answers its place, it does not queue twice.
    assert service.approve(second, by="reviewer")["position"] == 2
    assert queue_harness.kicks == [str(queue_harness.repo)] * 2
    report = merge_queue.drain(str(queue_harness.repo))
    assert report["landed"] == [first, second] and report["gate_runs"] == 1
    assert store.get_task(first).status == store.get_task(second).status == "done"
    assert queue_harness.landed_ids() == [second, first]  # newest first


def test_ten_approvals_with_a_semantic_conflict_keep_every_base_commit_green(
    queue_harness: Harness, tmp_path: Path
):
    start = git(queue_harness.repo, "rev-parse", "main")
    ids = []
    for n in range(10):
        files = {f"t{n}.txt": f"{n}\n"}
        if n == 2:
            files["a.flag"] = "a\n"  # green alone
        if n == 6:
            files["b.flag"] = "b\n"  # green alone, red with a.flag
        ids.append(queue_harness.in_review(f"Task {n}", files))
    for task_id in ids:
        assert service.approve(task_id, by="reviewer")["result"] == "queued"

    report = merge_queue.drain(str(queue_harness.repo))
    culprit = ids[6]
    assert report["returned"] == [culprit]
    assert sorted(report["landed"]) == sorted(ids[:6] + ids[7:])
    task = store.get_task(culprit)
    assert task.status == "in_progress" and task.assignee_agent_id == "builder"
    assert "exited 1" in task.feedback and "How to fix" in task.feedback

    # The builder's fix round; it re-enters the line on a person's approval of it.
    def fix(path: Path) -> None:
        (path / "b.flag").unlink()
        (path / "b.txt").write_text("b, without the flag\n")

    queue_harness.fix_round(culprit, fix)
    assert queue.live_entry(culprit).state == "returned"
    assert service.approve(culprit, by="reviewer")["result"] == "queued"
    assert queue.live_entry(culprit).state == "queued"
    assert merge_queue.drain(str(queue_harness.repo))["landed"] == [culprit]
    assert all(store.get_task(t).status == "done" for t in ids)
    assert sorted(queue_harness.landed_ids()) == sorted(ids)  # each exactly once

    runs = queue_harness.gate_runs()
    assert runs < 10, runs
    history = queue_harness.base_history(start)
    assert len(history) == 10
    assert all(queue_harness.passes_at(c, tmp_path / "check") for c in history)


def test_the_queue_gates_each_change_with_its_tasks_own_verify_and_install_commands(
    queue_harness: Harness,
):
    # The repository's gate passes all three; each task's own (its judge's) decides.
    own = queue_harness.in_review(
        "Own", {"a.txt": "a\n"}, metadata={"verify_cmd": "grep -qx a a.txt"}
    )
    installs = queue_harness.in_review(
        "Installs",
        {"b.txt": "b\n"},
        metadata={"install_cmd": "echo built > built.txt", "verify_cmd": "test -e built.txt"},
    )
    red = queue_harness.in_review(
        "Red", {"c.txt": "c\n"}, metadata={"verify_cmd": "test -e nowhere.txt"}
    )
    for task_id in (own, installs, red):
        service.approve(task_id, by="reviewer")

    report = merge_queue.drain(str(queue_harness.repo))

    assert report["landed"] == [own, installs] and report["returned"] == [red]
    task = store.get_task(red)
    assert task.status == "in_progress"
    assert "`test -e nowhere.txt` exited 1" in task.feedback
    assert queue_harness.landed_ids() == [installs, own]


def test_two_tasks_editing_one_line_the_second_goes_back_and_lands_after_its_round(
    queue_harness: Harness,
):
    first = queue_harness.in_review("First", {"file0.txt": "first\n"})
    second = queue_harness.in_review("Second", {"file0.txt": "second\n"})
    service.approve(first, by="reviewer")
    service.approve(second, by="reviewer")
    report = merge_queue.drain(str(queue_harness.repo))
    assert report["landed"] == [first] and report["returned"] == [second]
    task = store.get_task(second)
    assert task.status == "in_progress" and "file0.txt" in task.feedback
    assert store.get_workspace(second).landing["conflicts"] == ["file0.txt"]

    def rebase(path: Path) -> None:
        merged = __import__("subprocess").run(
            ["git", "merge", "-q", "main"], cwd=path, capture_output=True
        )
        assert merged.returncode != 0  # the conflict, as the builder meets it
        (path / "file0.txt").write_text("first\nsecond\n")
        git(path, "add", "file0.txt")
        git(path, "commit", "-qm", "merge main")

    queue_harness.fix_round(second, rebase)
    assert service.approve(second, by="reviewer")["result"] == "queued"
    assert merge_queue.drain(str(queue_harness.repo))["landed"] == [second]
    assert git(queue_harness.repo, "show", "main:file0.txt") == "first\nsecond"
    assert store.get_task(second).status == "done"


def test_people_approve_into_the_queue_over_rest_and_see_it_on_the_board(
    queue_harness, client, django_user_model
):
    from tests.api.conftest import make_client

    person = make_client("reviewer")
    first = queue_harness.in_review("One", {"one.txt": "1\n"})
    second = queue_harness.in_review("Two", {"two.txt": "2\n"})
    assert (
        person.post(f"/api/board/tasks/{first}/approve", {}, format="json").json()["result"]
        == "queued"
    )
    answer = person.post(f"/api/board/tasks/{second}/approve", {}, format="json")
    assert answer.status_code == 200, answer.content
    assert (answer.json()["result"], answer.json()["position"]) == ("queued", 2)
    assert answer.json()["task"]["status"] == "in_review"

    [shown] = person.get("/api/board/merge-queue?team=default").json()
    assert shown["repository"] == "app" and shown["length"] == 2
    assert [(e["task_id"], e["position"]) for e in shown["entries"]] == [(first, 1), (second, 2)]
    assert shown["running"] is None and shown["last_bisect"] is None
    client.force_login(django_user_model.objects.create_user("op", is_staff=True))
    staff = client
    series = f'repo_path="{queue_harness.repo}"'
    assert f"clawboo_merge_queue_length{{{series}}} 2.0" in staff.get("/metrics").content.decode()

    merge_queue.drain(str(queue_harness.repo))
    [after] = person.get("/api/board/merge-queue").json()
    assert after["length"] == 0 and after["entries"] == []
    scraped = staff.get("/metrics").content.decode()
    assert f"clawboo_merge_queue_time_to_land_seconds_count{{{series}}} 2.0" in scraped
    assert f"clawboo_merge_queue_gate_runs_total{{{series}}} 1.0" in scraped


def test_one_repositorys_queue_over_rest_names_its_batches_and_line_and_hides_other_teams(
    queue_harness,
):
    from core import registry
    from core.models import Repository
    from tests.api.conftest import make_client

    person = make_client("reviewer")
    registry.create_team("red", "Red")
    eve = make_client("eve", teams=("red",))
    # Staff may register one checkout for two teams: one line, each told of its own.
    Repository.objects.create(
        id="red-app", team_id="red", path=str(queue_harness.repo), landing_mode="queue"
    )
    first = queue_harness.in_review("One", {"one.txt": "1\n"})
    second = queue_harness.in_review("Two", {"two.txt": "2\n"})
    for task_id in (first, second):
        person.post(f"/api/board/tasks/{task_id}/approve", {}, format="json")

    mine = person.get("/api/repositories/app/queue")
    assert mine.status_code == 200, mine.content
    assert mine.json()["queued"] == [
        {"task": first, "position": 1},
        {"task": second, "position": 2},
    ]
    assert mine.json()["batches"] == []
    missing = eve.get("/api/repositories/app/queue")
    assert missing.status_code == 404 and missing.json()["error"] == "not_found"
    theirs = eve.get("/api/repositories/red-app/queue").json()
    assert (theirs["queued"], theirs["entries"], theirs["length"]) == ([], [], 2)
    [board] = eve.get("/api/board/merge-queue").json()
    assert board["repository"] == "red-app" and board["entries"] == []

    merge_queue.drain(str(queue_harness.repo))
    [batch] = person.get("/api/repositories/app/queue").json()["batches"]
    assert batch["tasks"] == [first, second] and batch["state"] == "landed"
    [told] = eve.get("/api/repositories/red-app/queue").json()["batches"]
    assert told["tasks"] == [] and told["culprits"] == []
    assert first not in str(eve.get("/api/board/merge-queue").json())


def test_an_agent_may_not_approve_into_the_queue(queue_harness):
    from django.contrib.auth import get_user_model
    from rest_framework.test import APIClient

    from core import machines
    from core.models import AgentToken

    task_id = queue_harness.in_review("One", {"one.txt": "1\n"})
    owner = get_user_model().objects.create_user("owner")
    key = AgentToken.objects.create(key=machines.new_key(), agent_id="builder", user=owner).key
    agent = APIClient()
    agent.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    refused = agent.post(f"/api/board/tasks/{task_id}/approve", {}, format="json")
    assert refused.status_code == 403 and refused.json()["error"] == "person_required"
    assert queue.live_entry(task_id) is None
    assert store.get_task(task_id).status == "in_review"


def test_the_minutely_schedule_finishes_a_batch_killed_after_the_base_moved(
    queue_harness, monkeypatch
):
    """Deterministic: the job dies after the base moved and before any task was
    recorded; the periodic job (a q2 schedule row) finishes it, each task once."""
    from django_q.models import Schedule
    from django_q.tasks import async_task

    from ops import periodic
    from worktrees.models import MergeBatch

    ids = [queue_harness.in_review(f"T{n}", {f"t{n}.txt": f"{n}\n"}) for n in range(3)]
    for task_id in ids:
        service.approve(task_id, by="reviewer")

    class Killed(BaseException):
        pass

    def die(*args, **kwargs):
        raise Killed

    monkeypatch.setattr(merge_queue, "_land_entry", die)
    with pytest.raises(Killed):
        merge_queue.drain(str(queue_harness.repo))
    [batch] = MergeBatch.objects.all()
    assert batch.state == "advancing"
    assert git(queue_harness.repo, "rev-parse", "main") == batch.target  # the base moved
    assert all(store.get_task(t).status == "in_review" for t in ids)
    monkeypatch.undo()
    monkeypatch.setattr(queue, "kick", queue_harness.kicks.append)

    periodic.register()
    job = Schedule.objects.get(name="clawboo.merge-queue")
    async_task(job.func, sync=True)
    assert all(store.get_task(t).status == "done" for t in ids)
    assert sorted(queue_harness.landed_ids()) == sorted(ids)
    assert MergeBatch.objects.get().state == "landed"
    assert queue_harness.gate_runs() == 1  # the gate's decision stood; it did not run again


def test_a_batch_killed_while_gating_is_abandoned_and_its_tasks_land_in_the_next(
    queue_harness, monkeypatch
):
    from worktrees.models import MergeBatch

    ids = [queue_harness.in_review(f"T{n}", {f"t{n}.txt": f"{n}\n"}) for n in range(2)]
    for task_id in ids:
        service.approve(task_id, by="reviewer")
    before = git(queue_harness.repo, "rev-parse", "main")

    class Killed(BaseException):
        pass

    def die(*args, **kwargs):
        raise Killed

    monkeypatch.setattr(merge_queue.verification, "run_gate", die)
    with pytest.raises(Killed):
        merge_queue.drain(str(queue_harness.repo))
    assert MergeBatch.objects.get().state == "gating"
    assert git(queue_harness.repo, "rev-parse", "main") == before
    monkeypatch.undo()
    monkeypatch.setattr(queue, "kick", queue_harness.kicks.append)

    report = merge_queue.drain(str(queue_harness.repo))
    assert report["recovered"] == 1 and report["landed"] == ids
    assert sorted(MergeBatch.objects.values_list("state", flat=True)) == ["abandoned", "landed"]


def test_a_stack_whose_gate_dies_every_time_is_blocked_after_three_batches_not_re_gated_for_ever(
    queue_harness, monkeypatch
):
    # The minutely drain abandons a batch that died while gating and stacks the same
    # approvals again: one whose gate dies the same way every time (a gate that kills
    # its worker, a bug) re-ran it every minute for ever, nobody told.
    ids = [queue_harness.in_review(f"T{n}", {f"t{n}.txt": f"{n}\n"}) for n in range(2)]
    for task_id in ids:
        service.approve(task_id, by="reviewer")
    before = git(queue_harness.repo, "rev-parse", "main")
    gates: list[str] = []

    def dies(*args, **kwargs):
        gates.append("gate")
        raise RuntimeError("the gate took its worker down")

    monkeypatch.setattr(merge_queue.verification, "run_gate", dies)
    for _ in range(6):
        merge_queue.drain_all()
    assert [store.get_task(t).status for t in ids] == ["blocked", "blocked"]
    assert len(gates) == 3
    for task_id in ids:
        assert "died 3 times" in store.get_task(task_id).feedback
        assert queue.live_entry(task_id) is None
    assert git(queue_harness.repo, "rev-parse", "main") == before


def test_with_one_rebase_round_a_task_still_conflicting_after_it_goes_to_a_person(
    queue_harness: Harness, settings
):
    settings.CLAWBOO_MAX_REBASE_ROUNDS = 1
    first = queue_harness.in_review("First", {"file0.txt": "first\n"})
    second = queue_harness.in_review("Second", {"file0.txt": "second\n"})
    service.approve(first, by="reviewer")
    service.approve(second, by="reviewer")
    report = merge_queue.drain(str(queue_harness.repo))
    assert report["landed"] == [first] and report["returned"] == [second]

    # Its one rebase round does not bring the branch up to date: still a conflict.
    queue_harness.fix_round(second, lambda path: (path / "notes.txt").write_text("tried\n"))
    service.approve(second, by="reviewer")
    report = merge_queue.drain(str(queue_harness.repo))
    assert report["blocked"] == [second] and report["landed"] == []
    task = store.get_task(second)
    assert task.status == "blocked" and "a person decides" in task.feedback
    assert "file0.txt" in task.feedback
    assert queue.live_entry(second) is None
    assert git(queue_harness.repo, "show", "main:file0.txt") == "first"


def test_a_repository_whose_on_conflict_is_block_parks_a_queued_conflict_for_a_person(
    queue_harness: Harness,
):
    # clawboo.onConflict block (or CLAWBOO_LANDING_ON_CONFLICT=block) parks a change
    # that no longer applies for a person; the queue used to send it back to its
    # builder for rebase rounds whatever the repository said, as direct landing never does.
    git(queue_harness.repo, "config", "clawboo.onConflict", "block")
    first = queue_harness.in_review("First", {"file0.txt": "first\n"})
    second = queue_harness.in_review("Second", {"file0.txt": "second\n"})
    service.approve(first, by="reviewer")
    service.approve(second, by="reviewer")
    report = merge_queue.drain(str(queue_harness.repo))
    assert report["landed"] == [first] and report["blocked"] == [second]
    assert report["returned"] == []
    task = store.get_task(second)
    assert task.status == "blocked" and "file0.txt" in task.feedback
    assert "on-conflict policy is block" in task.feedback
    assert queue.live_entry(second) is None


def test_a_culprit_whose_rounds_are_spent_is_blocked_for_a_person(queue_harness, settings):
    settings.CLAWBOO_MAX_FIX_CYCLES = 0
    first = queue_harness.in_review("A", {"a.flag": "a\n"})
    second = queue_harness.in_review("B", {"b.flag": "b\n"})
    service.approve(first, by="reviewer")
    service.approve(second, by="reviewer")
    report = merge_queue.drain(str(queue_harness.repo))
    assert report["landed"] == [first] and report["blocked"] == [second]
    task = store.get_task(second)
    assert task.status == "blocked" and "a person decides" in task.feedback
    assert queue.live_entry(second) is None


def test_operators_read_the_queue_in_the_admin_and_change_nothing_there(
    queue_harness, client, django_user_model
):
    task_id = queue_harness.in_review("One", {"one.txt": "1\n"})
    service.approve(task_id, by="reviewer")
    merge_queue.drain(str(queue_harness.repo))
    staff = django_user_model.objects.create_superuser("op", "op@example.com", "pw")
    client.force_login(staff)
    entries = client.get("/admin/worktrees/queuedlanding/")
    assert entries.status_code == 200 and task_id in entries.content.decode()
    assert client.get("/admin/worktrees/mergebatch/").status_code == 200
    assert client.get("/admin/worktrees/queuedlanding/add/").status_code == 403


def test_manage_py_merge_queue_takes_the_repositorys_id_and_refuses_an_unknown_one(
    queue_harness, capsys
):
    import json

    from django.core.management import CommandError, call_command

    task_id = queue_harness.in_review("One", {"one.txt": "1\n"})
    service.approve(task_id, by="ada")
    with pytest.raises(CommandError, match="no registered repository 'nope'"):
        call_command("merge_queue", "--repo", "nope")
    assert store.get_task(task_id).status == "in_review"

    call_command("merge_queue", "--repo", "app")  # the id, as the API names it

    assert json.loads(capsys.readouterr().out)["landed"] == [task_id]
    assert store.get_task(task_id).status == "done"


def test_work_a_person_sent_back_after_approving_it_does_not_land_on_the_old_approval(
    queue_harness,
):
    # Approved into the line, then sent back by a person before the queue ran; the
    # builder's new work reaches review again. Nobody approved that work: it waits.
    task_id = queue_harness.in_review("One", {"one.txt": "1\n"})
    base = git(queue_harness.repo, "rev-parse", "main")
    assert service.approve(task_id, by="ada")["result"] == "queued"
    store.request_changes(task_id, "not like that", by="ada")
    queue_harness.fix_round(task_id, lambda p: (p / "one.txt").write_text("unreviewed\n"))
    assert store.get_task(task_id).status == "in_review"

    merge_queue.drain(str(queue_harness.repo))

    assert git(queue_harness.repo, "rev-parse", "main") == base
    assert store.get_task(task_id).status == "in_review"
    assert queue.live_entry(task_id) is None
    # Approving the new work puts it in line, and it lands.
    again = service.approve(task_id, by="ada")
    assert (again["result"], again["position"]) == ("queued", 1)
    merge_queue.drain(str(queue_harness.repo))
    assert store.get_task(task_id).status == "done"


def test_a_batch_reaches_the_remote_before_its_tasks_are_done(
    queue_harness: Harness, tmp_path: Path, monkeypatch
):
    # Done frees a task's dependents, and a remote worker taking one clones the
    # remote: the batch's base must be there first.
    from core import repositories

    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(queue_harness.repo), str(remote))
    repositories.update("app", {"remote": str(remote)})
    task_id = queue_harness.in_review("One", {"one.txt": "1\n"})
    assert service.approve(task_id, by="reviewer")["result"] == "queued"
    seen: list[str] = []
    finish = store.finish_landing

    def finish_and_look(*args, **kwargs):
        seen.append(git(remote, "rev-parse", "main"))
        return finish(*args, **kwargs)

    monkeypatch.setattr(store, "finish_landing", finish_and_look)
    assert merge_queue.drain(str(queue_harness.repo))["landed"] == [task_id]
    assert seen == [git(queue_harness.repo, "rev-parse", "main")]


def test_what_a_fix_round_hands_back_lands_only_on_a_persons_approval(queue_harness: Harness):
    # GOVERNANCE §6: landing is a person's. The queue sent an approved task back to its
    # builder (a red gate stacked on the work ahead); the round may change anything --
    # here it slips in a file nobody reviewed -- and re-entered the line by itself.
    first = queue_harness.in_review("First", {"a.flag": "a\n"})
    second = queue_harness.in_review("Second", {"b.flag": "b\n"})  # red with a.flag
    service.approve(first, by="reviewer")
    service.approve(second, by="reviewer")
    assert merge_queue.drain(str(queue_harness.repo))["returned"] == [second]
    base = git(queue_harness.repo, "rev-parse", "main")

    def fix(path: Path) -> None:
        (path / "b.flag").unlink()
        (path / "b.txt").write_text("b\n")
        (path / "unreviewed.txt").write_text("slipped in\n")

    queue_harness.fix_round(second, fix)
    report = merge_queue.drain(str(queue_harness.repo))

    assert report["landed"] == []
    assert git(queue_harness.repo, "rev-parse", "main") == base
    assert store.get_task(second).status == "in_review"
    entry = queue.live_entry(second)
    assert entry is not None and (entry.state, entry.rounds) == ("returned", 1)
    # A person who has seen the new work approves it: it lands, its round counted.
    assert service.approve(second, by="ada")["result"] == "queued"
    assert queue.live_entry(second).rounds == 1
    assert merge_queue.drain(str(queue_harness.repo))["landed"] == [second]
    assert store.get_task(second).status == "done"


def test_the_queue_lands_each_task_as_its_own_teams_repository_row_says(queue_harness):
    # Two teams may register one checkout with different landing strategies: a
    # queued task lands as its own team's row says (here: the default, squash), never
    # as another team's row for the same path says (merge).
    from core import registry
    from core.models import Repository

    registry.create_team("red", "Red")
    Repository.objects.create(
        id="aaa-red", team_id="red", path=str(queue_harness.repo), landing="merge"
    )
    task = queue_harness.in_review("One", {"one.txt": "1\n"})
    assert service.approve(task, by="reviewer")["result"] == "queued"
    assert merge_queue.drain(str(queue_harness.repo))["landed"] == [task]
    parents = git(queue_harness.repo, "rev-list", "--parents", "-n", "1", "main").split()
    assert len(parents) == 2  # the tip and its one parent: squashed, not a merge commit

"""Dependencies (issue 3): cycle refusal (also raced by two processes), the ready
order and the cascade-cancel over a 6-node DAG."""

from __future__ import annotations

import pytest

from board import store
from board.errors import DependencyCycle
from board.models import TaskDep
from tests.board.states import task_in


def ids(tasks) -> list[str]:
    return [t.id for t in tasks]


@pytest.mark.django_db
def test_a_direct_cycle_and_a_self_edge_are_refused(default_team):
    a = store.create_task(title="a", id="a").task
    b = store.create_task(title="b", id="b").task
    assert store.link(a.id, b.id) is True
    assert store.link(a.id, b.id) is False  # conflict-tolerant: relinking is harmless
    with pytest.raises(DependencyCycle):
        store.link(b.id, a.id)
    with pytest.raises(DependencyCycle):
        store.link(a.id, a.id)
    assert list(TaskDep.objects.values_list("task_id", "depends_on_id")) == [("a", "b")]


@pytest.mark.django_db
def test_a_transitive_cycle_is_refused(default_team):
    for name in "abcd":
        store.create_task(title=name, id=name)
    store.link("a", "b")
    store.link("b", "c")
    store.link("c", "d")
    revision = store.get_task("d").revision
    with pytest.raises(DependencyCycle):
        store.link("d", "a")
    assert TaskDep.objects.count() == 3
    assert store.get_task("d").revision == revision
    store.unlink("b", "c")
    assert store.link("d", "a") is True  # the chain is broken, so no cycle any more


@pytest.mark.django_db(transaction=True)
def test_two_processes_linking_a_to_b_and_b_to_a_leave_at_most_one_edge(default_team, race):
    pairs = [(f"a{i}", f"b{i}") for i in range(3)]
    argvs = []
    for a, b in pairs:
        store.create_task(title=a, id=a)
        store.create_task(title=b, id=b)
        argvs += [["link", a, b], ["link", b, a]]

    results = race(argvs)

    for i, (a, b) in enumerate(pairs):
        edges = TaskDep.objects.filter(task_id__in=[a, b]).count()
        assert edges == 1, f"pair {i}: {edges} edges"
        forward, backward = results[2 * i], results[2 * i + 1]
        assert sorted([forward["ok"], backward["ok"]]) == [False, True]
        loser = forward if not forward["ok"] else backward
        assert loser["code"] == "cycle"


def six_node_dag() -> dict[str, str]:
    """a, b → c → d, e → f  (x → y: y depends on x)."""
    made = {}
    for name, priority in [("a", 1), ("b", 5), ("c", 0), ("d", 0), ("e", 3), ("f", 0)]:
        made[name] = store.create_task(title=name, id=name, priority=priority).task.id
    for task, dep in [("c", "a"), ("c", "b"), ("d", "c"), ("e", "c"), ("f", "d"), ("f", "e")]:
        store.link(task, dep)
    return made


def finish(task_id: str) -> None:
    result = store.claim(task_id, "ada")
    assert result.ok
    assert store.complete(task_id, ticket=result.ticket).recorded


@pytest.mark.django_db
def test_ready_order_follows_the_dag_then_priority_then_recency(default_team):
    six_node_dag()
    assert ids(store.ready_tasks()) == ["b", "a"]  # priority desc
    assert store.claim("c", "ada").outcome == "conflict"  # unmet deps refuse the claim
    finish("a")
    assert ids(store.ready_tasks()) == ["b"]
    finish("b")
    assert ids(store.ready_tasks()) == ["c"]
    finish("c")
    assert ids(store.ready_tasks()) == ["e", "d"]
    store.set_priority("d", 3)
    assert ids(store.ready_tasks()) == ["e", "d"]  # tie on priority: newest first
    assert store.claim_next("bob").task.id == "d"  # claim-next (fifo): oldest first
    assert store.claim_next("bob", dispatcher="priority").task.id == "e"
    assert store.claim_next("bob") is None  # f still waits on d and e


@pytest.mark.django_db
def test_a_hard_fail_cancels_only_the_pending_transitive_dependents(default_team):
    six_node_dag()
    finish("a")
    finish("b")
    # e is already being worked on; g (backlog) waits on f; h is done already.
    store.create_task(title="g", id="g", status="backlog")
    store.link("g", "f")
    held = store.claim("c", "ada")
    verdict = store.fail("c", "compiler exploded", ticket=held.ticket)
    assert verdict.recorded

    c = store.get_task("c")
    assert (c.status, c.error) == ("blocked", "compiler exploded")
    cancelled = {t: store.get_task(t).status for t in "defg"}
    assert cancelled == {"d": "cancelled", "e": "cancelled", "f": "cancelled", "g": "cancelled"}
    assert store.get_task("a").status == "done"


@pytest.mark.django_db
def test_cancel_dependents_leaves_in_progress_done_and_cancelled_alone(default_team):
    six_node_dag()
    finish("a")
    finish("b")
    finish("c")
    in_progress = store.claim("d", "ada")
    assert in_progress.ok
    done_x, _ = task_in("done", id="x")
    store.link("x", "f")  # linking to a done task is bookkeeping, it still counts
    gone, _ = task_in("cancelled", id="y")
    store.link("y", "f")

    cancelled = store.cancel_dependents("c")

    assert ids(cancelled) == ["e", "f"]
    assert store.get_task("d").status == "in_progress"
    assert store.get_task("x").status == "done"
    assert store.get_task("y").status == "cancelled"
    assert all(t.status == "cancelled" for t in cancelled)


@pytest.mark.django_db
def test_the_unmet_dependency_counter_always_matches_the_graph(default_team):
    """ready = todo and unmet_deps == 0; the counter must equal the graph's truth
    after every kind of write that touches it."""
    from django.db.models import Count, Q

    from board.models import Task

    def assert_consistent() -> None:
        truth = dict(
            Task.objects.annotate(
                n=Count("dep_links", filter=~Q(dep_links__depends_on__status="done"))
            ).values_list("id", "n")
        )
        assert dict(Task.objects.values_list("id", "unmet_deps")) == truth

    a = store.create_task(title="a").task
    b = store.create_task(title="b", depends_on=[a.id]).task
    c = store.create_task(title="c").task
    d = store.create_task(title="d", depends_on=[a.id, b.id]).task
    assert_consistent()
    store.link(c.id, a.id)
    store.link(d.id, c.id)
    store.link(d.id, c.id)  # a repeat link changes nothing
    assert_consistent()
    store.unlink(d.id, b.id)
    assert_consistent()
    got = store.claim(a.id, "ada")
    store.complete(a.id, ticket=got.ticket)
    assert_consistent()
    store.link(b.id, a.id)  # linking to an already-done task adds no wait
    assert_consistent()
    store.transition(c.id, "cancelled")
    assert_consistent()
    assert {t.id for t in store.ready_tasks()} == {b.id}


@pytest.mark.django_db(transaction=True)
def test_a_dependency_finishing_while_its_dependent_is_created_still_frees_it(
    default_team, database_url
):
    """The dependent's counter either sees the dependency done or is decremented by
    its completion, whichever commits first -- never neither (a chain stuck for good)."""
    import threading
    import time

    import psycopg
    from django.db import connection, connections

    if connection.vendor != "postgresql":
        pytest.skip("SQLite runs one write transaction at a time")
    store.create_task(title="first", id="first")
    held = store.claim("first", "ada")
    created: dict[str, str] = {}

    def in_thread(fn):
        def run() -> None:
            try:
                fn()
            finally:
                connections.close_all()

        thread = threading.Thread(target=run)
        thread.start()
        return thread

    def waiting_on_locks(db: psycopg.Connection) -> int:
        row = db.execute(
            "SELECT COUNT(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchone()
        return row[0] if row else 0

    def until(predicate) -> None:
        deadline = time.monotonic() + 20
        while not predicate():
            assert time.monotonic() < deadline, "the writers never reached their locks"
            time.sleep(0.01)

    with (
        psycopg.connect(database_url, autocommit=True) as watcher,
        psycopg.connect(database_url) as gate,
    ):
        # Hold the team's event counter, so each writer stops at its event, mid-transaction.
        gate.execute("SELECT 1 FROM teams WHERE id = 'default' FOR UPDATE")
        finishing = in_thread(lambda: store.complete("first", ticket=held.ticket))
        until(lambda: waiting_on_locks(watcher) == 1)
        creating = in_thread(
            lambda: created.update(
                id=store.create_task(title="second", depends_on=["first"]).task.id
            )
        )
        until(lambda: waiting_on_locks(watcher) == 2)
        gate.commit()
        finishing.join(timeout=30)
        creating.join(timeout=30)

    second = store.get_task(created["id"])
    assert store.get_task("first").status == "done"
    assert second.unmet_deps == 0
    assert store.claim_next("bob").task.id == second.id

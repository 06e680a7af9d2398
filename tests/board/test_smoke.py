import pytest

from board import store


@pytest.mark.django_db
def test_it_creates_claims_and_completes_a_task():
    task = store.create_task(title="Fix login").task
    assert task.status == "todo"
    result = store.claim(task.id, "ada", "command")
    assert result.outcome == "ok"
    assert result.task.status == "in_progress"
    assert result.task.attempts == 1
    assert store.claim(task.id, "bob").outcome == "conflict"
    assert store.claim("nope", "bob").outcome == "not_found"
    out = store.complete(task.id, {"ok": True}, ticket=result.ticket)
    assert out.outcome == "recorded"
    assert store.get_task(task.id).status == "done"


@pytest.mark.django_db
def test_claim_next_takes_the_oldest_ready_task():
    a = store.create_task(title="a").task
    b = store.create_task(title="b", depends_on=[a.id]).task
    got = store.claim_next("ada")
    assert got.task.id == a.id
    assert store.claim_next("bob") is None
    store.complete(a.id, ticket=got.ticket)
    assert store.claim_next("bob").task.id == b.id

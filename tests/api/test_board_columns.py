"""What the board page reads per column: pages of one status in the column's order,
filtered as the page's URL says, and every column's count in one request."""

from __future__ import annotations

import pytest

from board import judgement, store
from core import registry

pytestmark = pytest.mark.django_db


def ids(page: dict) -> list[str]:
    return [t["id"] for t in page["results"]]


def finish(task_id: str) -> None:
    store.transition(task_id, "cancelled")


def test_a_terminal_column_pages_most_recently_changed_first(api):
    tasks = [store.create_task(title=f"t{i}").task for i in range(5)]
    # Cancelled in an order unlike their creation: the column shows the newest move first.
    for task in (tasks[2], tasks[0], tasks[4], tasks[1], tasks[3]):
        finish(task.id)
    first = api.get("/api/board/tasks?status=cancelled&order=recent&limit=2").json()
    assert ids(first) == [tasks[3].id, tasks[1].id]
    second = api.get(first["next"]).json()
    assert ids(second) == [tasks[4].id, tasks[0].id]
    third = api.get(second["next"]).json()
    assert ids(third) == [tasks[2].id] and third["next"] is None


def test_a_card_that_changes_while_paging_is_not_shown_twice(api):
    tasks = [store.create_task(title=f"t{i}").task for i in range(4)]
    for task in tasks:
        finish(task.id)
    first = api.get("/api/board/tasks?status=cancelled&order=recent&limit=2").json()
    store.set_labels(tasks[0].id, ["late"])  # now the newest: it would lead page one
    rest = api.get(first["next"]).json()
    assert ids(first) + ids(rest) == [t.id for t in reversed(tasks)][:2] + [tasks[1].id]


def test_the_list_filters_by_verdict_text_and_dropped(api):
    passed = store.create_task(title="Ship the parser", labels=["ui"]).task
    store.set_verdict(passed.id, "pass")
    failed = store.create_task(title="Fix the lexer", description="the PARSER breaks").task
    store.set_verdict(failed.id, "fail", "3 tests failed")
    plain = store.create_task(title="Write docs").task
    gone = store.create_task(title="Old parser idea").task
    store.drop_task(gone.id)

    def listed(query: str) -> set[str]:
        response = api.get(f"/api/board/tasks?{query}")
        assert response.status_code == 200, response.json()
        return set(ids(response.json()))

    assert listed("verdict=pass") == {passed.id}
    assert listed("verdict=fail") == {failed.id}
    assert listed("verdict=none") == {plain.id, gone.id}
    assert listed("q=parser") == {passed.id, failed.id, gone.id}  # title or description
    assert listed("q=parser&dropped=false") == {passed.id, failed.id}
    assert listed(f"q={plain.id}") == {plain.id}  # the exact id
    assert listed("q=parser&label=ui") == {passed.id}


def test_failed_lists_what_a_verify_command_turned_down_not_what_nothing_verified(api):
    red = store.create_task(title="Red").task
    store.set_verdict(red.id, "fail", "3 tests failed")
    unchecked = store.create_task(title="Unchecked").task
    store.set_verdict(unchecked.id, "fail", judgement.NONE_CONFIGURED)
    store.create_task(title="Fresh")

    def listed(verdict: str) -> list[str]:
        response = api.get(f"/api/board/tasks?verdict={verdict}")
        assert response.status_code == 200, response.json()
        return ids(response.json())

    assert listed("fail") == [red.id]
    assert listed("unconfigured") == [unchecked.id]
    counted = api.get("/api/board/counts?team=default&verdict=fail").json()
    assert counted["counts"]["todo"] == 1


def test_counts_name_every_status_with_the_lists_filters(api):
    for title in ("a", "b", "c"):
        store.create_task(title=title, labels=["ui"])
    store.create_task(title="d", status="backlog")
    done = store.create_task(title="e", labels=["ui"]).task
    finish(done.id)
    body = api.get("/api/board/counts?team=default").json()
    assert body == {
        "team": "default",
        "counts": {
            "needs_approval": 0,
            "backlog": 1,
            "todo": 3,
            "in_progress": 0,
            "in_review": 0,
            "blocked": 0,
            "done": 0,
            "cancelled": 1,
        },
        "total": 5,
    }
    labelled = api.get("/api/board/counts?team=default&label=ui&q=a").json()
    assert labelled["counts"]["todo"] == 1 and labelled["total"] == 1


def test_counts_of_a_team_you_cannot_see_are_zero(api):
    registry.create_team("red", "Red")
    store.create_task(title="secret", team="red")
    body = api.get("/api/board/counts?team=red").json()
    assert body["total"] == 0
    assert api.get("/api/board/counts").json()["total"] == 0  # every team you see


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("order=oldest", "order"),
        ("verdict=maybe", "verdict"),
        ("dropped=perhaps", "dropped"),
        ("q=" + "x" * 201, "q"),
        ("status=nope", "status"),
    ],
)
def test_bad_list_parameters_are_400_naming_the_field(api, unchanged, query, field):
    with unchanged():
        for path in ("/api/board/tasks", "/api/board/counts"):
            if field in ("order", "status") and path.endswith("counts"):
                continue
            response = api.get(f"{path}?{query}")
            assert response.status_code == 400, (path, response.json())
            assert response.json()["error"] == "validation_error"
            assert response.json()["field"] == field


def test_a_cursor_of_one_order_is_refused_by_the_other(api, unchanged):
    for i in range(4):
        task = store.create_task(title=f"t{i}", priority=i).task  # positions, not offsets
        if i % 2:
            finish(task.id)
    by_priority = api.get("/api/board/tasks?limit=1").json()["next"]
    recent = api.get("/api/board/tasks?status=cancelled&order=recent&limit=1").json()["next"]
    with unchanged():
        swapped = api.get(by_priority + "&order=recent")
        assert swapped.status_code == 400 and swapped.json()["field"] == "cursor"
        swapped = api.get(recent.replace("order=recent", "order=priority"))
        assert swapped.status_code == 400 and swapped.json()["field"] == "cursor"


def test_a_page_size_out_of_range_is_400_as_on_the_columns(api, unchanged):
    """``limit`` on the task list was silently replaced by the default page (0, -1,
    ``abc``) or cut to 500 (huge): a script asking for 1,000 got 500 and no error.
    It is 1-500 here as on ``/columns``; 400 naming it otherwise."""
    for i in range(3):
        store.create_task(title=f"t{i}")
    with unchanged():
        for bad in ("0", "-1", "abc", "1.5", "501", "99999999999999999999"):
            for order in ("priority", "recent"):
                answer = api.get(f"/api/board/tasks?limit={bad}&order={order}")
                assert answer.status_code == 400, (bad, order, answer.json())
                assert answer.json()["field"] == "limit"
            columns = api.get(f"/api/board/columns?limit={bad}")
            assert columns.status_code == 400 and columns.json()["field"] == "limit"
    assert len(api.get("/api/board/tasks?limit=2").json()["results"]) == 2
    assert len(api.get("/api/board/tasks?limit=500").json()["results"]) == 3
    assert len(api.get("/api/board/tasks?limit=").json()["results"]) == 3


def test_a_task_body_says_how_many_dependencies_are_not_done(api):
    first = store.create_task(title="first").task
    second = store.create_task(title="second", depends_on=[first.id]).task
    body = api.get(f"/api/board/tasks/{second.id}").json()
    assert body["unmet_deps"] == 1 and body["depends_on"] == [first.id]


def test_the_first_view_is_one_request_with_each_columns_first_page_totals_and_seq(api):
    todo = [store.create_task(title=f"todo {i}", priority=i).task for i in range(3)]
    store.create_task(title="later", status="backlog")
    history = []
    for i in range(7):
        task = store.create_task(title=f"old {i}").task
        finish(task.id)
        history.append(task.id)
    seq = api.get("/api/teams/default/events").json()["seq"]
    body = api.get("/api/board/columns?team=default&dropped=false&limit=2&terminal_limit=3")
    assert body.status_code == 200, body.json()
    board = body.json()
    assert board["seq"] == seq and board["team"] == "default"
    assert board["counts"]["todo"] == 3 and board["counts"]["cancelled"] == 7
    assert board["total"] == 11
    assert set(board["columns"]) == set(board["counts"])
    columns = board["columns"]
    assert ids(columns["todo"]) == [todo[2].id, todo[1].id]  # the board's order
    assert ids(api.get(columns["todo"]["next"]).json()) == [todo[0].id]
    assert columns["backlog"]["next"] is None and columns["done"] == {"results": [], "next": None}
    # History newest first, and its next page continues where the first stopped.
    newest = history[::-1]
    assert ids(columns["cancelled"]) == newest[:3]
    rest = api.get(columns["cancelled"]["next"]).json()
    assert ids(rest) == newest[3:6] and "order=recent" in columns["cancelled"]["next"]
    assert ids(api.get(rest["next"]).json()) == newest[6:]


def test_the_first_view_filters_like_the_list(api):
    store.create_task(title="Polish the header", labels=["ui"])
    store.create_task(title="Fix the parser")
    board = api.get("/api/board/columns?team=default&label=ui").json()
    assert [t["title"] for t in board["columns"]["todo"]["results"]] == ["Polish the header"]
    assert board["total"] == 1
    store.create_task(title="Polish the footer", labels=["ui"])
    first = api.get("/api/board/columns?team=default&label=ui&limit=1").json()["columns"]["todo"]
    assert "label=ui" in first["next"]  # the next page keeps the filter
    assert [t["title"] for t in api.get(first["next"]).json()["results"]] == ["Polish the header"]


@pytest.mark.parametrize("query", ["limit=0", "terminal_limit=501", "limit=x", "verdict=maybe"])
def test_bad_first_view_parameters_are_400(api, unchanged, query):
    with unchanged():
        response = api.get(f"/api/board/columns?team=default&{query}")
    assert response.status_code == 400 and response.json()["error"] == "validation_error"


def test_the_first_view_can_leave_the_totals_to_a_request_of_their_own(api):
    for i in range(3):
        store.create_task(title=f"t{i}", priority=i)
    board = api.get("/api/board/columns?team=default&counts=false&limit=2").json()
    assert board["counts"] is None and board["total"] is None
    assert len(board["columns"]["todo"]["results"]) == 2
    assert "counts=" not in board["columns"]["todo"]["next"]


def test_the_list_and_the_counts_keep_one_routines_fires(api):
    """The routines page's "N in review" links to the board filtered to the routine's
    fires (the id each fire carries in ``metadata.routine_id``)."""
    mine = [
        store.create_task(title="Tidy", metadata={"routine_id": "r1", "slot_at": slot}).task
        for slot in (1, 2)
    ]
    store.create_task(title="Tidy", metadata={"routine_id": "r2", "slot_at": 1})
    store.create_task(title="By hand")
    listed = api.get("/api/board/tasks?team=default&routine=r1").json()
    assert set(ids(listed)) == {t.id for t in mine}
    counted = api.get("/api/board/counts?team=default&routine=r1").json()
    assert counted["counts"]["todo"] == 2 and counted["total"] == 2
    board = api.get("/api/board/columns?team=default&routine=r1").json()
    assert board["total"] == 2

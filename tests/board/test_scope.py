"""Scope-aware dispatch (issue 43, part 1): a task's ``touches`` globs, the
conservative overlap rule, and claims that never start two overlapping tasks of one
repository."""

from __future__ import annotations

import fnmatch
import random
import time
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from board import scope, store
from board.models import Task
from board.scope import check_touches, globs_overlap, overlapping, scope_of_changes
from core.errors import ValidationFailed
from core.models import Event, Repository

# --- the glob rule ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "meet"),
    [
        ("src/**", "src/a.py", True),
        ("src/*.py", "src/a.py", True),
        ("src/*.py", "src/a/b.py", False),
        ("docs", "docs/index.md", True),  # a directory covers what is under it
        ("a/**/z", "a/b/c/z", True),
        ("*.md", "docs/x.md", False),
        ("**/*.md", "docs/x.md", True),
        ("src/a*", "src/*b", True),  # src/ab
        ("src/a?c", "src/abd", False),
        ("src/[ab]c", "src/xc", True),  # a class is read as '?': conservative
        ("lib/x", "src/x", False),
        ("src/a", "src/ab", False),
        ("**", "anything/at/all", True),
    ],
)
def test_two_globs_overlap_when_some_path_could_be_covered_by_both(a, b, meet):
    assert globs_overlap(a, b) is meet
    assert globs_overlap(b, a) is meet


def _covers(glob: str, path: str) -> bool:
    """The documented rule, written independently: the glob matches the path or one
    of its leading directories (fnmatch per segment, ``**`` any segments)."""

    def match(gs: list[str], ps: list[str]) -> bool:
        if not gs:
            return not ps
        if gs[0] == "**":
            return any(match(gs[1:], ps[i:]) for i in range(len(ps) + 1))
        return bool(ps) and fnmatch.fnmatchcase(ps[0], gs[0]) and match(gs[1:], ps[1:])

    parts = path.split("/")
    return any(match(glob.split("/"), parts[:n]) for n in range(1, len(parts) + 1))


_SEGMENTS = st.sampled_from(["a", "b", "ab", "*", "?", "a*", "*b", "[ab]", "**"])
_GLOBS = st.lists(_SEGMENTS, min_size=1, max_size=4).map("/".join)
_PATHS = st.lists(st.sampled_from(["a", "b", "ab", "ba", "c"]), min_size=1, max_size=5).map(
    "/".join
)


@settings(max_examples=400, deadline=None)
@given(_GLOBS, _GLOBS, st.lists(_PATHS, max_size=30))
def test_the_overlap_rule_never_calls_apart_two_globs_a_path_falls_under(a, b, paths):
    # Conservative: any path covered by both proves an overlap the rule must see.
    if any(_covers(a, p) and _covers(b, p) for p in paths):
        assert globs_overlap(a, b) and globs_overlap(b, a)


@settings(max_examples=200, deadline=None)
@given(_PATHS, _PATHS)
def test_plain_paths_overlap_exactly_when_one_is_the_other_or_its_directory(p, q):
    same = p == q or p.startswith(q + "/") or q.startswith(p + "/")
    assert globs_overlap(p, q) is same


@pytest.mark.timing
def test_the_overlap_of_two_full_scopes_is_fast():
    mine = [f"src/pkg{i}/*.py" for i in range(64)]
    theirs = [f"lib/mod{i}/**" for i in range(63)] + ["docs/**/*.md"]
    start = time.perf_counter()
    for _ in range(100):
        scope._globs_overlap.cache_clear()
        assert overlapping(mine, theirs) is None
    assert (time.perf_counter() - start) / 100 < 0.05  # per 64x64 comparison


@pytest.mark.timing
def test_two_scopes_of_quadratic_globs_are_judged_overlapping_in_well_under_a_second():
    # ``*x*x...x.a`` against ``*x*x...x.b``: apart, but the search visits every pair of
    # positions (0.2 s a pair, minutes for 64 x 64). Past the budget: "overlap".
    mine = check_touches([("*x" * 125) + f".a{i:02d}" for i in range(64)])
    theirs = check_touches([("*x" * 125) + f".b{i:02d}" for i in range(64)])
    assert mine is not None and theirs is not None
    scope._globs_overlap.cache_clear()
    scope._segments_meet.cache_clear()
    start = time.perf_counter()
    assert overlapping(mine, theirs) == (mine[0], theirs[0])
    assert globs_overlap(mine[1], theirs[1])
    assert time.perf_counter() - start < 1.0
    # The budget is one comparison's: ordinary globs right after are judged exactly.
    assert overlapping(["src/*.py"], ["docs/**"]) is None


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ("src/**", "touches"),
        (["/etc/passwd"], "touches[0]"),
        (["src/../../x"], "touches[0]"),
        (["a//b"], "touches[0]"),
        (["src/**.py"], "touches[0]"),
        (["src/[ab"], "touches[0]"),
        (["C:/x"], "touches[0]"),
        (["a\\b"], "touches[0]"),
        ([""], "touches[0]"),
        (["x" * 257], "touches[0]"),
        ([f"f{i}" for i in range(65)], "touches"),
        (["ok", 3], "touches[1]"),
        (["ok", "src/\x85x"], "touches[1]"),  # a C1 control
        (["src/\u202egpj.exe"], "touches[0]"),  # shown as "exe.jpg"
    ],
)
def test_a_bad_touches_names_the_glob_at_fault(value, field):
    with pytest.raises(ValidationFailed) as refused:
        check_touches(value)
    assert refused.value.field == field


def test_touches_are_normalised_and_an_empty_list_is_no_scope():
    assert check_touches(["./src/", "src", "docs/*.md"]) == ["src", "docs/*.md"]
    assert check_touches([]) is None
    assert check_touches(None) is None
    # Any printable text a file name may hold stays: an emoji's joiner, right-to-left script.
    assert check_touches(["docs/\U0001f468\u200d\U0001f469.md", "\u05d0/*"]) is not None


def test_an_attempts_changed_files_become_a_scope_widened_when_there_are_many():
    assert scope_of_changes(["src/a.py", "weird[1].txt"]) == ["src/a.py", "weird?1?.txt"]
    assert scope_of_changes([f"d{i % 3}/f{i}" for i in range(100)]) == ["d0/**", "d1/**", "d2/**"]
    assert scope_of_changes([f"d{i}/f" for i in range(100)]) == ["**"]
    assert scope_of_changes([]) is None


# --- the claim -------------------------------------------------------------------


@pytest.fixture
def repos(default_team):
    for name in ("r1", "r2"):
        Repository.objects.create(id=name, team_id="default", path=f"/tmp/scope-{name}")
    return ["r1", "r2"]


def _task(title, touches=None, repository="r1", **kw):
    return store.create_task(title=title, touches=touches, repository=repository, **kw).task


def test_a_claim_refuses_scope_busy_while_an_overlapping_task_is_in_progress(repos):
    first = _task("first", ["src/**"])
    second = _task("second", ["src/app/*.py"])
    assert store.claim(first.id, "a1").ok

    refused = store.claim(second.id, "a2")

    assert refused.outcome == "scope_busy"
    assert (
        refused.detail
        == f"waiting: touches src/app/*.py (it touches src/**) like task {first.id!r} in progress"
    )
    assert refused.refusal is not None
    assert refused.refusal.extra["held_by"]["task"] == first.id
    fresh = store.get_task(second.id)
    assert (fresh.status, fresh.assignee_agent_id, fresh.attempts) == ("todo", None, 0)


@pytest.mark.timing
def test_many_hard_scopes_cost_claim_next_one_budget_and_hold_only_their_repository(repos):
    hard = [("*x" * 125) + f".a{i:02d}" for i in range(64)]
    busy = _task("busy", [("*x" * 125) + f".b{i:02d}" for i in range(64)])
    assert store.claim(busy.id, "a1").ok
    for n in range(20):
        _task(f"hard {n}", [g + str(n) for g in hard], priority=1)
    busy_elsewhere = _task("busy elsewhere", ["docs/**"], repository="r2")
    assert store.claim(busy_elsewhere.id, "a2").ok
    free = _task("free elsewhere", ["src/**"], repository="r2")
    scope._globs_overlap.cache_clear()
    scope._segments_meet.cache_clear()

    start = time.perf_counter()
    taken = store.claim_next("a3")

    assert time.perf_counter() - start < 2.0  # 20 x 64 x 64 hard pairs: minutes unbounded
    assert taken is not None and taken.task.id == free.id


def test_work_waiting_to_land_holds_its_paths_until_it_leaves_review(repos):
    first = _task("first", ["docs"])
    second = _task("second", ["docs/index.md"])
    claimed = store.claim(first.id, "a1")
    assert claimed.ok
    store.transition(first.id, "in_review")

    assert store.claim(second.id, "a2").outcome == "scope_busy"
    store.transition(first.id, "done", human_override={"by": "ops", "reason": "landed"})
    assert store.claim(second.id, "a2").ok


def test_claim_next_passes_over_a_held_task_to_the_next_one(repos):
    first = _task("first", ["src/**"])
    held = _task("held", ["src/a.py"])
    free = _task("free", ["docs/**"])
    assert store.claim(first.id, "a1").ok

    taken = store.claim_next("a2")

    assert taken is not None and taken.task.id == free.id
    assert store.claim_next("a3") is None  # only the held one is left: nothing to take
    assert store.get_task(held.id).status == "todo"


def test_other_repositories_and_unscoped_tasks_are_not_held_back(repos):
    first = _task("first", ["**"])
    elsewhere = _task("elsewhere", ["src/**"], repository="r2")
    unscoped = _task("unscoped")
    assert store.claim(first.id, "a1").ok

    assert store.claim(elsewhere.id, "a2").ok
    assert store.claim(unscoped.id, "a3").ok


def test_scope_busy_comes_after_limit_reached_and_before_approval_required(repos):
    from core import registry

    registry.create_agent(
        id="solo", display_name="solo", team="default", runtime="command", max_concurrent=1
    )
    first = _task("first", ["src/**"])
    other = _task("other")
    waits = _task("waits", ["src/x"], approval_required=True)
    assert store.claim(first.id, "a1").ok

    assert store.claim(waits.id, "a2").outcome == "scope_busy"
    assert store.claim(other.id, "solo").ok
    assert store.claim(waits.id, "solo").outcome == "limit_reached"
    codes = list(store.CLAIM_REFUSALS)
    assert (
        codes.index("limit_reached")
        < codes.index("scope_busy")
        < codes.index("approval_required")
        < codes.index("conflict")
    )


def test_a_task_another_agent_holds_answers_conflict_not_scope_busy(repos):
    first = _task("first", ["src/**"])
    assert store.claim(first.id, "a1").ok
    assert store.claim(first.id, "a2").outcome == "conflict"


def test_scope_busy_is_a_wait_on_the_board_for_routines_and_workers():
    assert "scope_busy" in store.WAITS_ON_THE_BOARD
    assert "scope_busy" not in store.CLAIM_NEXT_REFUSALS  # claim-next passes over


def test_touches_can_be_changed_and_the_effective_scope_follows(repos):
    task = _task("t", ["src/**"])
    assert (task.touches, task.scope) == (["src/**"], ["src/**"])
    edited = store.update_task(task.id, {"touches": ["docs/*.md"]})
    assert (edited.touches, edited.scope) == (["docs/*.md"], ["docs/*.md"])
    cleared = store.update_task(task.id, {"touches": None})
    assert (cleared.touches, cleared.scope) == (None, None)


def test_a_settled_attempt_gives_a_task_without_touches_the_paths_it_changed(repos):
    task = _task("t")
    other = _task("other", ["lib/**"])
    claimed = store.claim(task.id, "a1")
    assert claimed.ok
    stat = {"files": [{"path": "lib/core.py"}, {"path": "README.md"}]}

    store.settle_from_worktree(task.id, empty=False, diffstat=stat)

    fresh = store.get_task(task.id)
    assert (fresh.status, fresh.touches, fresh.scope) == (
        "in_review",
        None,
        ["lib/core.py", "README.md"],
    )
    # Waiting to land, its changed paths hold the overlapping task back.
    assert store.claim(other.id, "a2").outcome == "scope_busy"


def test_a_fix_round_of_a_task_without_touches_holds_the_paths_its_run_changed(repos):
    task = _task("t")
    other = _task("other", ["src/**"])
    claimed = store.claim(task.id, "a1")

    sent = store.send_back_for_fix(
        task.id,
        claimed.ticket,
        evidence="tests failed",
        detail={"attempts": [], "fix_cycles": 1},
        feedback="fix the test",
        changed_paths=["src/app.py"],
    )

    assert not sent.declined
    fresh = store.get_task(task.id)
    assert (fresh.status, fresh.touches, fresh.scope) == ("in_progress", None, ["src/app.py"])
    assert store.claim(other.id, "a2").outcome == "scope_busy"


def test_a_settled_attempt_never_overwrites_a_persons_touches(repos):
    task = _task("t", ["src/**"])
    assert store.claim(task.id, "a1").ok
    store.settle_from_worktree(task.id, empty=False, diffstat={"files": [{"path": "x/y"}]})
    fresh = store.get_task(task.id)
    assert (fresh.touches, fresh.scope) == (["src/**"], ["src/**"])


def test_a_claim_that_lost_a_scope_race_is_rolled_back_and_run_again(repos, monkeypatch):
    from board.store import scoping
    from core.storage import WriteBudgetExceeded

    real = scoping.confirm_apart
    lost = []

    def lose_once(task):
        if not lost:
            lost.append(task.id)  # a racer's overlapping start committed first
            raise scoping.ScopeRace(task.id)
        real(task)

    monkeypatch.setattr(scoping, "confirm_apart", lose_once)
    first = _task("first", ["src/**"])
    second = _task("second", ["docs/**"])
    taken = store.claim_next("a1")
    assert taken is not None and taken.task.id == first.id and lost == [first.id]
    # The lost run left nothing behind: one attempt, one claimed event.
    assert store.get_task(first.id).attempts == 1
    assert Event.objects.filter(kind="claimed", task_id=first.id).count() == 1
    assert store.get_task(second.id).status == "todo"

    def always_lose(task):
        raise scoping.ScopeRace(task.id)

    monkeypatch.setattr(scoping, "confirm_apart", always_lose)
    with pytest.raises(WriteBudgetExceeded):
        store.claim(second.id, "a2")
    assert store.get_task(second.id).status == "todo"


# --- twelve processes ----------------------------------------------------------

_POOL = [
    "src/**",
    "src/a.py",
    "src/*.py",
    "src/sub/*",
    "docs",
    "docs/*.md",
    "**/*.md",
    "lib/x/**",
    "lib/*/y.py",
    "tests/**",
]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("seed", [7, 2026])
def test_twelve_processes_never_start_two_overlapping_tasks_and_lose_none(repos, race, seed):
    """The acceptance property: random touches sets over two repositories (and
    unscoped tasks), twelve processes claiming by id and by claim-next, a sampler
    watching what is in progress: never two overlapping tasks of one repository
    together, every task claimed exactly once."""
    rng = random.Random(seed)
    ids = []
    for i in range(90):
        size = rng.choice([0, 1, 1, 2, 3])
        touches = rng.sample(_POOL, size) or None
        repo = rng.choice(["r1", "r1", "r2", None])
        ids.append(_task(f"t{i}", touches, repository=repo, id=f"s{i:03d}").id)

    results = race(
        [["scope-drain", "--agent", f"w{i}", "--seed", str(seed + i)] for i in range(12)]
        + [["sample-scope"]],
        extra_env={"CLAWBOO_DB_WRITE_BUDGET_MS": "60000"},
        timeout=600,
    )

    drains, sample = results[:12], results[12]
    claimed = [task_id for r in drains for task_id in r["claimed"]]
    assert Counter(claimed).most_common(1)[0][1] == 1  # 0 double claims
    assert set(claimed) == set(ids)  # 0 lost tasks
    assert set(Task.objects.values_list("status", flat=True)) == {"done"}
    assert set(Task.objects.values_list("attempts", flat=True)) == {1}
    assert sample["overlaps"] == []  # never two overlapping tasks started together
    assert sample["samples"] > 10 and sample["most"] > 1  # it watched real concurrency
    refused = Counter()
    for r in drains:
        refused.update(r["outcomes"])
    assert refused["scope_busy"] > 0  # the rule was exercised, not just never raced


@pytest.mark.django_db(transaction=True)
def test_the_claims_scope_reads_walk_their_partial_indexes_only(repos):
    from django.db import connection

    from board.store import scoping

    bulk = [f"b{i}" for i in range(50)]
    for task_id in bulk:
        _task(task_id, None, id=task_id)
    plain = "EXPLAIN QUERY PLAN " if connection.vendor == "sqlite" else "EXPLAIN "
    statements = [
        (scoping._ALL_BUSY_SQL[connection.vendor], [], "tasks_scope_busy_idx"),
        (scoping._BUSY_IN_REPOSITORY_SQL, ["r1", "x"], "tasks_scope_busy_idx"),
        (*scoping.waiting_sql(["r1"], ["default"], ["default"]), "tasks_scope_todo_idx"),
    ]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET enable_seqscan = off")  # a tiny table: ask for the plan it has
        for sql, params, index in statements:
            cursor.execute(plain + sql, params)
            plan = " ".join(str(row) for row in cursor.fetchall())
            assert index in plan, (sql, plan)
            # A walk of the partial index, never of the table.
            assert "'SCAN tasks'" not in plan and "Seq Scan" not in plan, plan

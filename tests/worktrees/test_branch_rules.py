"""Which Gitea branch protection rule applies to a branch, as Gitea decides it: the
cases of Gitea's own tests (models/git/protected_branch_list_test.go) as data, and
the glob syntax its rule names take (gobwas/glob, "/" the separator)."""

from __future__ import annotations

import pytest

from worktrees.branch_rules import rule_for, rule_matches


def rules(*names: str) -> list[dict[str, object]]:
    return [{"rule_name": name} for name in names]


@pytest.mark.parametrize(
    ("names", "branch", "applies"),
    [
        (("release/*", "release/v1.17"), "release/v1.17", "release/v1.17"),
        (("release/v1.17", "release/*"), "release/v1.17", "release/v1.17"),
        (("release/**/v1.17", "release/test/v1.17"), "release/test/v1.17", "release/test/v1.17"),
        (("release/test/v1.17", "release/**/v1.17"), "release/test/v1.17", "release/test/v1.17"),
        (("release/**", "release/v1.0.0"), "release/v1.0.0", "release/v1.0.0"),
        (("release/v1.0.0", "release/**"), "release/v1.0.0", "release/v1.0.0"),
        (("release/**", "release/v1.0.0"), "release/v2.0.0", "release/**"),
        (("release/*", "release/v1.0.0"), "release/1/v2.0.0", None),
    ],
)
def test_a_rule_named_like_the_branch_applies_before_a_glob_that_matches_it(
    names: tuple[str, ...], branch: str, applies: str | None
):
    rule = rule_for(rules(*names), branch)
    assert (rule or {}).get("rule_name") == applies


def test_among_rules_of_one_kind_the_first_made_applies():
    made = [
        {"rule_name": "ma*", "created_at": "2026-01-01T00:00:05Z"},
        {"rule_name": "m*", "created_at": "2026-01-01T00:00:01Z"},
    ]
    assert rule_for(made, "main") == made[1]
    # Without dates (an older Gitea), the order listed.
    assert rule_for([{"rule_name": "ma*"}, {"rule_name": "m*"}], "main") == {"rule_name": "ma*"}


def test_a_rules_priority_comes_before_plain_names_and_age():
    # Gitea 1.23+: a person orders the rules; the plain name comes last here.
    made = [
        {"rule_name": "main", "priority": 3, "created_at": "2026-01-01T00:00:00Z"},
        {"rule_name": "m*", "priority": 2, "created_at": "2026-01-01T00:00:02Z"},
        {"rule_name": "*", "priority": 1, "created_at": "2026-01-01T00:00:03Z"},
    ]
    assert rule_for(made, "main") == made[2]
    assert rule_for(made[:2], "main") == made[1]


def test_a_rule_from_before_rule_names_is_found_by_its_branch_name():
    assert rule_for([{"branch_name": "main", "enable_status_check": True}], "main") is not None
    assert rule_for([{"rule_name": 3}, "junk", None], "main") is None


@pytest.mark.parametrize(
    ("name", "branch", "matches"),
    [
        ("main", "main", True),
        ("Main", "main", True),  # a plain name: letters' case aside
        ("mai", "main", False),
        ("*", "main", True),
        ("*", "feature/x", False),  # "*" stops at "/"
        ("**", "feature/x", True),
        ("feature/*", "feature/x", True),
        ("feature/*", "feature/x/y", False),
        ("feature/**", "feature/x/y", True),
        ("Ma*", "main", False),  # a glob keeps case
        ("ma?n", "main", True),
        ("ma?n", "ma/n", False),
        ("{main,trunk}", "trunk", True),
        ("{main,trunk}", "mainline", False),
        ("release/{v1,v2}.*", "release/v2.0", True),
        ("release/{v1,v2}.*", "release/v3.0", False),
        ("v[0-9].x", "v7.x", True),
        ("v[!0-9].x", "v7.x", False),
        ("v[!0-9].x", "vA.x", True),
        ("v.x", "vAx", False),  # "." is itself
        ("a\\*b", "a*b", True),
        ("a\\*b", "axb", False),
        ("broken[", "broken[", True),  # a glob that does not compile: its own text
        ("broken[", "broken", False),
        ("{open", "{open", True),
    ],
)
def test_a_rule_name_matches_as_gitea_matches_it(name: str, branch: str, matches: bool):
    assert rule_matches(name, branch) is matches

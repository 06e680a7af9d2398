"""Which of a Gitea (or Forgejo) repository's branch protection rules applies to a
branch, decided as Gitea decides it (``models/git/protected_branch.go`` and
``protected_branch_list.go``; glob rule names since Gitea 1.19):

- a rule's name (``rule_name``) is a plain branch name, or a glob when it holds one
  of ``*?[]{}\\``;
- a plain name applies to the branch of that name, letters' case aside;
- a glob is gobwas/glob's syntax with ``/`` as the separator: ``*`` any run of
  characters but ``/``, ``**`` any run at all, ``?`` one character but ``/``,
  ``[abc]``/``[a-z]`` one of them (``[!...]``: none of them), ``{a,b}`` either
  alternative, ``\\`` the next character as itself; a glob that does not compile
  matches its own text only;
- the rules are tried in one order -- ``priority`` (Gitea 1.23 lets a person order
  them; 0 before that), then plain names before globs, then the oldest first -- and
  the first that matches applies. None matches: the branch is not protected.

Pure functions of the API's ``BranchProtection`` objects: no network here.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Sequence
from typing import Any

# Gitea's glob.IsSpecialByte: a rule name holding one of these is a glob.
GLOB_CHARACTERS = frozenset("*?[]{}\\")
_NOT_SEPARATOR = "[^/]"


def is_glob(rule_name: str) -> bool:
    return any(c in GLOB_CHARACTERS for c in rule_name)


def _character_class(pattern: str, i: int, out: list[str]) -> int:
    """``[...]`` from just past its ``[``: appended to ``out`` as a regex class;
    returns where the pattern goes on. ValueError when it is never closed."""
    out.append("[")
    if i < len(pattern) and pattern[i] == "!":
        out.append("^")
        i += 1
    while i < len(pattern):
        c = pattern[i]
        i += 1
        if c == "]":
            out.append("]")
            return i
        if c == "\\":
            if i >= len(pattern):
                break
            out.append(re.escape(pattern[i]))
            i += 1
        else:
            out.append(c if c == "-" else re.escape(c))
    raise ValueError("unterminated character class")


def compile_glob(pattern: str) -> re.Pattern[str]:
    """The regular expression a glob rule name stands for (matched whole).
    ValueError when the glob does not compile."""
    out: list[str] = []
    open_groups = 0
    i = 0
    while i < len(pattern):
        c = pattern[i]
        i += 1
        if c == "}" and open_groups:
            out.append(")")
            open_groups -= 1
        elif c == "*":
            if i < len(pattern) and pattern[i] == "*":
                i += 1
                out.append(".*")
            else:
                out.append(_NOT_SEPARATOR + "*")
        elif c == "?":
            out.append(_NOT_SEPARATOR)
        elif c == "[":
            i = _character_class(pattern, i, out)
        elif c == "{":
            out.append("(?:")
            open_groups += 1
        elif c == "," and open_groups:
            out.append("|")
        elif c == "\\":
            if i >= len(pattern):
                raise ValueError("nothing to escape")
            out.append(re.escape(pattern[i]))
            i += 1
        else:
            out.append(re.escape(c))
    if open_groups:
        raise ValueError("unterminated alternatives")
    try:
        return re.compile("".join(out), re.DOTALL)
    except re.error as exc:
        raise ValueError(str(exc)) from None


def rule_matches(rule_name: str, branch: str) -> bool:
    """Does the rule named ``rule_name`` apply to ``branch``?"""
    if not is_glob(rule_name):
        return rule_name.lower() == branch.lower()
    try:
        compiled = compile_glob(rule_name)
    except ValueError:
        return rule_name == branch  # Gitea quotes a broken glob: its own text
    return compiled.fullmatch(branch) is not None


def _created(rule: dict[str, Any]) -> float:
    try:
        return dt.datetime.fromisoformat(str(rule.get("created_at"))).timestamp()
    except ValueError:
        return math.inf  # not said: after those that say (the list's order among them)


def rule_for(rules: Sequence[Any], branch: str) -> dict[str, Any] | None:
    """The rule among ``rules`` (``GET /repos/{owner}/{repo}/branch_protections``)
    that applies to ``branch``, or None."""
    named = [(rule, name) for rule in rules if (name := name_of(rule)) is not None]

    def order(indexed: tuple[int, tuple[dict[str, Any], str]]) -> tuple[int, bool, float, int]:
        position, (rule, name) = indexed
        priority = rule.get("priority")
        if not isinstance(priority, int) or isinstance(priority, bool):
            priority = 0
        return (priority, is_glob(name), _created(rule), position)

    for _, (rule, name) in sorted(enumerate(named), key=order):
        if rule_matches(name, branch):
            return rule
    return None


def name_of(rule: Any) -> str | None:
    """A rule's name: ``rule_name`` (Gitea 1.19+), else the ``branch_name`` that
    named it before (a plain branch name)."""
    if not isinstance(rule, dict):
        return None
    name = rule.get("rule_name") or rule.get("branch_name")
    return name if isinstance(name, str) and name else None

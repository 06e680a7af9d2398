"""A task's scope: the repository paths it may change, as globs, and whether two
scopes could touch the same file.

``touches`` is what a person (or agent) says a task will change; without it, a
retry or fix round takes the paths its last attempt changed (recorded when the
attempt settles, :func:`scope_of_changes`). The claim (:mod:`board.store.claims`)
starts no task whose scope overlaps that of a task of the same repository that is
in progress or waiting to land.

The glob syntax, per ``/``-separated segment:

* ``*`` any run of characters within one segment, ``?`` any one character,
  ``[...]`` one character of a class (``[!...]`` / ``[^...]`` negated);
* ``**`` as a whole segment: any number of segments, none included;
* anything else is itself.

A glob covers a path when it matches the path **or one of its leading
directories**, like a git pathspec: ``docs`` covers ``docs/index.md``.

Overlap is decided conservatively: two globs overlap when some path could be
covered by both. A character class is read as ``?`` (any one character), so the
answer may say "overlap" where no real path is covered by both, never the
reverse: a false "overlap" makes a task wait, a false "apart" would let two
agents edit one file at once.

The search is quadratic in the globs' lengths (``*x*x...`` against ``*x*x...``
visits every pair of positions), so one comparison of two scopes has a budget of
:data:`MAX_OVERLAP_STEPS` search steps: past it, the pair being compared is said to
overlap (the conservative answer) rather than hold a claim for minutes.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

from core.errors import ValidationFailed

MAX_GLOBS = 64
MAX_GLOB_LENGTH = 256
# A recorded scope (an attempt's changed files) longer than MAX_GLOBS is widened
# to the top-level directories it touched (then to the whole repository).
WHOLE_REPOSITORY = "**"
# Search steps one comparison of two scopes may take (about a tenth of a second):
# ordinary globs take tens per pair; 64 x 64 globs of ``*x*x...`` would take
# minutes.
MAX_OVERLAP_STEPS = 50_000

_META = frozenset("*?[")
# Marks that reorder how text is shown (U+061C, U+200E-F, U+202A-E, U+2066-9).
_BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)
_CLASS = re.compile(r"\[(?:[!^])?\]?[^\]]*\]")


def check_touches(value: Any, field: str = "touches") -> list[str] | None:
    """``touches`` as given (null, or a list of repository-relative globs): the clean
    list (duplicates dropped, order kept), or None for null or an empty list."""
    if value is None:
        return None
    if not isinstance(value, list):
        raise ValidationFailed(field, "must be a list of repository-relative path globs")
    if len(value) > MAX_GLOBS:
        raise ValidationFailed(field, f"at most {MAX_GLOBS} globs")
    clean: list[str] = []
    for i, glob in enumerate(value):
        where = f"{field}[{i}]"
        checked = check_glob(glob, where)
        if checked not in clean:
            clean.append(checked)
    return clean or None


def check_glob(glob: Any, field: str = "touches") -> str:
    """One repository-relative path glob, normalised (a trailing ``/`` and ``./``
    segments dropped); a 400 naming what is wrong otherwise."""
    if not isinstance(glob, str) or not glob.strip():
        raise ValidationFailed(field, "must be a non-empty path glob")
    if len(glob) > MAX_GLOB_LENGTH:
        raise ValidationFailed(field, f"at most {MAX_GLOB_LENGTH} characters")
    if any(unicodedata.category(c) == "Cc" for c in glob):  # C0, DEL and C1
        raise ValidationFailed(field, "must not contain control characters")
    if _BIDI_CONTROLS.intersection(glob):
        # Shown on cards and in refusals: a glob must read as what it matches.
        raise ValidationFailed(field, "must not contain bidirectional text controls")
    if "\\" in glob:
        raise ValidationFailed(field, "uses '/' between directories, not '\\'")
    if glob.startswith("/") or re.match(r"\A[A-Za-z]:", glob):
        raise ValidationFailed(field, "must be relative to the repository, not absolute")
    segments = [s for s in glob.rstrip("/").split("/") if s != "."]
    if not segments:
        raise ValidationFailed(field, "names no path inside the repository")
    for segment in segments:
        if segment == "":
            raise ValidationFailed(field, "must not contain an empty segment ('//')")
        if segment == "..":
            raise ValidationFailed(field, "must not step out of the repository ('..')")
        if "**" in segment and segment != "**":
            raise ValidationFailed(field, "'**' must be a whole segment ('src/**/x.py')")
        if "[" in _CLASS.sub("", segment) or "]" in _CLASS.sub("", segment):
            raise ValidationFailed(field, "has an unclosed '[' character class")
    return "/".join(segments)


def scope_of_changes(paths: Iterable[str]) -> list[str] | None:
    """What an attempt changed (repository-relative file paths, as git names them)
    as a scope: each path itself, its glob characters read as wildcards (wider,
    never narrower); more than :data:`MAX_GLOBS` become their top-level directories,
    and more than that the whole repository. None: nothing changed."""
    clean: list[str] = []
    for raw in paths:
        path = raw.strip().strip("/")
        if not path or any(s in ("", ".", "..") for s in path.split("/")):
            continue
        path = re.sub(r"[\[\]]", "?", path)[:MAX_GLOB_LENGTH]
        if path not in clean:
            clean.append(path)
    if len(clean) > MAX_GLOBS:
        tops: list[str] = []
        for path in clean:
            head, sep, _ = path.partition("/")
            top = f"{head}/**" if sep else head
            if top not in tops:
                tops.append(top)
        clean = tops if len(tops) <= MAX_GLOBS else [WHOLE_REPOSITORY]
    return clean or None


# --- overlap -------------------------------------------------------------------


def _literal_prefix(glob: str) -> str:
    for i, c in enumerate(glob):
        if c in _META:
            return glob[:i]
    return glob


def _tokens(segment: str) -> tuple[str, ...]:
    """A segment's tokens: ``*``, ``?`` (also a whole character class), or one
    literal character."""
    out: list[str] = []
    i = 0
    while i < len(segment):
        c = segment[i]
        if c == "[":
            match = _CLASS.match(segment, i)
            if match is not None:
                out.append("?")
                i = match.end()
                continue
        out.append(c if c in "*?" else "=" + c)
        i += 1
    return tuple(out)


class _TooHard(Exception):
    """The comparison's step budget ran out (never cached: lru_cache keeps no raise)."""


_budget = threading.local()


def _step() -> None:
    left = getattr(_budget, "left", None)
    if left is None:
        return
    if left <= 0:
        raise _TooHard
    _budget.left = left - 1


def _intersect(a: Sequence[Any], b: Sequence[Any], star: Any, compatible: Any) -> bool:
    """Whether some word matches both patterns ``a`` and ``b`` (sequences of
    tokens, ``star`` matching any run of symbols, every other token one symbol
    that ``compatible`` says two tokens can both be): a search over pairs of
    positions, at most ``len(a) * len(b)`` states, each a step of the budget."""
    seen: set[tuple[int, int]] = set()
    todo = [(0, 0)]
    while todo:
        i, j = todo.pop()
        if (i, j) in seen:
            continue
        _step()
        seen.add((i, j))
        at_a, at_b = i < len(a), j < len(b)
        if not at_a and not at_b:
            return True
        a_star = at_a and a[i] == star
        b_star = at_b and b[j] == star
        if a_star:
            todo.append((i + 1, j))  # the star matches nothing more
        if b_star:
            todo.append((i, j + 1))
        if a_star and at_b:
            todo.append((i, j + 1))  # a's star takes b's next symbol (or b's star)
        if b_star and at_a:
            todo.append((i + 1, j))
        if at_a and at_b and not a_star and not b_star and compatible(a[i], b[j]):
            todo.append((i + 1, j + 1))
    return False


def _chars_meet(x: str, y: str) -> bool:
    return x == "?" or y == "?" or x == y


@lru_cache(maxsize=4096)
def _segments_meet(x: str, y: str) -> bool:
    """Whether some one segment (a file or directory name) matches both."""
    return _intersect(_tokens(x), _tokens(y), "*", _chars_meet)


def globs_overlap(a: str, b: str) -> bool:
    """Whether some path could be covered by both globs (module doc: conservative;
    True also when deciding would take more than :data:`MAX_OVERLAP_STEPS`)."""
    return overlapping([a], [b]) is not None


@lru_cache(maxsize=16384)
def _globs_overlap(a: str, b: str) -> bool:
    pa, pb = _literal_prefix(a), _literal_prefix(b)
    # Quick apart: two fixed beginnings that differ before either glob's first
    # wildcard can match no common path.
    n = min(len(pa), len(pb))
    if pa[:n] != pb[:n]:
        return False
    if _META.isdisjoint(a) and _META.isdisjoint(b):
        # Plain paths: one covers the other when it is the other or its directory.
        return a == b or a.startswith(b + "/") or b.startswith(a + "/")
    # A glob covers a path or its leading directories: glob/** covers the rest.
    sa = a.split("/") + ([] if a.endswith("**") else ["**"])
    sb = b.split("/") + ([] if b.endswith("**") else ["**"])
    return _intersect(sa, sb, "**", _segments_meet)


@contextmanager
def one_budget() -> Iterator[None]:
    """Every comparison inside shares one budget of :data:`MAX_OVERLAP_STEPS` (one
    repository's candidates in a claim-next: a hundred hard scopes cost what one
    does, and only that repository's tasks are held for it)."""
    outer = getattr(_budget, "left", None)
    _budget.left = MAX_OVERLAP_STEPS
    try:
        yield
    finally:
        if outer is None:
            del _budget.left
        else:
            _budget.left = outer


def overlapping(mine: Sequence[str], theirs: Sequence[str]) -> tuple[str, str] | None:
    """The first pair of globs (one of each scope) that overlap, or None. Past the
    budget of :data:`MAX_OVERLAP_STEPS`, the pair being compared is the answer."""
    outer = getattr(_budget, "left", None)
    if outer is None:
        _budget.left = MAX_OVERLAP_STEPS
    try:
        for a in mine:
            for b in theirs:
                try:
                    meet = _globs_overlap(a, b) if a <= b else _globs_overlap(b, a)
                except _TooHard:
                    return a, b
                if meet:
                    return a, b
        return None
    finally:
        if outer is None:
            del _budget.left

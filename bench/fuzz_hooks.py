"""Schemathesis hooks for a live fuzz run against a running server (not a test).

Load with ``SCHEMATHESIS_HOOKS=bench.fuzz_hooks`` and point ``FUZZ_DB`` at the server's
SQLite file. Adds two checks on top of schemathesis' own:

- ``error_is_envelope``: every 4xx/5xx under ``/api/`` is ``{"error": str, "detail": str, …}``;
- ``refusal_writes_nothing``: a 4xx leaves every table (but the job queue's and the
  session's, which the server's own processes write) exactly as it was — each request's
  before/after fingerprint of the database. Run with one worker (``-w 1``) so a write is
  the request's.

``FUZZ_IDS`` (``name=id1,id2;name2=…``) makes path parameters real ids half the time,
so refusals of rows that exist (another team's included) are probed, not only 404s.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from typing import Any

import schemathesis
from hypothesis import strategies as st

DB = os.environ.get("FUZZ_DB", "")
# Tables written by the server's own processes, not by the request under test.
SKIP = ("django_q_", "django_session", "heartbeats", "sqlite_")
_before: dict[int, dict[str, str]] = {}


def _ids() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for part in filter(None, os.environ.get("FUZZ_IDS", "").split(";")):
        name, _, values = part.partition("=")
        out[name] = values.split(",")
    return out


IDS = _ids()


def fingerprint() -> dict[str, str]:
    if not DB:
        return {}
    con = sqlite3.connect(f"file:{DB}?mode=ro", uri=True, timeout=5)
    try:
        tables = [
            r[0]
            for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")
            if not r[0].startswith(SKIP)
        ]
        out = {}
        for t in tables:
            h = hashlib.sha256()
            n = 0
            for row in con.execute(f'SELECT * FROM "{t}" ORDER BY rowid'):  # noqa: S608
                h.update(repr(row).encode())
                n += 1
            out[t] = f"{n}:{h.hexdigest()[:16]}"
        return out
    finally:
        con.close()


@schemathesis.hook
def flatmap_path_parameters(ctx: Any, path_parameters: dict[str, Any]) -> Any:
    if not path_parameters:
        return st.just(path_parameters)
    real = {k: IDS[k] for k in path_parameters if k in IDS}
    if not real:
        return st.just(path_parameters)
    return st.booleans().flatmap(
        lambda use: (
            st.fixed_dictionaries({k: st.sampled_from(v) for k, v in real.items()}).map(
                lambda picked: {**path_parameters, **picked}
            )
            if use
            else st.just(path_parameters)
        )
    )


@schemathesis.hook
def before_call(ctx: Any, case: Any, kwargs: dict[str, Any]) -> None:
    _before[id(case)] = fingerprint()


@schemathesis.check
def error_is_envelope(ctx: Any, response: Any, case: Any) -> None:
    if response.status_code < 400 or not case.formatted_path.startswith("/api/"):
        return
    try:
        body = json.loads(response.content or b"")
    except ValueError:
        shown = response.content[:200]
        raise AssertionError(f"{response.status_code} is not JSON: {shown!r}") from None
    ok = isinstance(body, dict)
    ok = ok and isinstance(body.get("error"), str) and isinstance(body.get("detail"), str)
    if not ok:
        raise AssertionError(f"{response.status_code} is not the envelope: {str(body)[:200]}")


@schemathesis.check
def refusal_writes_nothing(ctx: Any, response: Any, case: Any) -> None:
    before = _before.pop(id(case), None)
    if before is None or not 400 <= response.status_code < 500:
        return
    after = fingerprint()
    changed = sorted(t for t in set(before) | set(after) if before.get(t) != after.get(t))
    if changed:
        raise AssertionError(f"{response.status_code} wrote to {changed}")

"""The verdict's structure (GOVERNANCE §4), declared once.

A task's verification is ``{verdict, evidence, gate, findings, reviewer, attempts}``:
the word and its evidence live in the task's own columns (``verdict``,
``verdict_evidence``), the rest in ``verification_detail``. The executor's judge
fills it, the data layer stores it, and the API, admin and review panel render it
from here.
"""

from __future__ import annotations

from typing import Any

from core.errors import ValidationFailed

# A blocking finding makes the verdict ``fail``; a debt finding keeps ``pass``.
BLOCKING_SEVERITIES = ("security", "crash", "data_loss", "wrong_algorithm", "missing_ac")
DEBT_SEVERITIES = ("style", "perf", "other")
SEVERITIES = BLOCKING_SEVERITIES + DEBT_SEVERITIES

# The evidence of a file-mutating run that ended with no verify command.
NONE_CONFIGURED = "(none configured)"

TITLE_MAX = 300
BODY_MAX = 4_000
PATH_MAX = 1_024
OUTPUT_TAIL = 4_000
MAX_FINDINGS = 100


def is_blocking(finding: dict[str, Any]) -> bool:
    return finding.get("severity") in BLOCKING_SEVERITIES


def _text(value: Any, limit: int) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return None
    return value.strip()[:limit]


def clean_finding(raw: Any) -> dict[str, Any] | None:
    """One finding as stored (``{severity, title, body?, file?, line?, confidence?}``),
    or None when ``raw`` is not one: no title, or an unknown severity."""
    if not isinstance(raw, dict):
        return None
    severity = raw.get("severity")
    title = _text(raw.get("title"), TITLE_MAX)
    if severity not in SEVERITIES or title is None:
        return None
    finding: dict[str, Any] = {"severity": severity, "title": title}
    body = _text(raw.get("body"), BODY_MAX)
    if body is not None:
        finding["body"] = body
    path = _text(raw.get("file"), PATH_MAX)
    if path is not None:
        finding["file"] = path
    line = raw.get("line")
    if isinstance(line, int) and not isinstance(line, bool) and line > 0:
        finding["line"] = line
    confidence = raw.get("confidence")
    if isinstance(confidence, int | float) and not isinstance(confidence, bool):
        finding["confidence"] = max(0.0, min(float(confidence), 1.0))
    return finding


def gate(
    command: str | None,
    exit_code: int | None,
    duration_ms: int,
    timed_out: bool,
    output_tail: str,
) -> dict[str, Any]:
    return {
        "command": command,
        "exit_code": exit_code,
        "duration_ms": duration_ms,
        "timed_out": timed_out,
        "output_tail": output_tail[-OUTPUT_TAIL:],
    }


def detail(
    gate_result: dict[str, Any] | None,
    findings: list[dict[str, Any]],
    reviewer: dict[str, Any] | None,
    attempts: list[dict[str, Any]],
) -> dict[str, Any]:
    """What ``verification_detail`` holds."""
    return {
        "gate": gate_result,
        "findings": findings[:MAX_FINDINGS],
        "reviewer": reviewer,
        "attempts": attempts,
    }


# A verdict a person gave by hand (``POST …/verdict``) names them in its detail under
# this key; the judge's verdicts never carry it.
SET_BY = "set_by"


def set_by_person(stored: Any) -> str | None:
    """Who set the verdict whose detail is ``stored``, if a person did by hand."""
    by = stored.get(SET_BY) if isinstance(stored, dict) else None
    return by if isinstance(by, str) and by else None


def rounds_kept(stored: Any) -> dict[str, Any] | None:
    """What of a verdict outlives its task's return to ``todo`` in the middle of the
    fix loop: the judge's rounds so far and how many were fix rounds. A release, a
    soft fail or a lapsed lease in a fix round would otherwise start the loop afresh
    at the next claim, and a builder that never passes would be sent back for ever
    (GOVERNANCE §4: up to ``CLAWBOO_MAX_FIX_CYCLES`` rounds). None: nothing to keep."""
    if not isinstance(stored, dict) or not int(stored.get("fix_cycles") or 0):
        return None
    return {"attempts": list(stored.get("attempts") or []), "fix_cycles": stored["fix_cycles"]}


def render(task: Any, at: str | None) -> dict[str, Any] | None:
    """The ``verification`` of a task body (null: never verified nor overridden)."""
    if task.verdict is None and task.human_override is None:
        return None
    extra = task.verification_detail if isinstance(task.verification_detail, dict) else {}
    return {
        "verdict": task.verdict,
        "evidence": task.verdict_evidence,
        "at": at,
        "human_override": task.human_override,
        "gate": extra.get("gate"),
        "findings": list(extra.get("findings") or []),
        "reviewer": extra.get("reviewer"),
        "attempts": list(extra.get("attempts") or []),
    }


# --- a person's line comments (review like a pull request) ---------------------------

MAX_LINE_COMMENTS = 100


def clean_line_comments(raw: Any) -> list[dict[str, Any]]:
    """A reviewer's line comments ``[{file, line, body}]`` as stored and sent; raises
    ValidationFailed naming the first bad one."""
    if raw is None:
        return []
    if not isinstance(raw, list) or len(raw) > MAX_LINE_COMMENTS:
        raise ValidationFailed("comments", f"a list of at most {MAX_LINE_COMMENTS} objects")
    clean = []
    for n, item in enumerate(raw):
        where = f"comments[{n}]"
        if not isinstance(item, dict) or set(item) - {"file", "line", "body"}:
            raise ValidationFailed(where, "must be an object {file, line, body}")
        path = _text(item.get("file"), PATH_MAX)
        body = _text(item.get("body"), BODY_MAX)
        line = item.get("line")
        if path is None:
            raise ValidationFailed(f"{where}.file", "names a file of the diff")
        if not isinstance(line, int) or isinstance(line, bool) or line < 1:
            raise ValidationFailed(f"{where}.line", "must be a line number (1 or more)")
        if body is None:
            raise ValidationFailed(f"{where}.body", "says what should change")
        clean.append({"file": path, "line": line, "body": body})
    return clean


def line_comments_text(comments: list[dict[str, Any]]) -> str:
    """The comments as the agent reads them: one ``file:line: text`` per line."""
    return "\n".join(f"- {c['file']}:{c['line']}: {c['body']}" for c in comments)

"""Hostile text and huge bodies against a running server's board API and ``/mcp/``.

Not a test: a probe of a live server (``clawboo up``), run by hand::

    FUZZ_DB=$STATE/clawboo.sqlite3 python -m bench.fuzz_hostile http://127.0.0.1:8125 \\
        staff=KEY member=KEY agent=KEY

Each credential sends every payload to every target. A request fails the run when it
answers 5xx, when an error under ``/api/`` is not the envelope, when a 4xx wrote to
the database (a fingerprint of every table before and after, as
``bench.fuzz_hooks``), or when ``/mcp/`` answers something other than JSON-RPC.
Prints one line per failure and the counts.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from typing import Any

from bench.fuzz_hooks import fingerprint

MB = 1024 * 1024
SLOW_S = 3.0  # one request holding a server thread this long is a finding
TEXTS: dict[str, str] = {
    "rtl": "\u202egnp.exe\u200f\u200e\u2066x\u2069",
    "zero-width": "a\u200b\u200c\u200d\ufeffb",
    "emoji": "👩‍💻🏳️‍🌈" * 50,
    "combining": "Z" + "\u0335\u0336\u0337" * 300,
    "nul": "a\x00b",
    "controls": "".join(chr(c) for c in range(1, 32)),
    "lone-surrogate": "\ud800",
    "noncharacter": "\ufffe\uffff\U0010ffff",
    "one-mb": "x" * MB,
    # Its JSON escapes are 12 bytes an emoji: 1 MB of them, under the 2 MiB limit.
    "one-mb-emoji": "😀" * (MB // 12),
}


def raw_bodies() -> Iterator[tuple[str, bytes]]:
    """Bodies that are no JSON a client library would write."""
    yield "nested-1000", b"[" * 1000 + b"]" * 1000
    yield "nested-obj-40", b'{"a":' * 40 + b"1" + b"}" * 40
    yield "wide-array", json.dumps({"title": "w", "labels": ["l"] * 200_000}).encode()
    yield "many-keys", json.dumps({f"k{i}": i for i in range(100_000)}).encode()
    # Long lists of distinct items: each costs its cap, never its length (issue: a
    # list deduplicated by scanning itself, one query per id).
    many = [f"x{i}" for i in range(150_000)]
    yield "long-depends-on", json.dumps({"title": "d", "depends_on": many}).encode()
    yield "long-labels", json.dumps({"title": "l", "labels": many}).encode()
    yield "long-touches", json.dumps({"title": "t", "touches": many}).encode()
    yield "wide-metadata", json.dumps({"title": "m", "metadata": {k: k for k in many}}).encode()
    yield "long-route", json.dumps({"title": "r", "route": {"labels": many}}).encode()
    yield "huge-number", b'{"title": "n", "priority": 1e400}'
    yield "big-int", b'{"title": "n", "priority": 100000000000000000000000000000}'
    yield "nan", b'{"title": "n", "priority": NaN}'
    yield "dup-keys", b'{"title": "a", "title": "b"}'
    yield "bom", b'\xef\xbb\xbf{"title": "bom"}'
    yield "bad-utf8", b'{"title": "\xff\xfe"}'
    yield "over-limit", json.dumps({"title": "x" * (2 * MB + 10)}).encode()
    yield "not-object", b'"just a string"'
    yield "empty", b""


class Probe:
    def __init__(self, base: str, keys: dict[str, str]) -> None:
        self.base, self.keys = base, keys
        self.requests = 0
        self.failures: Counter[str] = Counter()
        self.statuses: Counter[tuple[str, int]] = Counter()
        self.lines: list[str] = []

    def send(self, who: str, method: str, path: str, body: bytes, label: str) -> tuple[int, bytes]:
        headers = {"Authorization": f"Token {self.keys[who]}", "Content-Type": "application/json"}
        if path.startswith("/mcp"):
            headers["Accept"] = "application/json, text/event-stream"
        request = urllib.request.Request(  # noqa: S310 - a loopback server under test
            self.base + path, data=body, headers=headers, method=method
        )
        before = fingerprint()
        self.requests += 1
        started = time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310
                status, payload = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, payload = exc.code, exc.read()
        except OSError as exc:
            self.fail("connection", who, method, path, label, repr(exc))
            return 0, b""
        took = time.monotonic() - started
        if took > SLOW_S:
            self.fail("slow", who, method, path, label, f"{status} in {took:.1f} s")
        self.statuses[(path if path.startswith("/mcp") else method + " " + path, status)] += 1
        if status >= 500:
            self.fail("5xx", who, method, path, label, f"{status} {payload[:200]!r}")
        if path.startswith("/api/") and status >= 400 and not envelope(payload):
            self.fail("not-envelope", who, method, path, label, f"{status} {payload[:200]!r}")
        if 400 <= status < 500 or (path.startswith("/mcp") and tool_refused(payload)):
            after = fingerprint()
            changed = sorted(t for t in set(before) | set(after) if before.get(t) != after.get(t))
            if changed:
                self.fail("4xx-wrote", who, method, path, label, f"{status} wrote {changed}")
        if path.startswith("/mcp") and status < 500 and not jsonrpc(payload):
            self.fail("mcp-not-jsonrpc", who, method, path, label, f"{status} {payload[:200]!r}")
        return status, payload

    def fail(self, kind: str, *what: str) -> None:
        self.failures[kind] += 1
        self.lines.append(f"{kind}: " + " ".join(what))

    def run(self) -> None:
        for who in self.keys:
            for label, text in TEXTS.items():
                for method, path, body in rest_targets(text):
                    self.send(who, method, path, dumps(body), label)
                for tool, arguments in mcp_targets(text):
                    call = {
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "tools/call",
                        "params": {"name": tool, "arguments": arguments},
                    }
                    self.send(who, "POST", "/mcp/", dumps(call), f"{label} {tool}")
            for label, body in raw_bodies():
                for path in ("/api/board/tasks", "/api/board/tasks/alpha-task/comments"):
                    self.send(who, "POST", path, body, label)
                self.send(who, "PATCH", "/api/board/tasks/alpha-task", body, label)
                self.send(who, "POST", "/mcp/", body, label)


def dumps(body: Any) -> bytes:
    # ensure_ascii: a lone surrogate goes out as its \\ud800 escape, as a hostile
    # client would write it (it has no UTF-8 form).
    return json.dumps(body).encode()


def rest_targets(text: str) -> list[tuple[str, str, Any]]:
    return [
        ("POST", "/api/board/tasks", {"title": text, "team": "alpha"}),
        ("POST", "/api/board/tasks", {"title": "t", "description": text, "team": "alpha"}),
        ("POST", "/api/board/tasks", {"title": "t", "labels": [text], "metadata": {text: text}}),
        ("POST", "/api/board/tasks", {"title": "t", "team": "beta", "description": text}),
        ("PATCH", "/api/board/tasks/alpha-task2", {"title": text}),
        ("PATCH", "/api/board/tasks/beta-task", {"title": text}),
        ("POST", "/api/board/tasks/alpha-task/comments", {"body": text}),
        ("POST", "/api/board/tasks/beta-task/comments", {"body": text}),
        ("POST", "/api/teams/alpha/chat", {"body": text}),
        ("POST", "/api/board/tasks/alpha-task2/claim", {"agent_id": text}),
        ("POST", "/api/board/claim-next", {"agent_id": "alpha-bot", "label": text}),
        ("POST", "/api/board/tasks/alpha-task/fail", {"error": text}),
        ("POST", "/api/board/tasks/alpha-task2/deps", {"depends_on": text}),
    ]


def mcp_targets(text: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("create_task", {"title": text}),
        ("create_task", {"title": "t", "description": text, "labels": [text]}),
        ("create_task", {"title": "t", "team": "beta"}),
        ("comment", {"task_id": "alpha-task", "body": text}),
        ("comment", {"task_id": "beta-task", "body": text}),
        ("get_task", {"task_id": text}),
        ("list_tasks", {"label": text}),
        ("write_handoff", {"task_id": "alpha-task", "handoff": {"next": text, text: 1}}),
        ("fail_task", {"task_id": "alpha-task", "error": text}),
        ("permission_prompt", {"tool_name": text, "input": {"x": text}, "tool_use_id": text}),
    ]


def envelope(payload: bytes) -> bool:
    try:
        body = json.loads(payload)
    except ValueError:
        return False
    return (
        isinstance(body, dict)
        and isinstance(body.get("error"), str)
        and isinstance(body.get("detail"), str)
    )


def tool_refused(payload: bytes) -> bool:
    """An MCP answer that is a refusal: a JSON-RPC error, or a tool result marked
    ``isError`` (the tools' refusals travel in a 200)."""
    try:
        body = json.loads(payload)
    except ValueError:
        return False
    if not isinstance(body, dict):
        return False
    result = body.get("result")
    return "error" in body or (isinstance(result, dict) and bool(result.get("isError")))


def jsonrpc(payload: bytes) -> bool:
    if not payload:
        return True  # 202 for a notification
    try:
        body = json.loads(payload)
    except ValueError:
        return False
    return isinstance(body, dict) and ("jsonrpc" in body or "error" in body)


def main(argv: list[str]) -> int:
    base, *pairs = argv
    keys = dict(pair.split("=", 1) for pair in pairs)
    probe = Probe(base.rstrip("/"), keys)
    probe.run()
    for line in probe.lines:
        print(line)
    for (target, status), count in sorted(probe.statuses.items()):
        print(f"  {status} x{count} {target}")
    print(f"requests {probe.requests}; failures {dict(probe.failures) or 0}")
    return 1 if probe.failures else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

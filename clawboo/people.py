"""``clawboo`` for people: a thin client of the REST API, like ``clawboo worker``.

``clawboo login --server URL`` trades the user's own credential (username and
password, through ``POST /api/auth/token``, or a pasted key) for their API key and
keeps it 0600 in the user's config dir (``$XDG_CONFIG_HOME/clawboo``, else
``~/.config/clawboo``). Then ``task list|show|create|edit|move|comment|claim|
approve|deny|wait``, ``agent list|pause|resume``, ``budget list|resume``, ``review``,
``approvals`` and ``watch`` call the API with it:
a table by default, ``--json`` for scripts. An error is one line on stderr with the
API's code and detail, and exit status 1 (2 for a usage error).

Like the worker, it never sets Django up and never opens the database: it holds a
URL and a key, nothing else (:class:`executor.remote.Api` is the HTTP client).
``CLAWBOO_SERVER`` and ``CLAWBOO_TOKEN`` in the environment win over the stored login.
"""

from __future__ import annotations

import argparse
import getpass
import json
import logging
import os
import re
import sys
import time
import urllib.parse
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from board.judgement import NONE_CONFIGURED
from board.transitions import TERMINAL
from executor.rest import Api, ApiError, Revoked

LOGIN_PATH = "/api/auth/token"
COMMANDS = (
    "login", "logout", "whoami", "task", "agent", "budget", "review", "approvals", "watch",
)  # fmt: skip
STATUSES = ("backlog", "todo", "in_progress", "in_review", "blocked", "done", "cancelled")
TASK_COLUMNS = ("id", "status", "priority", "assignee_agent_id", "title")
APPROVAL_COLUMNS = ("id", "kind", "team", "task_id", "agent_id", "what", "state")
AGENT_COLUMNS = ("id", "team", "runtime", "state", "why")
BUDGET_COLUMNS = ("id", "team", "scope", "window", "limit", "spent", "state", "resumes")
# A budget's window, as a sentence says it.
WINDOWS = {"day": "today", "month": "this month", "total": "in total"}
# The API's fields a command's option or argument is named otherwise: a refusal naming
# the field ("lease_ms: must be between …") says the option too.
OPTIONS_OF_FIELDS = {
    "body": "TEXT",
    "agent_id": "--agent",
    "author": "--as",
    "labels": "--label",
    "lease_ms": "--lease-ms",
    "depends_on": "--depends-on",
    "grace_cents": "--grace",
    "limit": "--limit",
}
# What `approvals --decide ID DECISION` may answer (the API's tool-approval decisions).
TOOL_DECISIONS = ("allow_once", "allow_always", "deny")


class Failure(Exception):
    """One line for stderr, and the exit status."""

    def __init__(self, line: str, status: int = 1, *, unreachable: bool = False) -> None:
        super().__init__(line)
        self.line = line
        self.status = status
        # The server did not answer (stopped, restarting): a wait may wait it out.
        self.unreachable = unreachable


# -- the stored login ------------------------------------------------------------


def config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "clawboo"


def credentials_path() -> Path:
    return config_dir() / "credentials.json"


def save_login(server: str, token: str, username: str) -> Path:
    folder = config_dir()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = credentials_path()
    # Created 0600 before the key is written: never readable by others, not even briefly.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump({"server": server, "token": token, "username": username}, out)
        out.write("\n")
    return path


def stored_login_file() -> dict[str, str]:
    """What ``clawboo login`` stored, without the environment's say ({} for none)."""
    try:
        found = json.loads(credentials_path().read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(found, dict):
        return {}
    return {k: v for k, v in found.items() if isinstance(v, str)}


def stored_login() -> dict[str, str]:
    found = stored_login_file()
    server = os.environ.get("CLAWBOO_SERVER") or found.get("server") or ""
    token = os.environ.get("CLAWBOO_TOKEN") or found.get("token") or ""
    return {"server": server, "token": token, "username": found.get("username", "")}


def checked_server(url: str, where: str = "--server") -> str:
    """``url`` if it is an http(s) URL; else a usage error naming where it came from
    (``--server``, or ``CLAWBOO_SERVER``: no option was given) and, for a bare
    ``host:port``, the URL meant."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        meant = urllib.parse.urlsplit(f"http://{url}")
        hint = (
            f" (did you mean 'http://{url}'?)" if url and meant.hostname and "/" not in url else ""
        )
        raise Failure(f"clawboo: {where} must be an http(s) URL, not {url!r}{hint}", 2)
    return url.rstrip("/")


def server_source() -> str:
    """Where the server's URL of a command comes from: the environment wins."""
    return "CLAWBOO_SERVER" if os.environ.get("CLAWBOO_SERVER") else "the stored login's server"


class Client:
    """The API with the stored login; every refusal becomes a :class:`Failure`."""

    def __init__(self, server: str, token: str) -> None:
        self.server = server
        self.token = token
        self.api = Api(server, token)

    @classmethod
    def from_login(cls) -> Client:
        login = stored_login()
        if not login["server"] or not login["token"]:
            raise Failure("clawboo: not logged in: run `clawboo login --server URL` first")
        return cls(checked_server(login["server"], server_source()), login["token"])

    def refused(self, path: str) -> str:
        """Why a 401, and the next step: a key from the environment is the one to
        change; a stored one is replaced by logging in again."""
        if path == LOGIN_PATH:
            return "wrong username or password"
        if os.environ.get("CLAWBOO_TOKEN"):
            return "the key was refused (revoked, or for another server): CLAWBOO_TOKEN holds it"
        return (
            "the key was refused (revoked, or for another server):"
            f" log in again with `clawboo login --server {self.server}`"
        )

    def not_the_api(self, answered: str) -> Failure:
        """A server answered, but not Clawboo's API: a URL with a path (the board's
        page), another port's web server. It printed the page's HTML as the "detail"
        of a 404, or a JSON parser's traceback for a page answered 200."""
        return Failure(
            f"clawboo: {self.server} answered {answered}, not Clawboo's API: check the URL"
            " (the address `clawboo up` printed, with no path: e.g. http://127.0.0.1:8000)"
        )

    def call(self, method: str, path: str, body: Any = None) -> Any:
        try:
            return self.api.call(method, path, body)[1]
        except Revoked:
            raise Failure(f"clawboo: 401 unauthenticated: {self.refused(path)}") from None
        except ValueError:  # a 2xx whose body is no JSON (json.JSONDecodeError)
            raise self.not_the_api("a page that is not JSON") from None
        except ApiError as exc:
            if not isinstance(exc.body, dict) or "error" not in exc.body:
                # The API's every refusal is its JSON envelope: without one, a proxy
                # failed (5xx) or the URL leads elsewhere.
                if exc.status >= 500:
                    raise Failure(
                        f"clawboo: {self.server} answered HTTP {exc.status}: the server, or a"
                        " proxy before it, failed; try again, or see the server's logs"
                    ) from None
                raise self.not_the_api(f"HTTP {exc.status}") from None
            body = exc.body
            code = body.get("error", "error")
            detail = one_line(shown(body.get("detail") or str(exc.body)))
            allowed = body.get("allowed")
            if isinstance(allowed, list):
                # What to do next: an illegal move's detail named only the move refused.
                detail += f" (allowed: {', '.join(shown(str(a)) for a in allowed) or 'none'})"
            field = detail.split(":", 1)[0]
            if code == "validation_error" and field in OPTIONS_OF_FIELDS:
                detail += f"; here: {OPTIONS_OF_FIELDS[field]}"
            raise Failure(f"clawboo: {exc.status} {shown(code)}: {detail}") from None
        except OSError as exc:
            raise self.unreachable(exc, exc.__cause__) from None

    def unreachable(self, exc: BaseException, cause: BaseException | None) -> Failure:
        hint = ""
        if isinstance(cause, ConnectionRefusedError):
            # What to check: the server stopped, or `up` was given another port.
            hint = " (nothing listens there: is `clawboo up` running, and on that port?)"
        return Failure(f"clawboo: cannot reach {self.server}: {exc}{hint}", unreachable=True)


def given(raw: str) -> str:
    """An argument's value, refused when empty or blank (a usage error): an unset
    shell variable (``--team "$TEAM"``) listed every team's tasks, watched no team
    forever, or reached the API as a path it does not have ("no such path")."""
    if not raw.strip():
        raise argparse.ArgumentTypeError("is empty (an unset shell variable?): give a value")
    return raw


def one_line(text: Any) -> str:
    return " ".join(str(text).split())


def quote(value: str) -> str:
    return urllib.parse.quote(value, safe="")


# -- output ------------------------------------------------------------------------

# What a terminal obeys rather than shows: C0 controls but tab and newline (a CR only
# alone: CRLF ends a line), DEL, C1 (0x9b is a CSI too), and the bidi embeddings,
# overrides and isolates that reorder what follows them.
CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]|\r(?!\n)")


def shown(value: Any) -> Any:
    """The server's data, fit for a terminal: every string with its control characters
    written as escapes (``\\x1b``). Titles, comments and diffs are other people's and
    agents' text; printed raw, an escape in one would erase the diff line a person is
    about to approve, retitle the window or fake a line. ``--json`` needs none of this
    (``json.dumps`` escapes them)."""
    if isinstance(value, str):
        return CONTROLS.sub(
            lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}", value
        )
    if isinstance(value, list):
        return [shown(v) for v in value]
    if isinstance(value, dict):
        return {shown(k): shown(v) for k, v in value.items()}
    return value


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list):
        return ",".join(str(v) for v in value) or "-"
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    return one_line(value)


def table(rows: Sequence[dict[str, Any]], columns: Sequence[str], *, width: int = 60) -> str:
    """Left-aligned columns, upper-case headers; a long cell is cut with an ellipsis."""
    cells = [[cell(row.get(c)) for c in columns] for row in rows]
    cells = [[c if len(c) <= width else c[: width - 1] + "…" for c in line] for line in cells]
    heads = [c.upper().replace("_AGENT_ID", "").replace("_ID", "") for c in columns]
    widths = [max([len(h)] + [len(line[i]) for line in cells]) for i, h in enumerate(heads)]
    out = ["  ".join(h.ljust(w) for h, w in zip(heads, widths, strict=True)).rstrip()]
    for line in cells:
        out.append("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())
    return "\n".join(out) + "\n"


def emit(args: argparse.Namespace, data: Any, human: Callable[[Any], str]) -> None:
    if args.json:
        sys.stdout.write(json.dumps(data, indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write(human(shown(data)))


# Why a task's run works where the server says (its read's run_repository.source).
RUN_REPOSITORY_SOURCES = {
    "task": "",
    "task_repo_path": "the task's repo_path",
    "task_repo_remote": "the task's repo_remote",
    "agent_default": "its agent's default",
    "agent_repo_path": "its agent's repo_path",
    "agent_repo_remote": "its agent's repo_remote",
}


def repository_text(task: dict[str, Any]) -> str | None:
    """Where the task's run will work, as the server answers it (a task's read carries
    ``run_repository``, the claim's own answer) -- and why, when it is not the task's
    own: a task naming none works in its agent's default, and said nothing here."""
    where = task.get("run_repository")
    if not isinstance(where, dict):
        return task.get("repository")  # a server before run_repository
    why = RUN_REPOSITORY_SOURCES.get(str(where.get("source")), "")
    named = where.get("id") or where.get("remote")
    if named:
        return f"{named} ({why})" if why else str(named)
    if why:  # a bare path: an agent's registers on its first local run
        return f"an unregistered path ({why})"
    if not task.get("assignee_agent_id"):
        return "none named (the claiming agent's default, if it has one)"
    return "none (its run works in a scratch directory)"


def task_card(task: dict[str, Any]) -> str:
    fields = [
        ("id", task.get("id")),
        ("title", task.get("title")),
        ("team", task.get("team")),
        ("status", task.get("status")),
        ("priority", task.get("priority")),
        ("labels", task.get("labels")),
        ("assignee", task.get("assignee_agent_id")),
        ("repository", repository_text(task)),
        ("route", task.get("route")),
        ("depends on", task.get("depends_on")),
        ("approval", (task.get("approval") or {}).get("state")),
        # What `task approve|deny --revision N` names: "the revision you read in task show".
        ("revision", task.get("revision")),
        ("verdict", verdict_text(task.get("verification"))),
        ("cents", (task.get("cost") or {}).get("cents")),
        ("error", task.get("error")),
        ("feedback", task.get("feedback")),
        ("updated", task.get("updated_at")),
    ]
    lines = [f"{name + ':':<12} {cell(value)}" for name, value in fields if value not in (None, "")]
    if task.get("description"):
        lines += ["", str(task["description"])]
    return "\n".join(lines) + "\n"


# -- login -------------------------------------------------------------------------


def cmd_login(args: argparse.Namespace) -> int:
    if not (args.server or stored_login()["server"]):
        # The first login: "--server must be an http(s) URL, not ''" named no option given.
        raise Failure(
            "clawboo: login needs --server URL, the address `clawboo up` printed"
            " (e.g. http://127.0.0.1:8000)",
            2,
        )
    server = checked_server(args.server or stored_login()["server"], login_source(args))
    if args.token is not None:
        from_stdin = args.token == "-"  # noqa: S105 - the stdin marker, not a key
        token = sys.stdin.readline().strip() if from_stdin else args.token
    else:
        if args.password_stdin and not args.username:
            # The prompt would read the piped password as the username, and the login
            # fail as "wrong username or password".
            raise Failure(
                "clawboo: --password-stdin needs --username (stdin holds the password)", 2
            )
        username = (args.username or asked("username: ", input) or "").strip()
        if not username:
            raise Failure(f"clawboo: login needs a username: {NO_PROMPT_ANSWER}", 2)
        if args.password_stdin:
            password: str | None = sys.stdin.readline().rstrip("\n")
        else:
            password = asked("password: ", getpass.getpass)
        if password is None:
            raise Failure(f"clawboo: login needs a password: {NO_PROMPT_ANSWER}", 2)
        answer = Client(server, "").call(
            "POST", LOGIN_PATH, {"username": username, "password": password}
        )
        token = answer["token"]
    if not token:
        raise Failure("clawboo: no token given", 2)
    try:
        me = shown(Client(server, token).call("GET", "/api/whoami"))
    except Failure as exc:
        if not exc.line.startswith("clawboo: 401 "):
            raise
        # Not "log in again with `clawboo login`": this is the login, with the key given.
        raise Failure(
            f"clawboo: 401 unauthenticated: {server} refused the key given"
            " (mistyped, revoked, or minted by another server)"
        ) from None
    path = save_login(server, token, me["username"])
    emit(
        args,
        {"server": server, "credentials": str(path), "whoami": me},
        lambda _: f"logged in to {server} as {who(me)} (key in {path})\n",
    )
    if agent_side(me):
        sys.stderr.write(f"clawboo: note: {agent_side(me)}\n")
    return 0


# What a login with no terminal to answer its prompts is given instead.
NO_PROMPT_ANSWER = (
    "give --username U --password-stdin (the password on stdin), or --token - (a key on stdin)"
)


def login_source(args: argparse.Namespace) -> str:
    if args.server:
        return "--server"
    return server_source()


def asked(prompt: str, ask: Callable[[str], str]) -> str | None:
    """A prompt's answer; None when stdin ended (Ctrl-D, or a script's closed stdin),
    which had ended the login in an EOFError's traceback."""
    try:
        return ask(prompt)
    except EOFError:
        sys.stderr.write("\n")  # the prompt's line, ended
        return None


def who(me: dict[str, Any]) -> str:
    """Whose key it is: an agent's key authenticates as its owner, and "as ada" read
    like ada's own key, which approves what the agent's key is refused."""
    if me.get("principal") in ("agent", "reviewer"):
        return f"{me['username']} through agent {me.get('agent')}'s key"
    if me.get("principal") == "machine":
        # Its service user's name ("machine-25d4…") says nothing a person knows.
        return f"a machine token for {', '.join(me.get('agents') or []) or 'no agent'}"
    return str(me["username"])


def agent_side(me: dict[str, Any]) -> str:
    """What a key of the agent side cannot do, and where the person's own key is."""
    if me.get("principal") not in ("agent", "reviewer", "machine"):
        return ""
    return (
        "this key is the agent side (GOVERNANCE §6): approving, deciding and resuming are"
        " refused with it; a person logs in with their own key (an operator prints it:"
        " `clawboo create_agent_token USERNAME`) or their password"
    )


def cmd_logout(args: argparse.Namespace) -> int:
    path = credentials_path()
    if not path.exists():
        emit(args, {"removed": None}, lambda _: f"not logged in (no {path})\n")
        return 0
    path.unlink(missing_ok=True)
    emit(args, {"removed": str(path)}, lambda _: f"logged out (removed {path})\n")
    return 0


def cmd_whoami(args: argparse.Namespace) -> int:
    me = Client.from_login().call("GET", "/api/whoami")
    emit(
        args,
        me,
        lambda m: (
            f"{who(m)}{' (staff)' if m.get('staff') else ''} on "
            f"{', '.join(m['teams']) if m.get('teams') is not None else 'every team'}\n"
            + (f"{agent_side(m)}\n" if agent_side(m) else "")
        ),
    )
    return 0


# -- tasks -------------------------------------------------------------------------


def task_path(task_id: str, tail: str = "") -> str:
    return f"/api/board/tasks/{quote(task_id)}{tail}"


def cmd_task_list(args: argparse.Namespace) -> int:
    query = {
        k: v
        for k, v in (
            ("team", args.team),
            ("status", args.status),
            ("assignee", args.assignee),
            ("label", args.label),
            ("limit", str(args.limit)),
        )
        if v
    }
    if args.ready:
        query["ready"] = "true"
    client = Client.from_login()
    answer = client.call("GET", "/api/board/tasks?" + urllib.parse.urlencode(query))
    if args.team and not answer["results"]:
        # The list filters by team: a team that does not exist (or is not yours) would
        # read as an empty board. Its own answer says which (404, as watch says).
        client.call("GET", f"/api/teams/{urllib.parse.quote(args.team, safe='')}")
    # Tasks of several teams (no --team, and you see more than one): which team each is
    # in, or two teams' "Fix login" read as one task listed twice.
    teams = {task.get("team") for task in answer["results"]}
    emit(args, answer["results"], lambda rows: task_table(rows, team=len(teams) > 1))
    if answer.get("next") and not args.json:
        # The first page only: say so, or a person takes it for all there is.
        sys.stderr.write(
            f"… more tasks than the {len(answer['results'])} shown: raise --limit, or narrow"
            " with --team, --status, --assignee or --label\n"
        )
    return 0


def cmd_task_show(args: argparse.Namespace) -> int:
    task = Client.from_login().call("GET", task_path(args.id))
    emit(args, task, task_card)
    return 0


def task_fields(args: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {}
    for name in ("title", "description", "priority", "repository"):
        value = getattr(args, name, None)
        if value is not None:
            body[name] = value
    if getattr(args, "label", None):
        body["labels"] = args.label
    if getattr(args, "verify_cmd", None):
        body["metadata"] = {"verify_cmd": args.verify_cmd}
    return body


def cmd_task_create(args: argparse.Namespace) -> int:
    body = task_fields(args)
    if args.team:
        body["team"] = args.team
    if args.depends_on:
        body["depends_on"] = args.depends_on
    if args.backlog:
        body["status"] = "backlog"
    task = Client.from_login().call("POST", "/api/board/tasks", body)
    # Its team, said: filed without --team it goes to your default team, where the
    # agents at work (the demo's, say) may not be.
    emit(args, task, lambda filed: task_table(filed, team=True))
    return 0


def cmd_task_edit(args: argparse.Namespace) -> int:
    body = task_fields(args)
    if not body:
        raise Failure("clawboo: task edit: nothing to change (give --title, --priority …)", 2)
    client = Client.from_login()
    if "metadata" in body:  # a PATCH replaces metadata whole: keep what else it holds
        current = client.call("GET", task_path(args.id))
        body["metadata"] = {**(current.get("metadata") or {}), **body["metadata"]}
    task = client.call("PATCH", task_path(args.id), body)
    emit(args, task, task_table)
    return 0


def cmd_task_move(args: argparse.Namespace) -> int:
    client = Client.from_login()
    if args.status == "done" and client.call("GET", task_path(args.id)).get("status") == (
        "in_review"
    ):
        # As the board's and the console's "done" on a task in review: approve, which
        # lands its change. A plain transition left it on its branch and said "done".
        return _land(client, args)
    body: dict[str, Any] = {"to": args.status}
    if args.agent:
        body["agent_id"] = args.agent
    if args.override:
        body["human_override"] = {"reason": args.override}
    try:
        task = client.call("POST", task_path(args.id, "/transition"), body)
    except Failure as exc:
        if " claim_required: " in exc.line and not args.agent:
            # The API names its field (agent_id); here it is an option.
            raise Failure(f"{exc.line}; here: --agent A", exc.status) from None
        raise
    emit(args, task, task_table)
    return 0


def cmd_task_comment(args: argparse.Namespace) -> int:
    body = {"body": args.text}
    if args.as_agent:
        body["author"] = args.as_agent
    comment = Client.from_login().call("POST", task_path(args.id, "/comments"), body)
    emit(args, comment, lambda c: f"commented on {args.id} as {c.get('author', '?')}\n")
    return 0


def cmd_task_claim(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"agent_id": args.agent}
    if args.lease_ms:
        body["lease_ms"] = args.lease_ms
    answer = Client.from_login().call("POST", task_path(args.id, "/claim"), body)
    emit(
        args,
        answer,
        lambda a: task_table(a["task"]) + f"ticket: {a['ticket']}\n",
    )
    return 0


def waiting_for_approval(task: dict[str, Any]) -> bool:
    return (task.get("approval") or {}).get("state") in ("required", "denied", "expired")


# The statuses a task waits for approval in: the board's "Needs approval" column
# (board.store.approvals.awaiting_filter).
WAITING_STATUSES = frozenset({"backlog", "todo", "blocked"})


def listed(task: dict[str, Any]) -> dict[str, Any]:
    """A task as its list row shows it: one waiting for a person says so beside its
    status, which alone ("todo") read as work about to start."""
    if waiting_for_approval(task) and task.get("status") in WAITING_STATUSES:
        state = task["approval"]["state"]
        return {**task, "status": f"{task['status']} (approval {state})"}
    return task


def task_table(tasks: dict[str, Any] | Sequence[dict[str, Any]], *, team: bool = False) -> str:
    """Tasks as a table, each row as :func:`listed` says it (a task filed, edited or
    waited for as its list shows it: "todo (approval required)", not "todo"); with
    ``team``, a TEAM column after the id."""
    rows = [tasks] if isinstance(tasks, dict) else tasks
    columns = (TASK_COLUMNS[0], "team", *TASK_COLUMNS[1:]) if team else TASK_COLUMNS
    return table([listed(t) for t in rows], columns)


def _revision_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--revision",
        type=int,
        help="of a start: the task revision you read; refused if it changed since",
    )


def _decide(client: Client, args: argparse.Namespace, decision: str) -> dict[str, Any]:
    """A person's decision on a task waiting for approval before it starts."""
    body: dict[str, Any] = {"decision": decision}
    if args.reason:
        body["reason"] = args.reason
    if args.revision is not None:
        body["revision"] = args.revision
    return client.call("POST", task_path(args.id, "/approval"), body)


def cmd_task_approve(args: argparse.Namespace) -> int:
    """Approve what the task waits for: its landing (in review) or its start."""
    client = Client.from_login()
    task = client.call("GET", task_path(args.id))
    if task.get("status") != "in_review" and waiting_for_approval(task):
        done = _decide(client, args, "approve")
        emit(args, done, lambda t: f"approved {t['id']}: it may start now\n")
        return 0
    if task.get("status") != "in_review":
        # The landing's refusal answered "cannot move from todo to done": a move no one
        # asked for, of a task that waits for no one.
        state = (task.get("approval") or {}).get("state")
        started = f" (its start was {state})" if state else ""
        raise Failure(
            f"clawboo: {shown(args.id)} is {shown(task.get('status'))}{started}: nothing waits"
            " for approval (approve lands a task in review, or lets a task waiting for"
            " approval start)"
        )
    return _land(client, args)


def _land(client: Client, args: argparse.Namespace) -> int:
    """Approve the task's change in review: it lands (or queues, or conflicts)."""
    land: dict[str, Any] = {}
    if args.override:
        land["human_override"] = {"reason": args.override}
    answer = client.call("POST", task_path(args.id, "/approve"), land)
    emit(args, answer, landed_line)
    return 0 if answer.get("result") != "conflict" else 1


def landed_line(answer: dict[str, Any]) -> str:
    result = answer.get("result")
    task = answer.get("task") or {}
    if result == "landed":
        push = answer.get("push") or {}
        failed = (
            f"; but the push of {push.get('branch')} to {push.get('remote')} failed: "
            f"{one_line(push.get('error') or 'unknown error')}"
            if push and not push.get("pushed")
            else ""
        )
        return (
            f"landed {task.get('id')} on {answer.get('base_branch')} as "
            f"{(answer.get('commit') or '')[:12]} ({answer.get('strategy')}){failed}\n"
        )
    if result == "conflict":
        paths = ", ".join(answer.get("conflicts") or [])
        return f"not landed: conflicts in {paths}; sent to {answer.get('sent')}\n"
    if result == "queued":
        return (
            f"queued {task.get('id')}: position {answer.get('position')} in the merge queue; "
            "it lands once the stacked change passes the gate\n"
        )
    return f"{result}: {task.get('id')} is {task.get('status')}\n"


def cmd_task_deny(args: argparse.Namespace) -> int:
    """Deny a task waiting for approval; a task in review: request changes."""
    client = Client.from_login()
    task = client.call("GET", task_path(args.id))
    if task.get("status") == "in_review":
        if not args.reason:
            raise Failure("clawboo: task deny: a task in review needs --reason (the feedback)", 2)
        feedback = {"feedback": args.reason}
        done = client.call("POST", task_path(args.id, "/request-changes"), feedback)
        emit(args, done, lambda t: f"changes requested: {t['id']} is {t['status']}\n")
        return 0
    if not (task.get("approval") or {}).get("state"):
        # A task that never waited for approval (one approved may still be denied): the
        # API's "409 conflict: task 'x' needs no approval" said nothing of what deny
        # does, nor what to use instead.
        stop = (
            f"; to stop it: `clawboo task move {shown(args.id)} cancelled`"
            if task.get("status") not in TERMINAL
            else ""
        )
        raise Failure(
            f"clawboo: {shown(args.id)} is {shown(task.get('status'))}: nothing waits for"
            " approval (deny refuses a start waiting for approval, or sends a task in review"
            f" back with --reason{stop})"
        )
    done = _decide(client, args, "deny")
    emit(args, done, lambda t: f"denied {t['id']}\n")
    return 0


def cmd_task_wait(args: argparse.Namespace) -> int:
    """Until the task reaches one of the statuses (polled every 0.2 s), or time runs out."""
    client = Client.from_login()
    wanted = set(args.status)
    deadline = time.monotonic() + args.timeout
    # A person at a terminal sees where the task is while it takes its time (an agent's
    # run can take minutes); a script's stderr is left alone.
    progress = sys.stderr.isatty()
    seen = None
    away = False
    while True:
        try:
            task = client.call("GET", task_path(args.id))
        except Failure as exc:
            # `up` restarted (or stopped) while a person waits minutes for an agent's run:
            # the wait lasts until its timeout, as the task's work does, not one refused
            # connection.
            if not exc.unreachable or time.monotonic() >= deadline:
                raise
            if not away:
                sys.stderr.write(f"{exc.line}; retrying until the timeout\n")
            away = True
            time.sleep(1.0)
            continue
        if away:
            sys.stderr.write(f"reached {client.server} again\n")
            away = False
        if progress and task.get("status") != seen and task.get("status") not in wanted:
            seen = task.get("status")
            sys.stderr.write(
                f"{shown(args.id)} is {shown(seen)}; waiting for {'|'.join(args.status)}"
                f" (up to {args.timeout:g} s, Ctrl-C to stop)\n"
            )
        if task.get("status") in wanted:
            emit(args, task, task_table)
            return 0
        if task.get("status") in TERMINAL:
            # Done and cancelled are never left: waiting out the timeout (300 s by
            # default) would only end in the same answer.
            raise Failure(
                f"clawboo: {args.id} is {task.get('status')}, which a task never leaves: "
                f"it will not reach {'|'.join(args.status)}"
            )
        if time.monotonic() >= deadline:
            # A blocked task moves again only when a person moves it: the wait ended
            # on "is blocked", and nothing said why or what to do.
            stuck = (
                f"; a blocked task waits for a person: `clawboo task show {args.id}` says"
                f" why, `clawboo task move {args.id} todo` tries it again"
                if task.get("status") == "blocked"
                else ""
            )
            raise Failure(
                f"clawboo: timeout: {args.id} is {task.get('status')} after {args.timeout:g} s"
                + stuck
            )
        time.sleep(0.2)


# -- review ------------------------------------------------------------------------


def landed_lines(landing: dict[str, Any]) -> list[str]:
    """Where an approved task's work is now: a done task's review read like one still
    waiting on its branch, which names no commit."""
    if landing.get("result") != "landed" or not landing.get("commit"):
        return []
    by = f" (approved by {landing['by']})" if landing.get("by") else ""
    return [f"landed as {str(landing['commit'])[:12]} on {landing.get('base_branch') or '?'}{by}"]


def review_text(review: dict[str, Any], task: dict[str, Any], color: bool) -> str:
    def paint(line: str) -> str:
        if not color:
            return line
        if line.startswith("+") and not line.startswith("+++"):
            return f"\033[32m{line}\033[0m"
        if line.startswith("-") and not line.startswith("---"):
            return f"\033[31m{line}\033[0m"
        if line.startswith("@@"):
            return f"\033[36m{line}\033[0m"
        return line

    workspace = review.get("workspace") or {}
    verification = review.get("verification") or task.get("verification") or {}
    out = [
        f"{task.get('id')}: {task.get('title')}  [{task.get('status')}]",
        (
            f"branch {workspace.get('branch')} → {workspace.get('base_branch')}"
            if workspace.get("branch")
            else "branch - (no worktree: nothing was worked in git yet)"
        ),
        *landed_lines(workspace.get("landing") or {}),
        f"verdict {verdict_text(verification) or '-'}",
        f"cost {(review.get('cost') or {}).get('cents', 0)}¢",
    ]
    for finding in verification.get("findings") or []:
        where = f" {finding.get('file')}:{finding.get('line')}" if finding.get("file") else ""
        out.append(f"finding [{finding.get('severity')}]{where}: {finding.get('title')}")
    diff = review.get("diff") or {}
    files = diff.get("files") or []
    out.append("")
    for entry in files:
        out.append(f" {entry['path']} | +{entry.get('insertions', 0)} -{entry.get('deletions', 0)}")
    out.append(f" {len(files)} file(s) changed")
    for entry in files:
        out.append("")
        if entry.get("binary"):
            out.append(f"{entry['path']}: binary file")
            continue
        out += [paint(line) for line in (entry.get("patch") or "").splitlines()]
        if entry.get("truncated"):
            out.append(f"… (cut: clawboo review {task.get('id')} --path {entry['path']})")
    return "\n".join(out) + "\n"


def verdict_text(verification: dict[str, Any] | None) -> str | None:
    """The verdict with why, as the board's badge says it: a failure because nothing
    was configured to verify is "no verify command", which its builder cannot fix."""
    if not verification or not verification.get("verdict"):
        return None
    verdict = str(verification["verdict"])
    gate = verification.get("gate") or {}
    if gate:
        verdict += f" ({gate.get('command')} exit {gate.get('exit_code')})"
    elif verdict == "fail" and verification.get("evidence") == NONE_CONFIGURED:
        verdict += " (no verify command: set one on the task, its agent or its repository)"
    override = verification.get("human_override") or {}
    if override:
        verdict += f", overridden by {override.get('by')}"
    return verdict


def cmd_review(args: argparse.Namespace) -> int:
    client = Client.from_login()
    query = {"path": args.path} if args.path else {}
    suffix = "/review" + ("?" + urllib.parse.urlencode(query) if query else "")
    review = client.call("GET", task_path(args.id, suffix))
    task = client.call("GET", task_path(args.id))
    color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    verdict = "approve" if args.approve else "changes" if args.request_changes else None
    if args.json:
        # One JSON document on stdout: the review, and with a decision what it answered
        # (the review's JSON followed by a text line was no JSON a script could read).
        if verdict is None:
            emit(args, review, str)
            return 0
        answer = _review_decision(client, args, verdict)
        emit(args, {"review": review, "decision": answer}, str)
        return 0 if answer.get("result") != "conflict" else 1
    sys.stdout.write(review_text(shown(review), shown(task), color))
    if verdict is None and sys.stdin.isatty() and sys.stdout.isatty():
        choice = asked("[a]pprove, [r]equest changes, anything else: leave it > ", input) or ""
        if choice.strip().lower().startswith("a"):
            verdict = "approve"
        elif choice.strip().lower().startswith("r"):
            args.request_changes = (asked("what should change? > ", input) or "").strip()
            verdict = "changes" if args.request_changes else None
    if verdict is None:
        return 0
    answer = _review_decision(client, args, verdict)
    if verdict == "approve":
        sys.stdout.write(landed_line(shown(answer)))
        return 0 if answer.get("result") != "conflict" else 1
    sys.stdout.write(f"changes requested: {shown(answer['id'])} is {shown(answer['status'])}\n")
    return 0


def _review_decision(client: Client, args: argparse.Namespace, verdict: str) -> dict[str, Any]:
    """What ``review --approve`` or ``--request-changes`` answered."""
    if verdict == "approve":
        answer: dict[str, Any] = client.call("POST", task_path(args.id, "/approve"), {})
        return answer
    feedback = {"feedback": args.request_changes}
    changed: dict[str, Any] = client.call("POST", task_path(args.id, "/request-changes"), feedback)
    return changed


# -- agents ------------------------------------------------------------------------


def agent_row(agent: dict[str, Any], budgets: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """An agent as its list row says it: its state and why (the breaker's reason, or
    who paused it), a paused cap budget over it (its own or its team's: it claims
    nothing while "active"), and the host it runs on when that is not the server."""
    why = []
    for budget in budgets:
        over = (budget.get("scope"), budget.get("scope_id")) in (
            ("agent", agent.get("id")),
            ("team", agent.get("team")),
        )
        if over and budget.get("status") == "paused":
            window = WINDOWS.get(str(budget.get("window")), str(budget.get("window")))
            why.append(
                f"budget {budget.get('id')} paused ({budget.get('scope')} {budget.get('scope_id')}:"
                f" {budget.get('spent_cents')}¢ of {budget.get('limit_cents')}¢ {window})"
            )
    if agent.get("state") != "active":
        reason = str(agent.get("state_reason") or agent.get("state"))
        by = agent.get("paused_by")
        # The reason may name who already: the breaker's ("breaker: 3 consecutive failed
        # runs"), or a pause given none ("paused by bob").
        named = not by or reason.startswith(f"{by}:") or f"by {by}" in reason
        why.append(reason if named else f"{reason} by {by}")
    runs_on = agent.get("runs_on") or {}
    if runs_on.get("host"):
        live = "" if runs_on.get("live") else " (no worker connected)"
        why.append(f"runs on {runs_on['host']}{live}")
    return {**agent, "why": "; ".join(why) or None}


def team_list(client: Client, path: str, team: str | None) -> Any:
    """``GET path`` for ``team`` (all of the caller's without one). An empty list for a
    team asks for the team too, so one that does not exist (or is not the caller's) is
    said so, as ``task list`` does."""
    rows = client.call("GET", path + "?" + urllib.parse.urlencode({"team": team} if team else {}))
    if team and not rows:
        client.call("GET", f"/api/teams/{quote(team)}")
    return rows


def cmd_agent_list(args: argparse.Namespace) -> int:
    client = Client.from_login()
    agents = team_list(client, "/api/agents", args.team)
    # A paused cap holds its agents' claims while they read "active": say so beside them.
    query = {"team": args.team} if args.team else {}
    budgets = client.call("GET", "/api/budgets?" + urllib.parse.urlencode(query))
    emit(
        args,
        agents,
        lambda rows: table([agent_row(a, shown(budgets)) for a in rows], AGENT_COLUMNS, width=90),
    )
    return 0


def cmd_agent_pause(args: argparse.Namespace) -> int:
    body = {"reason": args.reason} if args.reason else {}
    agent = Client.from_login().call("POST", f"/api/agents/{quote(args.id)}/pause", body)
    emit(args, agent, lambda a: f"paused {a['id']}: it takes no new work until resumed\n")
    return 0


def cmd_agent_resume(args: argparse.Namespace) -> int:
    agent = Client.from_login().call("POST", f"/api/agents/{quote(args.id)}/resume", {})
    emit(args, agent, lambda a: f"resumed {a['id']}: it is {a.get('state')}\n")
    return 0


# -- budgets -----------------------------------------------------------------------


def budget_row(budget: dict[str, Any]) -> dict[str, Any]:
    """A budget as its list row says it: its scope, figures in cents (the unit --grace
    takes), its state (after a resume: where it pauses again) and who may resume it
    (the server's may_resume: staff holding the budget permission, never an agent)."""
    state = str(budget.get("status"))
    pause_at = budget.get("pause_at_cents")
    if pause_at is not None and state != "paused":
        state += f", pauses at {pause_at}¢"
    return {
        **budget,
        "scope": f"{budget.get('scope')} {budget.get('scope_id')}",
        "limit": f"{budget.get('limit_cents')}¢ ({budget.get('mode')})",
        "spent": f"{budget.get('spent_cents')}¢",
        "state": state,
        "resumes": "you" if budget.get("may_resume") is True else "staff, not you",
    }


def cmd_budget_list(args: argparse.Namespace) -> int:
    budgets = team_list(Client.from_login(), "/api/budgets", args.team)
    emit(args, budgets, lambda rows: table([budget_row(b) for b in rows], BUDGET_COLUMNS))
    return 0


def grace_cents(raw: str) -> int:
    """``--grace``: whole cents, 1 or more (the server holds its own upper bound)."""
    if not re.fullmatch(r"[0-9]+", raw.strip()) or int(raw) < 1:
        raise Failure(
            f"clawboo: --grace is a whole number of cents, 1 or more, not {one_line(raw)!r}", 2
        )
    return int(raw)


def resumed_line(budget: dict[str, Any], grace: int | None) -> str:
    """What a resume did, from the server's answer: where the cap pauses again (its
    ``pause_at_cents``: the limit or the spend, whichever is higher, plus the grace)."""
    window = WINDOWS.get(str(budget.get("window")), str(budget.get("window")))
    what = f"resumed budget {budget['id']} ({budget.get('scope')} {budget.get('scope_id')})"
    if grace:
        what += f" with {grace}¢ grace"
    spent, pause_at = budget.get("spent_cents"), budget.get("pause_at_cents")
    line = f"{what}: spent {spent}¢ of {budget.get('limit_cents')}¢ {window}; it pauses again"
    if isinstance(spent, int) and isinstance(pause_at, int) and pause_at <= spent:
        return f"{line} at its next spend (--grace CENTS lets it spend more)\n"
    return f"{line} at {pause_at}¢\n"


def cmd_budget_resume(args: argparse.Namespace) -> int:
    grace = grace_cents(args.grace) if args.grace is not None else None
    body = {"grace_cents": grace} if grace is not None else {}
    budget = Client.from_login().call("POST", f"/api/budgets/{quote(args.id)}/resume", body)
    emit(args, budget, lambda b: resumed_line(b, grace))
    return 0


# -- approvals ---------------------------------------------------------------------


def cmd_approvals(args: argparse.Namespace) -> int:
    client = Client.from_login()
    if args.decide:
        approval_id, decision = args.decide
        if decision not in TOOL_DECISIONS:
            # Checked before the id: "404 approval does not exist" hid the word mistyped.
            raise Failure(
                f"clawboo: approvals --decide: {one_line(decision)!r} is no decision: give"
                f" {', '.join(TOOL_DECISIONS)}",
                2,
            )
        done = client.call("POST", f"/api/approvals/{quote(approval_id)}", {"decision": decision})
        emit(args, done, lambda a: f"{a['id']}: {a.get('state')} ({a.get('decision')})\n")
        return 0
    scope = {"team": args.team} if args.team else {}
    tools = client.call("GET", "/api/approvals?" + urllib.parse.urlencode(scope))
    waiting = client.call(
        "GET",
        "/api/board/tasks?" + urllib.parse.urlencode({**scope, "approval": "waiting"}),
    )["results"]
    rows = [
        {
            "id": task["id"],
            "kind": "task",
            "team": task.get("team"),
            "task_id": task["id"],
            "agent_id": task.get("created_by_agent_id"),
            "what": task.get("title"),
            "state": (task.get("approval") or {}).get("state"),
        }
        for task in waiting
    ] + [
        {
            "id": tool["id"],
            "kind": "tool",
            "team": tool.get("team"),
            "task_id": tool.get("task_id"),
            "agent_id": tool.get("agent_id"),
            "what": f"{tool.get('tool')} {json.dumps(tool.get('arguments'), sort_keys=True)}",
            "state": tool.get("state"),
        }
        for tool in tools
    ]
    if args.json:
        emit(args, rows, approvals_text)
        return 0
    # A task in review waits for a person too: "nothing waits for you" with the tour's
    # task in review sent its reader looking elsewhere.
    reviews = client.call(
        "GET", "/api/board/tasks?" + urllib.parse.urlencode({**scope, "status": "in_review"})
    )
    ids = shown([task["id"] for task in reviews["results"]])
    if reviews.get("next"):
        ids.append("…")
    emit(args, rows, lambda shown_rows: approvals_text(shown_rows, ids))
    return 0


def approvals_text(rows: list[dict[str, Any]], in_review: Sequence[str] = ()) -> str:
    if rows:
        text = table(rows, APPROVAL_COLUMNS) + (
            "decide: a task with `clawboo task approve|deny ID`, a tool call with "
            "`clawboo approvals --decide ID allow_once|allow_always|deny`\n"
        )
    elif in_review:
        text = "no task or tool call waits for your approval\n"
    else:
        text = "nothing waits for you\n"
    if in_review:
        text += f"in review, for a person to decide: {', '.join(in_review)} (`clawboo review ID`)\n"
    return text


# -- watch -------------------------------------------------------------------------


def frame_line(frame: dict[str, Any]) -> str | None:
    stamp = datetime.now().strftime("%H:%M:%S")  # noqa: DTZ005 - the reader's own clock
    kind = frame.get("type")
    if kind == "task-change":
        task = frame.get("task") or {}
        moved = (
            f"{frame.get('prev_status')} → {task.get('status')}"
            if frame.get("prev_status") and frame.get("prev_status") != task.get("status")
            else task.get("status")
        )
        # Only who the server names: the assignee did not make every change on its task
        # (a person's comment, approval or move).
        who = f" by {frame['actor']}" if frame.get("actor") else ""
        return (
            f"{stamp} #{frame.get('seq')} {frame.get('kind')} {task.get('id')} {moved}"
            f"{who}: {task.get('title')}"
        )
    if kind == "chat":
        return f"{stamp} #{frame.get('seq')} chat {frame.get('author') or ''}: {frame.get('body')}"
    if kind == "reload":
        return f"{stamp} the server lost events before #{frame.get('seq')}: reload"
    return None


def cmd_watch(args: argparse.Namespace) -> int:
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    client = Client.from_login()
    if args.task:
        # A task of another team, or mistyped: no event of it ever comes, and the watch
        # waited in silence until Ctrl-C.
        task = client.call("GET", task_path(args.task))
        if task.get("team") != args.team:
            raise Failure(
                f"clawboo: task {shown(args.task)} is in team {shown(task.get('team'))}, not"
                f" {shown(args.team)}: `clawboo watch --team {shown(task.get('team'))}"
                f" --task {shown(args.task)}`",
                2,
            )
    parts = urllib.parse.urlsplit(client.server)
    scheme = "wss" if parts.scheme == "https" else "ws"
    query = urllib.parse.urlencode({"team": args.team, "token": client.token})
    url = f"{scheme}://{parts.netloc}{parts.path.rstrip('/')}/ws/board/?{query}"
    try:
        with connect(url, open_timeout=10, proxy=None) as ws:
            for raw in ws:
                frame = json.loads(raw)
                if frame.get("type") == "hello":
                    sys.stderr.write(f"watching team {args.team} (from #{frame.get('seq')})\n")
                    continue
                if frame.get("type") == "error":
                    raise Failure(f"clawboo: {frame.get('error')}: {frame.get('detail')}")
                if args.task and (frame.get("task") or {}).get("id", frame.get("task_id")) != (
                    args.task
                ):
                    continue
                line = json.dumps(frame, sort_keys=True) if args.json else frame_line(shown(frame))
                if line is not None:
                    sys.stdout.write(line + "\n")
                    sys.stdout.flush()
    except ConnectionClosed as exc:
        code = exc.rcvd.code if exc.rcvd else None
        reasons = {
            # As every other command's 401: what to do next, not the code alone.
            4401: f"401 unauthenticated: {client.refused('/ws/board/')}",
            4403: f"404 not_found: no team {args.team!r}",
        }
        # Any other close: the server stopped or restarted ("connection closed (None)"
        # said neither, nor what to do).
        again = (
            f"{client.server} closed the connection ({code or 'no close code'}): the server"
            f" stopped or restarted; once `clawboo up` answers, `clawboo watch --team"
            f" {shown(args.team)}` again"
        )
        raise Failure(f"clawboo: {reasons.get(code or 0, again)}") from None
    except OSError as exc:
        raise client.unreachable(exc, exc) from None
    except KeyboardInterrupt:
        return 0
    return 0


# -- the parser --------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="clawboo", description="Clawboo for people.")
    sub = top.add_subparsers(dest="command", required=True)

    def command(
        parent: Any, name: str, fn: Callable[[argparse.Namespace], int], text: str
    ) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = parent.add_parser(name, help=text, description=text)
        p.set_defaults(fn=fn, command_parser=p)
        p.add_argument("--json", action="store_true", help="the API's JSON, for scripts")
        return p

    def verbs(parent: Any, name: str, text: str) -> Any:
        """A command of verbs (``task list``). Alone, it is refused naming its verbs:
        argparse's "the following arguments are required: task_command" named its
        own variable."""
        group: argparse.ArgumentParser = parent.add_parser(name, help=text, description=text)
        action = group.add_subparsers(dest=f"{name}_command", metavar="VERB")
        # The verbs' table, filled as they are added below.
        group.set_defaults(fn=None, command_parser=group, verbs=action.choices)
        return action

    p = command(sub, "login", cmd_login, "log in: store your API key for this server")
    p.add_argument("--server", help="the server's URL, e.g. http://127.0.0.1:8000")
    p.add_argument("--username", type=given, help="your username (asked when missing)")
    p.add_argument("--password-stdin", action="store_true", help="read the password from stdin")
    p.add_argument("--token", help="an API key you already have ('-': read it from stdin)")
    command(sub, "logout", cmd_logout, "forget the stored key")
    command(sub, "whoami", cmd_whoami, "who the stored key belongs to")

    task = verbs(sub, "task", "list, show, file and move tasks")
    p = command(task, "list", cmd_task_list, "the tasks you can see")
    p.add_argument("--team", type=given)
    p.add_argument("--status", choices=STATUSES)
    p.add_argument("--assignee", type=given, help="agent id")
    p.add_argument("--label", type=given)
    p.add_argument("--ready", action="store_true", help="only tasks ready to be claimed")
    p.add_argument("--limit", type=int, default=50, help="how many (default 50)")
    p = command(task, "show", cmd_task_show, "one task")
    p.add_argument("id", type=given)

    def fields(p: argparse.ArgumentParser, *, title: bool) -> None:
        if title:
            p.add_argument("title", type=given)
        else:
            p.add_argument("--title", type=given)
        p.add_argument("--description")
        p.add_argument("--priority", type=int)
        p.add_argument("--label", type=given, action="append", help="repeatable")
        p.add_argument("--repository", type=given, help="a registered repository's id")
        p.add_argument("--verify-cmd", type=given, help="the command that verifies the change")

    p = command(task, "create", cmd_task_create, "file a task")
    fields(p, title=True)
    p.add_argument("--team", type=given)
    p.add_argument("--depends-on", type=given, action="append", help="a task id (repeatable)")
    p.add_argument("--backlog", action="store_true", help="file it in backlog, not todo")
    p = command(task, "edit", cmd_task_edit, "change a task's fields")
    p.add_argument("id", type=given)
    fields(p, title=False)
    p = command(
        task, "move", cmd_task_move, "move a task to another status (in review to done: approve)"
    )
    p.add_argument("id", type=given)
    p.add_argument("status", choices=STATUSES)
    p.add_argument("--agent", type=given, help="into in_progress: the agent that works it")
    p.add_argument(
        "--override", metavar="REASON", type=given, help="into done over a failing verdict"
    )
    p = command(task, "comment", cmd_task_comment, "comment on a task")
    p.add_argument("id", type=given)
    p.add_argument("text", type=given)
    p.add_argument("--as", dest="as_agent", type=given, metavar="AGENT", help="as an agent you own")
    p = command(task, "claim", cmd_task_claim, "claim a task for an agent you own")
    p.add_argument("id", type=given)
    p.add_argument("--agent", type=given, required=True)
    p.add_argument("--lease-ms", type=int)
    p = command(task, "approve", cmd_task_approve, "land a reviewed task, or let one start")
    p.add_argument("id", type=given)
    p.add_argument("--reason", help="recorded with a start approval")
    p.add_argument("--override", metavar="REASON", type=given, help="land over a failing verdict")
    _revision_option(p)
    p = command(task, "deny", cmd_task_deny, "deny a start; in review: request changes")
    p.add_argument("id", type=given)
    p.add_argument("--reason", help="why (the feedback, for a task in review)")
    _revision_option(p)
    p = command(task, "wait", cmd_task_wait, "wait until a task reaches a status")
    p.add_argument("id", type=given)
    p.add_argument(
        "--status", action="append", choices=STATUSES, required=True, help="repeatable: any of them"
    )
    p.add_argument("--timeout", type=float, default=300.0, help="seconds (default 300)")

    agent = verbs(sub, "agent", "list, pause and resume agents")
    p = command(agent, "list", cmd_agent_list, "the agents you can see, their state and why")
    p.add_argument("--team", type=given)
    p = command(agent, "pause", cmd_agent_pause, "stop an agent taking work (any team member)")
    p.add_argument("id", type=given)
    p.add_argument("--reason", help="said on the agent and in the team's chat")
    p = command(
        agent, "resume", cmd_agent_resume, "let a paused agent work again (its owner or staff)"
    )
    p.add_argument("id", type=given)

    budget = verbs(sub, "budget", "list budgets and resume a paused one")
    p = command(budget, "list", cmd_budget_list, "the budgets you can see, their spend and state")
    p.add_argument("--team", type=given)
    p = command(
        budget,
        "resume",
        cmd_budget_resume,
        "let a paused budget's scope work again (staff with the budget permission)",
    )
    p.add_argument("id", type=given)
    p.add_argument(
        "--grace", metavar="CENTS", help="how much more it may spend this window (whole cents)"
    )

    p = command(sub, "review", cmd_review, "a task's diff and verdict; approve or send back")
    p.add_argument("id", type=given)
    p.add_argument("--path", type=given, help="one file's whole patch")
    decision = p.add_mutually_exclusive_group()  # one decision: approve won, silently
    decision.add_argument("--approve", action="store_true", help="approve and land it")
    decision.add_argument(
        "--request-changes", metavar="FEEDBACK", type=given, help="send it back with this"
    )
    p = command(sub, "approvals", cmd_approvals, "what waits for a person's decision")
    p.add_argument("--team", type=given)
    p.add_argument(
        "--decide",
        nargs=2,
        metavar=("ID", "DECISION"),
        help=f"answer a tool approval: {', '.join(TOOL_DECISIONS[:-1])} or {TOOL_DECISIONS[-1]}",
    )
    p = command(sub, "watch", cmd_watch, "a team's live events, one line each")
    p.add_argument("--team", type=given, required=True)
    p.add_argument("--task", type=given, help="only this task's events")
    return top


def main(argv: Sequence[str]) -> int:
    # The worker's HTTP client narrates its link ("server unreachable, retrying…"): a
    # person gets the one error line below instead.
    quiet = logging.getLogger("clawboo.worker")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    top = parser()
    args, unknown = top.parse_known_args(list(argv))
    if "--json" in unknown and hasattr(args, "json"):
        # Said before the verb (`clawboo task --json list`): it was "unrecognized" under
        # the usage of a verb that takes it.
        unknown = [arg for arg in unknown if arg != "--json"]
        args.json = True
    if args.fn is None:
        # A command of verbs given none (`clawboo task`): name them.
        args.command_parser.error(
            f"give one of {', '.join(args.verbs)}"
            f" (`clawboo {args.command} VERB --help` says what it takes)"
        )
    if unknown:
        # argparse names an option no subcommand takes at the top ("usage: clawboo
        # {login,…}"): the command's own usage says what it takes (a title that is
        # an argument, not --title).
        named = getattr(args, "command_parser", top)
        named.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        return int(args.fn(args))
    except Failure as exc:
        sys.stderr.write(exc.line + "\n")
        return exc.status
    except KeyboardInterrupt:
        return 130

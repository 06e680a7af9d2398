"""A stand-in forge on 127.0.0.1: GitHub's or Gitea's REST API over a bare git
repository, for tests.

Every request the product sends is checked against the vendor's published document
(:mod:`tests.forges.contract`) before it is served: an operation the document does
not have, a parameter or body it does not accept, is recorded as a violation and
answered 422 as the real API would refuse it. Every answer the stand-in gives is
checked against the same document too (a violation there is the stand-in's own
bug). Tests assert :attr:`StandIn.violations` is empty.

What it models of the real thing: a pull request's head is the pushed branch's tip
in the bare repository; the head commit's checks are what the test sets
(:meth:`StandIn.set_check`); branch protection refuses a merge (405) while a
required check is not green, or a draft, or a stale ``sha``/``head_commit_id``
(409 on GitHub); a merge writes a real merge (or squash) commit on the base branch
of the bare repository. A wrong token is 401. Branch protection can be read
(:attr:`StandIn.protected`; :attr:`StandIn.protection_forbidden`: the token may not,
403; on Gitea each rule by its name or all of them listed, a glob rule protecting the
branches it matches as Gitea matches them), and a branch deleted (a missing one:
GitHub 422, Gitea 404; the default branch refused;
:attr:`StandIn.delete_branch_on_merge`: the forge deletes the head itself on merge,
GitHub's ``delete_branch_on_merge``; :attr:`StandIn.refuse_branch_delete`: every
delete refused).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from tests.forges.contract import Contract, deep_merge

CONTRACTS = {"github": "github.openapi.json", "gitea": "gitea.swagger.json"}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(  # noqa: S603 - argv list, test helper
        ["git", *args],  # noqa: S607
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env={
            "GIT_AUTHOR_NAME": "forge",
            "GIT_AUTHOR_EMAIL": "forge@forge.invalid",
            "GIT_COMMITTER_NAME": "forge",
            "GIT_COMMITTER_EMAIL": "forge@forge.invalid",
            "PATH": "/usr/bin:/bin:/usr/local/bin",
        },
    ).stdout.strip()


@dataclass
class PR:
    number: int
    head: str
    base: str
    title: str
    body: str
    draft: bool
    state: str = "open"
    merged: bool = False
    merge_commit_sha: str | None = None
    merged_by: str | None = None


@dataclass
class Review:
    id: int
    number: int
    by: str
    body: str
    state: str
    comments: list[dict[str, Any]] = field(default_factory=list)


class StandIn:
    def __init__(self, kind: str, bare: Path, *, token: str, owner_repo: str = "octo/app") -> None:
        self.kind = kind
        self.bare = bare
        self.token = token
        self.owner_repo = owner_repo
        self.contract = Contract(CONTRACTS[kind])
        self.prs: dict[int, PR] = {}
        self.checks: dict[str, dict[str, dict[str, str]]] = {}  # sha → name → check
        self.reviews: list[Review] = []
        self.required: list[str] = []
        # Branch protection the API reports: branch → its required status checks. On
        # Gitea the key is a rule's name, a branch or a glob ("release/*"), in the
        # order the rules were made; protection_priority: a rule's priority (1.23+).
        self.protected: dict[str, list[str]] = {}
        self.protection_priority: dict[str, int] = {}
        self.protection_forbidden = False
        self.delete_branch_on_merge = False
        self.refuse_branch_delete = False
        # Test hooks around opening a pull request: before_create(head, base) runs
        # before the forge looks for one open already, after_create(pr) once it is
        # open and before it answers (a test kills the caller there).
        self.before_create: Callable[[str, str], None] | None = None
        self.after_create: Callable[[PR], None] | None = None
        self.page_cap = 50  # Gitea's MAX_RESPONSE_ITEMS
        self.violations: list[str] = []
        self.requests: list[tuple[str, str, Any, dict[str, str]]] = []
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        # shutdown() waits out one poll of serve_forever: 0.5 s a test by default.
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    # --- the test's side -------------------------------------------------------
    @property
    def api_url(self) -> str:
        host, port = self.server.server_address[:2]
        root = f"http://{host}:{port}"
        return f"{root}/api/v1" if self.kind == "gitea" else root

    def start(self) -> StandIn:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def has_branch(self, branch: str) -> bool:
        return _ref_exists(self.bare, branch)

    def head_of(self, number: int) -> str:
        return _git(self.bare, "rev-parse", f"refs/heads/{self.prs[number].head}")

    def set_check(
        self, sha: str, name: str, state: str, output: str = "", *, via: str = "check_run"
    ) -> None:
        """``state``: pending | success | failure, as the head's check ``name``; on
        GitHub ``via`` says whether it is a check run or a commit status."""
        self.checks.setdefault(sha, {})[name] = {"state": state, "output": output, "via": via}

    def request_changes(
        self, number: int, by: str, body: str, comments: list[dict[str, Any]]
    ) -> int:
        review = Review(len(self.reviews) + 1, number, by, body, "changes", comments)
        self.reviews.append(review)
        return review.id

    def merge_by_hand(self, number: int, by: str = "octocat") -> str:
        """A person merges the pull request on the forge."""
        return self._merge(self.prs[number], "merge", by)

    def close_by_hand(self, number: int) -> None:
        self.prs[number].state = "closed"

    def sign(self, secret: str, body: bytes) -> dict[str, str]:
        digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        if self.kind == "github":
            return {"HTTP_X_HUB_SIGNATURE_256": f"sha256={digest}"}
        return {"HTTP_X_GITEA_SIGNATURE": digest}

    # --- git --------------------------------------------------------------------
    def _merge(self, pr: PR, method: str, by: str) -> str:
        base_tip = _git(self.bare, "rev-parse", f"refs/heads/{pr.base}")
        head = _git(self.bare, "rev-parse", f"refs/heads/{pr.head}")
        tree = _git(self.bare, "merge-tree", "--write-tree", base_tip, head).splitlines()[0]
        parents = (
            ["-p", base_tip] if method in ("squash", "rebase") else ["-p", base_tip, "-p", head]
        )
        message = f"{pr.title} (#{pr.number})"
        commit = _git(self.bare, "commit-tree", tree, *parents, "-m", message)
        _git(self.bare, "update-ref", f"refs/heads/{pr.base}", commit, base_tip)
        pr.state, pr.merged, pr.merge_commit_sha, pr.merged_by = "closed", True, commit, by
        if self.delete_branch_on_merge:
            _git(self.bare, "update-ref", "-d", f"refs/heads/{pr.head}")
        return commit

    def _check_state_of(self, sha: str, base: str) -> str:
        """The head's checks as branch protection of ``base`` judges them."""
        rule = self._gitea_rule(base) if self.kind == "gitea" else base
        return self._check_state(sha, self.protected.get(rule or "", self.required))

    def _gitea_rule(self, branch: str) -> str | None:
        """The name of the Gitea rule that protects ``branch``: by priority, then a
        plain name before a glob, then the first made (Gitea's ProtectedBranchRules)."""
        made = list(self.protected)
        order = sorted(
            made,
            key=lambda n: (self.protection_priority.get(n, 0), _is_glob(n), made.index(n)),
        )
        return next((n for n in order if _gitea_glob_matches(n, branch)), None)

    def _check_state(self, sha: str, required: list[str] | None = None) -> str:
        checks = self.checks.get(sha, {})
        names = (self.required if required is None else required) or list(checks)
        if any(checks.get(n, {}).get("state") == "failure" for n in names):
            return "failure"
        if any(n not in checks or checks[n]["state"] == "pending" for n in names):
            return "pending"
        return "success"

    # --- bodies -----------------------------------------------------------------
    def _user(self, login: str) -> dict[str, Any]:
        if self.kind == "github":
            user = self.contract.synthesize(
                self.contract.pointer("#/components/schemas/simple-user")
            )
            return deep_merge(user, {"login": login, "id": 7})
        return {"login": login, "id": 7}

    def _pr_body(self, pr: PR, op: Any, status: int) -> dict[str, Any]:
        return self._answer(op, status, self._pr_values(pr))

    def _pr_item(self, pr: PR) -> dict[str, Any]:
        """A pull request as a list answers it (GitHub: pull-request-simple, which
        says ``merged_at`` and never ``merged``; Gitea: its PullRequest)."""
        values = self._pr_values(pr)
        if self.kind == "github":
            values.pop("merged", None)
            item = self.contract.pointer("#/components/schemas/pull-request-simple")
        else:
            item = self.contract.pointer("#/definitions/PullRequest")
        return deep_merge(self.contract.synthesize(item), values)

    def _pr_values(self, pr: PR) -> dict[str, Any]:
        base_url = f"https://forge.invalid/{self.owner_repo}"
        head_sha = (
            _git(self.bare, "rev-parse", f"refs/heads/{pr.head}")
            if _ref_exists(self.bare, pr.head)
            else pr.merge_commit_sha
        )
        values: dict[str, Any] = {
            "number": pr.number,
            "id": 1000 + pr.number,
            "html_url": f"{base_url}/pull/{pr.number}",
            "state": pr.state,
            "title": pr.title,
            "body": pr.body,
            "draft": pr.draft,
            "merged": pr.merged,
            "merge_commit_sha": pr.merge_commit_sha,
            # Both sides are this repository's branches (the stand-in has no forks).
            "head": {
                "ref": pr.head,
                "sha": head_sha,
                "label": f"octo:{pr.head}",
                "repo": {"full_name": self.owner_repo},
            },
            "base": {
                "ref": pr.base,
                "sha": _git(self.bare, "rev-parse", f"refs/heads/{pr.base}"),
                "label": f"octo:{pr.base}",
                "repo": {"full_name": self.owner_repo},
            },
        }
        if pr.merged:
            values["merged_at"] = "2026-01-02T00:00:00Z"
            values["merged_by"] = self._user(pr.merged_by or "octocat")
        if self.contract.swagger:
            # Swagger 2.0 has no null: an unset field is left out of the answer.
            values = {k: v for k, v in values.items() if v is not None}
        return values

    def _answer(self, op: Any, status: int, values: Any) -> Any:
        schema = self.contract.response_schema(op, status)
        if schema is None:
            return None
        return deep_merge(self.contract.synthesize(schema), values)

    # --- serving ----------------------------------------------------------------
    def _handler(self) -> type[BaseHTTPRequestHandler]:
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                with standin._lock:
                    status, body = standin.serve(
                        self.command, self.path, dict(self.headers), self._body()
                    )
                raw = b"" if body is None else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _body(self) -> bytes:
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else b""

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

        return Handler

    def serve(
        self, method: str, target: str, headers: dict[str, str], raw: bytes
    ) -> tuple[int, Any]:
        parts = urlsplit(target)
        query = dict(parse_qsl(parts.query))
        found = self.contract.find(method, parts.path)
        if found is None:
            self.violations.append(f"{method} {parts.path}: no such operation in the document")
            return 404, {"message": "Not Found"}
        op, params = found
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            self.violations.append(f"{op.operation_id}: the body is not JSON")
            return 400, {"message": "Problems parsing JSON"}
        self.requests.append((op.operation_id, parts.path, body, query))
        scheme = "Bearer" if self.kind == "github" else "token"
        if headers.get("Authorization") != f"{scheme} {self.token}":
            self.violations.append(f"{op.operation_id}: wrong or missing token")
            return 401, {"message": "Bad credentials"}
        problems = self.contract.check_request(op, params, query, body, bool(raw))
        if problems:
            self.violations += problems
            return 422, {"message": "Validation Failed", "errors": problems[:3]}
        status, answer = getattr(self, "op_" + op.operation_id.replace("/", "_").replace("-", "_"))(
            op, params, query, body or {}
        )
        if status < 300 or status in (405, 409):
            self.violations += self.contract.check_response(op, status, answer)
        return status, answer

    # --- operations (both vendors' names) ----------------------------------------
    def _number(self, params: dict[str, str]) -> int:
        return int(params.get("pull_number") or params["index"])

    def op_pulls_create(self, op: Any, params: Any, query: Any, body: Any) -> tuple[int, Any]:
        head = body["head"].split(":")[-1]
        if not _ref_exists(self.bare, head) or not _ref_exists(self.bare, body["base"]):
            return 422, {"message": "Validation Failed"}
        if self.before_create is not None:
            self.before_create(head, body["base"])
        if any(
            p.head == head and p.base == body["base"] and p.state == "open"
            for p in self.prs.values()
        ):
            # One open pull request per head and base: GitHub's 422 names it in its
            # errors; Gitea answers 409 (its ErrPullRequestAlreadyExists).
            if self.kind == "gitea":
                return 409, None
            return 422, {
                "message": "Validation Failed",
                "errors": [
                    {
                        "resource": "PullRequest",
                        "code": "custom",
                        "message": f"A pull request already exists for octo:{head}.",
                    }
                ],
            }
        pr = PR(
            len(self.prs) + 1,
            head,
            body["base"],
            body.get("title", ""),
            body.get("body", ""),
            bool(body.get("draft")),
        )
        if self.kind == "gitea":
            self._gitea_draft(pr)  # Gitea's draft is its title's WIP prefix
        self.prs[pr.number] = pr
        if self.after_create is not None:
            self.after_create(pr)
        return 201, self._pr_body(pr, op, 201)

    op_repoCreatePullRequest = op_pulls_create

    def open_by_hand(self, head: str, base: str, title: str = "by hand") -> PR:
        """A pull request opened on the forge outside the product's call (by another
        publish racing it, or a person)."""
        pr = PR(len(self.prs) + 1, head, base, title, "", False)
        self.prs[pr.number] = pr
        return pr

    def _listed(self, state: str) -> list[PR]:
        return [
            p
            for p in sorted(self.prs.values(), key=lambda p: -p.number)  # newest first
            if state == "all" or p.state == state
        ]

    def op_pulls_list(self, op: Any, params: Any, query: Any, body: Any) -> tuple[int, Any]:
        """GitHub's list: ``head`` is ``owner:branch`` (a bare branch matches nothing,
        as on GitHub), ``base`` a branch; ``per_page``/``page``."""
        wanted = self._listed(query.get("state", "open"))
        if "head" in query:
            owner, _, branch = query["head"].partition(":")
            mine = owner == self.owner_repo.split("/")[0]
            wanted = [p for p in wanted if mine and p.head == branch]
        if "base" in query:
            wanted = [p for p in wanted if p.base == query["base"]]
        size = int(query.get("per_page", 30))
        page = int(query.get("page", 1))
        return 200, [self._pr_item(pr) for pr in wanted[(page - 1) * size : page * size]]

    def op_repoListPullRequests(
        self, op: Any, params: Any, query: Any, body: Any
    ) -> tuple[int, Any]:
        """Gitea's list: no head filter; ``page``/``limit`` (its MAX_RESPONSE_ITEMS
        caps a page, :attr:`page_cap` here)."""
        wanted = self._listed(query.get("state", "open"))
        size = min(int(query.get("limit", self.page_cap)), self.page_cap)
        page = int(query.get("page", 1))
        return 200, [self._pr_item(pr) for pr in wanted[(page - 1) * size : page * size]]

    def _gitea_draft(self, pr: PR) -> None:
        pr.draft = pr.title.startswith("WIP:") or pr.title.startswith("[WIP]")

    def op_pulls_get(self, op: Any, params: Any, query: Any, body: Any) -> tuple[int, Any]:
        pr = self.prs.get(self._number(params))
        if pr is None:
            return 404, None
        return 200, self._pr_body(pr, op, 200)

    op_repoGetPullRequest = op_pulls_get

    def op_pulls_update(self, op: Any, params: Any, query: Any, body: Any) -> tuple[int, Any]:
        pr = self.prs[self._number(params)]
        for key in ("title", "body", "state", "base"):
            if key in body:
                setattr(pr, key, body[key])
        if self.kind == "gitea":
            self._gitea_draft(pr)
        return (200 if self.kind == "github" else 201), self._pr_body(
            pr, op, 200 if self.kind == "github" else 201
        )

    op_repoEditPullRequest = op_pulls_update

    def _refuse_merge(self, pr: PR, sha: str | None) -> tuple[int, str] | None:
        if pr.state != "open":
            return 405, "Pull Request is not mergeable"
        if pr.draft:
            return 405, "Pull Request is still a draft"
        head = self.head_of(pr.number)
        if sha and sha != head:
            return 409, "Head branch was modified. Review and try the merge again."
        if self._check_state_of(head, pr.base) != "success":
            return 405, "Required status check is expected or failing."
        return None

    def op_pulls_merge(self, op: Any, params: Any, query: Any, body: Any) -> tuple[int, Any]:
        pr = self.prs[self._number(params)]
        refused = self._refuse_merge(pr, body.get("sha"))
        if refused:
            return refused[0], {"message": refused[1], "documentation_url": "https://docs"}
        commit = self._merge(pr, body.get("merge_method", "merge"), "clawboo-bot")
        return 200, self._answer(
            op, 200, {"sha": commit, "merged": True, "message": "Pull Request successfully merged"}
        )

    def op_repoMergePullRequest(
        self, op: Any, params: Any, query: Any, body: Any
    ) -> tuple[int, Any]:
        pr = self.prs[self._number(params)]
        refused = self._refuse_merge(pr, body.get("head_commit_id"))
        if refused:
            return (405 if refused[0] == 405 else 409), None if refused[0] == 405 else {
                "message": refused[1]
            }
        self._merge(pr, body["Do"], "clawboo-bot")
        return 200, None

    def op_checks_list_for_ref(
        self, op: Any, params: Any, query: Any, body: Any
    ) -> tuple[int, Any]:
        runs = []
        for n, (name, check) in enumerate(self.checks.get(params["ref"], {}).items()):
            if check["via"] != "check_run":
                continue
            done = check["state"] != "pending"
            runs.append(
                deep_merge(
                    self.contract.synthesize(
                        self.contract.pointer("#/components/schemas/check-run")
                    ),
                    {
                        "id": n + 1,
                        "name": name,
                        "head_sha": params["ref"],
                        "status": "completed" if done else "in_progress",
                        "conclusion": check["state"] if done else None,
                        "details_url": f"https://ci.invalid/{name}",
                        "output": {
                            "title": f"{name} {check['state']}",
                            "summary": check["output"],
                            "text": None,
                            "annotations_count": 0,
                            "annotations_url": "https://forge.invalid/a",
                        },
                        "pull_requests": [],
                    },
                )
            )
        return 200, self._answer(op, 200, {"total_count": len(runs), "check_runs": runs})

    def op_repos_get_combined_status_for_ref(
        self, op: Any, params: Any, query: Any, body: Any
    ) -> tuple[int, Any]:
        item = self.contract.pointer("#/components/schemas/simple-commit-status")
        statuses = [
            deep_merge(
                self.contract.synthesize(item),
                {
                    "id": n + 1,
                    "context": name,
                    "state": check["state"],
                    "description": check["output"],
                    "target_url": f"https://ci.invalid/{name}",
                },
            )
            for n, (name, check) in enumerate(self.checks.get(params["ref"], {}).items())
            if check["via"] == "status"
        ]
        answer = {
            "state": self._check_state(params["ref"]),
            "statuses": statuses,
            "sha": params["ref"],
            "total_count": len(statuses),
        }
        return 200, self._answer(op, 200, answer)

    def op_repoGetCombinedStatusByRef(
        self, op: Any, params: Any, query: Any, body: Any
    ) -> tuple[int, Any]:
        statuses = [
            {
                "id": n + 1,
                "context": name,
                "status": check["state"],
                "description": check["output"],
                "target_url": f"https://ci.invalid/{name}",
            }
            for n, (name, check) in enumerate(self.checks.get(params["ref"], {}).items())
        ]
        return 200, self._answer(
            op,
            200,
            {
                "sha": params["ref"],
                "statuses": statuses,
                "state": self._check_state(params["ref"]),
                "total_count": len(statuses),
            },
        )

    def op_pulls_list_reviews(self, op: Any, params: Any, query: Any, body: Any) -> tuple[int, Any]:
        number = self._number(params)
        item = self.contract.pointer("#/components/schemas/pull-request-review")
        return 200, [
            deep_merge(
                self.contract.synthesize(item),
                {
                    "id": r.id,
                    "body": r.body,
                    "state": "CHANGES_REQUESTED",
                    "user": deep_merge(
                        self.contract.synthesize(
                            self.contract.pointer("#/components/schemas/simple-user")
                        ),
                        {"login": r.by},
                    ),
                },
            )
            for r in self.reviews
            if r.number == number
        ]

    def op_pulls_list_review_comments(
        self, op: Any, params: Any, query: Any, body: Any
    ) -> tuple[int, Any]:
        number = self._number(params)
        item = self.contract.pointer("#/components/schemas/pull-request-review-comment")
        out = []
        for r in self.reviews:
            if r.number != number:
                continue
            for n, c in enumerate(r.comments):
                out.append(
                    deep_merge(
                        self.contract.synthesize(item),
                        {
                            "id": r.id * 100 + n,
                            "pull_request_review_id": r.id,
                            "path": c["file"],
                            "line": c["line"],
                            "body": c["body"],
                        },
                    )
                )
        return 200, out

    def op_repoListPullReviews(
        self, op: Any, params: Any, query: Any, body: Any
    ) -> tuple[int, Any]:
        number = self._number(params)
        return 200, [
            {
                "id": r.id,
                "body": r.body,
                "state": "REQUEST_CHANGES",
                "dismissed": False,
                "user": self._user(r.by),
            }
            for r in self.reviews
            if r.number == number
        ]

    def op_repoGetPullReviewComments(
        self, op: Any, params: Any, query: Any, body: Any
    ) -> tuple[int, Any]:
        review = next(r for r in self.reviews if r.id == int(params["id"]))
        return 200, [
            {
                "id": review.id * 100 + n,
                "path": c["file"],
                "position": c["line"],
                "body": c["body"],
                "pull_request_review_id": review.id,
            }
            for n, c in enumerate(review.comments)
        ]

    # --- branches and their protection -------------------------------------------
    def _delete_branch(self, branch: str) -> int:
        """204 deleted, 404 no such branch, 403 refused (the default branch, or
        :attr:`refuse_branch_delete`)."""
        if not _ref_exists(self.bare, branch):
            return 404
        if self.refuse_branch_delete or branch == "main":
            return 403
        _git(self.bare, "update-ref", "-d", f"refs/heads/{branch}")
        return 204

    def op_git_delete_ref(self, op: Any, params: Any, query: Any, body: Any) -> tuple[int, Any]:
        ref = unquote(params["ref"])
        if not ref.startswith("heads/"):
            return 422, {"message": "Reference does not exist"}
        status = self._delete_branch(ref.removeprefix("heads/"))
        if status == 404:  # GitHub's word for a ref that is not there
            return 422, {"message": "Reference does not exist"}
        if status == 403:
            return 409, {"message": "Cannot delete this branch", "documentation_url": "x"}
        return 204, None

    def op_repoDeleteBranch(self, op: Any, params: Any, query: Any, body: Any) -> tuple[int, Any]:
        status = self._delete_branch(unquote(params["branch"]))
        if status == 403:
            return 403, {"message": "branch protected", "url": "x"}
        return status, None

    def op_repos_get_status_checks_protection(
        self, op: Any, params: Any, query: Any, body: Any
    ) -> tuple[int, Any]:
        if self.protection_forbidden:
            return 403, {"message": "Resource not accessible by personal access token"}
        branch = unquote(params["branch"])
        if branch not in self.protected:
            return 404, {"message": "Branch not protected", "documentation_url": "x"}
        names = self.protected[branch]
        url = f"https://forge.invalid/repos/{self.owner_repo}/branches/{branch}/protection"
        return 200, self._answer(
            op,
            200,
            {
                "url": f"{url}/required_status_checks",
                "contexts_url": f"{url}/required_status_checks/contexts",
                "strict": False,
                "contexts": names,
                "checks": [{"context": n, "app_id": None} for n in names],
            },
        )

    def op_repoListBranchProtection(
        self, op: Any, params: Any, query: Any, body: Any
    ) -> tuple[int, Any]:
        if self.protection_forbidden:
            return 403, {"message": "token does not have at least one of required scope(s)"}
        rules = [
            {
                "rule_name": name,
                "branch_name": name,
                "priority": self.protection_priority.get(name, 0),
                "created_at": f"2026-01-01T00:00:{n:02d}Z",
                "enable_status_check": bool(names),
                "status_check_contexts": names,
            }
            for n, (name, names) in enumerate(self.protected.items())
        ]
        # In the order made, as an older Gitea lists them: whoever reads the list
        # orders the rules as Gitea matches them.
        return 200, rules

    def op_repoGetBranchProtection(
        self, op: Any, params: Any, query: Any, body: Any
    ) -> tuple[int, Any]:
        if self.protection_forbidden:
            return 403, {"message": "token does not have at least one of required scope(s)"}
        name = unquote(params["name"])
        if name not in self.protected:
            return 404, None
        names = self.protected[name]
        return 200, self._answer(
            op,
            200,
            {
                "rule_name": name,
                "branch_name": name,
                "enable_status_check": bool(names),
                "status_check_contexts": names,
            },
        )


def _is_glob(name: str) -> bool:
    return any(c in "*?[]{}\\" for c in name)


def _gitea_glob_matches(name: str, branch: str) -> bool:
    """Gitea's match of a rule name: a plain name whatever the case; a glob (gobwas
    syntax, "/" the separator) as the regex it compiles to. The stand-in's own
    rendering, kept apart from the product's so that each checks the other."""
    if not _is_glob(name):
        return name.casefold() == branch.casefold()
    tokens = re.findall(r"\*\*|\*|\?|\{|\}|,|\[!?[^\]]*\]|\\.|.", name, re.DOTALL)
    regex, depth = "", 0
    for token in tokens:
        if token == "**":
            regex += ".*"
        elif token == "*":
            regex += "[^/]*"
        elif token == "?":
            regex += "[^/]"
        elif token == "{":
            regex, depth = regex + "(", depth + 1
        elif token == "}" and depth:
            regex, depth = regex + ")", depth - 1
        elif token == "," and depth:
            regex += "|"
        elif token.startswith("[") and len(token) > 1:
            regex += "[^" + token[2:-1] + "]" if token[1] == "!" else token
        elif token.startswith("\\") and len(token) == 2:
            regex += re.escape(token[1])
        else:
            regex += re.escape(token)
    return re.fullmatch(regex, branch, re.DOTALL) is not None


def _ref_exists(bare: Path, branch: str) -> bool:
    return (
        subprocess.run(  # noqa: S603
            ["git", "show-ref", "--verify", "-q", f"refs/heads/{branch}"],  # noqa: S607
            cwd=bare,
            check=False,
            timeout=30,
        ).returncode
        == 0
    )

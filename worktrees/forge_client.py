"""The forge's REST API, as the server uses it: GitHub, and Gitea/Forgejo.

One small client per vendor over one HTTP core (``httpx``): a pull request is
opened, edited, read and merged; the head commit's checks are read (GitHub: check
runs and commit statuses; Gitea: commit statuses), and the checks the base
branch's protection requires; reviews that request changes are read with their
line comments; a merged pull request's branch is deleted. Each answer is reduced
to the few plain values the product uses (:class:`PullRequest`, :class:`Check`,
:class:`ChangeRequest`), so the rest of the product never sees a vendor's shape.

Every call has a timeout; a connection failure, a 5xx, a 429 or a rate-limited
403 is retried with backoff, honouring ``Retry-After`` and GitHub's
``X-RateLimit-Remaining``/``X-RateLimit-Reset`` (a wait past :data:`MAX_WAIT_S` is
not slept: the call fails and the poll tries later). The token goes in the
``Authorization`` header only, never in a URL, a log line or an error.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx

from core.errors import ClawbooError
from core.models import Forge
from worktrees import branch_rules

log = logging.getLogger(__name__)

TIMEOUT = httpx.Timeout(15.0, connect=5.0)
ATTEMPTS = 4
BACKOFF_S = 0.5  # doubled each retry
MAX_WAIT_S = 30.0  # the longest a rate limit or Retry-After is waited for in a call
RETRIED_STATUSES = frozenset({429, 500, 502, 503, 504})
# How each vendor answers a pull request opened for a head and base that already
# have an open one: GitHub 422 ("A pull request already exists for …"), Gitea 409.
ALREADY_OPEN = frozenset({409, 422})
# The most pages of open pull requests a lookup reads (Gitea cannot filter by head).
LIST_PAGES = 20
OUTPUT_CHARS = 3_000
USER_AGENT = "clawboo-forge"

# The product's merge methods in each vendor's words (Repository forge.merge_method).
GITHUB_MERGE = {"merge": "merge", "squash": "squash", "rebase": "rebase"}
GITEA_MERGE = {"merge": "merge", "squash": "squash", "rebase": "rebase"}
# Gitea marks a draft by a title prefix (its WORK_IN_PROGRESS_PREFIXES' first).
GITEA_DRAFT_PREFIX = "WIP: "


class ForgeFailed(ClawbooError):
    """The forge refused a call or could not be reached (after the retries)."""

    code = "forge_failed"

    def __init__(
        self, detail: str, *, status: int | None = None, rate_limited: bool = False, **extra: Any
    ) -> None:
        super().__init__(detail, **({"forge_status": status} if status else {}), **extra)
        self.status = status
        # A 403 may be GitHub's rate limit rather than a refusal: callers that read a
        # 403 as "this token may not" must not read this one so.
        self.rate_limited = rate_limited


@dataclass(frozen=True)
class PullRequest:
    number: int
    url: str
    state: str  # open | closed | merged
    draft: bool
    head_sha: str
    merge_commit_sha: str | None = None
    merged_by: str | None = None


@dataclass(frozen=True)
class Check:
    name: str
    state: str  # pending | success | failure
    conclusion: str | None  # the forge's own word
    url: str | None = None
    output: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "state": self.state,
            "conclusion": self.conclusion,
            "url": self.url,
        }


@dataclass(frozen=True)
class ChangeRequest:
    review_id: int
    by: str
    body: str
    comments: list[dict[str, Any]] = field(default_factory=list)  # [{file, line, body}]

    @classmethod
    def of(
        cls, review: dict[str, Any], comments: list[dict[str, Any]], *, line_keys: tuple[str, str]
    ) -> ChangeRequest:
        """A review and its line comments as both forges answer them; they differ only
        in which keys name a comment's line (the current one, then the original)."""
        return cls(
            review_id=int(review["id"]),
            by=str((review.get("user") or {}).get("login") or "reviewer"),
            body=str(review.get("body") or ""),
            comments=[
                {
                    "file": c["path"],
                    "line": c.get(line_keys[0]) or c.get(line_keys[1]),
                    "body": c.get("body") or "",
                }
                for c in comments
            ],
        )


def _tail(text: str) -> str:
    text = text.strip()
    return text if len(text) <= OUTPUT_CHARS else "…" + text[-OUTPUT_CHARS:]


class Http:
    """The HTTP core: one ``httpx.Client`` per forge, retries and rate limits."""

    def __init__(
        self,
        base_url: str,
        headers: dict[str, str],
        *,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        try:
            self._client = httpx.Client(
                base_url=base_url,
                headers={"User-Agent": USER_AGENT, **headers},
                timeout=TIMEOUT,
                transport=transport or httpx.HTTPTransport(retries=1),
                follow_redirects=False,
            )
        except httpx.InvalidURL as exc:
            # A forge stored before its address was checked: that forge's failure (the
            # poll goes on to the next), not an error out of every caller.
            raise ForgeFailed(f"the forge's api_url is not a usable URL: {exc}") from None
        self._sleep = sleep

    def close(self) -> None:
        self._client.close()

    def _wait_for(self, response: httpx.Response) -> float | None:
        """How long to wait before retrying ``response``, or None: not retried."""
        retry_after = response.headers.get("Retry-After")
        limited = response.status_code in (403, 429) and (
            retry_after is not None or response.headers.get("X-RateLimit-Remaining") == "0"
        )
        if response.status_code not in RETRIED_STATUSES and not limited:
            return None
        if retry_after is not None:
            try:
                return max(0.0, float(retry_after))
            except ValueError:
                return BACKOFF_S
        if response.headers.get("X-RateLimit-Remaining") == "0":
            try:
                return max(0.0, float(response.headers["X-RateLimit-Reset"]) - time.time())
            except (KeyError, ValueError):
                return MAX_WAIT_S
        return 0.0

    def call(self, method: str, path: str, *, json: Any = None, params: Any = None) -> Any:
        """The JSON of a 2xx answer (None when it has none); ForgeFailed otherwise."""
        delay = BACKOFF_S
        for attempt in range(1, ATTEMPTS + 1):
            try:
                response = self._client.request(method, path, json=json, params=params)
            except httpx.InvalidURL as exc:
                raise ForgeFailed(f"{method} {path}: {exc}") from None
            except httpx.HTTPError as exc:
                if attempt == ATTEMPTS:
                    raise ForgeFailed(f"{method} {path}: {type(exc).__name__}") from None
                self._sleep(delay)
                delay *= 2
                continue
            if response.is_success:
                return response.json() if response.content else None
            wait = self._wait_for(response)
            if wait is None or attempt == ATTEMPTS:
                raise ForgeFailed(
                    f"{method} {path} answered {response.status_code}: {_message(response)}",
                    status=response.status_code,
                    rate_limited=wait is not None,
                )
            if wait > MAX_WAIT_S:
                raise ForgeFailed(
                    f"{method} {path}: rate limited for {int(wait)} s more; the poll retries",
                    status=response.status_code,
                    rate_limited=True,
                )
            log.info("forge %s %s answered %s; retrying", method, path, response.status_code)
            self._sleep(max(wait, delay))
            delay *= 2
        raise AssertionError("unreachable")


def _message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:300]
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return body["message"][:300]
    return str(body)[:300]


class ForgeClient:
    """What the product asks of a forge; one subclass per vendor."""

    def __init__(self, forge: Forge, http: Http) -> None:
        self.forge = forge
        self.http = http
        owner, name = forge.repo.split("/", 1)
        self.base = f"/repos/{quote(owner, safe='')}/{quote(name, safe='')}"

    def close(self) -> None:
        self.http.close()

    # Each vendor implements these.
    def open(self, *, head: str, base: str, title: str, body: str, draft: bool) -> PullRequest:
        raise NotImplementedError

    def find_open(self, *, head: str, base: str) -> PullRequest | None:
        """The open pull request from this repository's branch ``head`` into ``base``,
        or None. A pull request the forge opened for a process that died before the
        board recorded it is found here, and adopted rather than opened again."""
        raise NotImplementedError

    def _matches(self, raw: dict[str, Any], head: str, base: str) -> bool:
        """Whether a listed pull request is ``head`` (of this repository, not a fork's
        branch of the same name) into ``base``, and open."""
        ours = (raw.get("head") or {}).get("repo") or {}
        return (
            (raw.get("head") or {}).get("ref") == head
            and (raw.get("base") or {}).get("ref") == base
            and raw.get("state") == "open"
            and str(ours.get("full_name") or self.forge.repo).lower() == self.forge.repo.lower()
        )

    def edit(self, number: int, **changes: Any) -> PullRequest:
        raise NotImplementedError

    def get(self, number: int) -> PullRequest:
        # The same path and answer on both vendors.
        return self._pr(self.http.call("GET", f"{self.base}/pulls/{number}"))

    # The keys of a pull request's answer that say it merged.
    merged_keys: tuple[str, ...] = ("merged",)

    def _pr(self, raw: dict[str, Any]) -> PullRequest:
        # Both vendors answer a pull request in these keys but for which say it merged.
        merged = any(raw.get(key) for key in self.merged_keys)
        return PullRequest(
            number=int(raw["number"]),
            url=str(raw.get("html_url") or raw.get("url") or ""),
            state="merged" if merged else str(raw.get("state")),
            draft=bool(raw.get("draft")),
            head_sha=str((raw.get("head") or {}).get("sha") or ""),
            merge_commit_sha=raw.get("merge_commit_sha") if merged else None,
            merged_by=((raw.get("merged_by") or {}).get("login")),
        )

    def merge(self, number: int, *, sha: str, title: str, message: str) -> None:
        raise NotImplementedError

    def checks(self, sha: str) -> list[Check]:
        raise NotImplementedError

    def change_requests(self, number: int) -> list[ChangeRequest]:
        raise NotImplementedError

    def delete_branch(self, branch: str) -> bool:
        """Delete ``branch`` on the forge: True, or False when it was already gone
        (the forge deleted it on merge); ForgeFailed for any other refusal."""
        raise NotImplementedError

    def required_checks(self, branch: str) -> list[str]:
        """The status checks the forge's branch protection of ``branch`` requires
        (empty: the branch is not protected, or its protection requires none).
        ForgeFailed when the forge will not say (a 403: the token may not read it)."""
        raise NotImplementedError

    @property
    def can_toggle_draft(self) -> bool:
        return False


class GitHub(ForgeClient):
    """api.github.com (or a GitHub Enterprise ``/api/v3``), REST version 2022-11-28."""

    # A list's pull requests carry no ``merged``, only ``merged_at``.
    merged_keys = ("merged", "merged_at")

    def open(self, *, head: str, base: str, title: str, body: str, draft: bool) -> PullRequest:
        raw = self.http.call(
            "POST",
            f"{self.base}/pulls",
            json={"title": title, "head": head, "base": base, "body": body, "draft": draft},
        )
        return self._pr(raw)

    def find_open(self, *, head: str, base: str) -> PullRequest | None:
        # GitHub filters by ``owner:branch`` and base itself: one page is the answer.
        owner = self.forge.repo.split("/", 1)[0]
        listed = self.http.call(
            "GET",
            f"{self.base}/pulls",
            params={"state": "open", "head": f"{owner}:{head}", "base": base, "per_page": 100},
        )
        found = [raw for raw in listed or [] if self._matches(raw, head, base)]
        return self._pr(found[0]) if found else None

    def edit(self, number: int, **changes: Any) -> PullRequest:
        allowed = {k: v for k, v in changes.items() if k in ("title", "body", "state", "base")}
        return self._pr(self.http.call("PATCH", f"{self.base}/pulls/{number}", json=allowed))

    def merge(self, number: int, *, sha: str, title: str, message: str) -> None:
        self.http.call(
            "PUT",
            f"{self.base}/pulls/{number}/merge",
            json={
                "commit_title": title,
                "commit_message": message,
                "sha": sha,
                "merge_method": GITHUB_MERGE[self.forge.merge_method],
            },
        )

    def checks(self, sha: str) -> list[Check]:
        found: list[Check] = []
        runs = self.http.call(
            "GET", f"{self.base}/commits/{sha}/check-runs", params={"per_page": 100}
        )
        for run in (runs or {}).get("check_runs") or []:
            conclusion = run.get("conclusion")
            if run.get("status") != "completed":
                state = "pending"
            elif conclusion in ("success", "neutral", "skipped"):
                state = "success"
            else:
                state = "failure"
            output = run.get("output") or {}
            text = "\n".join(
                str(output.get(k)) for k in ("title", "summary", "text") if output.get(k)
            )
            found.append(
                Check(
                    name=str(run.get("name")),
                    state=state,
                    conclusion=conclusion or run.get("status"),
                    url=run.get("details_url") or run.get("html_url"),
                    output=_tail(text),
                )
            )
        combined = self.http.call(
            "GET", f"{self.base}/commits/{sha}/status", params={"per_page": 100}
        )
        for status in (combined or {}).get("statuses") or []:
            word = status.get("state")
            found.append(
                Check(
                    name=str(status.get("context")),
                    state={"success": "success", "pending": "pending"}.get(word, "failure"),
                    conclusion=word,
                    url=status.get("target_url"),
                    output=_tail(str(status.get("description") or "")),
                )
            )
        return found

    def change_requests(self, number: int) -> list[ChangeRequest]:
        reviews = self.http.call(
            "GET", f"{self.base}/pulls/{number}/reviews", params={"per_page": 100}
        )
        wanted = [r for r in reviews or [] if r.get("state") == "CHANGES_REQUESTED"]
        if not wanted:
            return []
        comments = self.http.call(
            "GET", f"{self.base}/pulls/{number}/comments", params={"per_page": 100}
        )
        return [
            ChangeRequest.of(
                review,
                [c for c in comments or [] if c.get("pull_request_review_id") == review["id"]],
                line_keys=("line", "original_line"),
            )
            for review in wanted
        ]

    def delete_branch(self, branch: str) -> bool:
        # The ref is a multi-segment path parameter (``heads/clawboo/task-1``):
        # its slashes stay, each segment is quoted.
        try:
            self.http.call("DELETE", f"{self.base}/git/refs/heads/{quote(branch, safe='/')}")
        except ForgeFailed as exc:
            # 422 "Reference does not exist" (delete_branch_on_merge got there first).
            if exc.status in (404, 422):
                return False
            raise
        return True

    def required_checks(self, branch: str) -> list[str]:
        path = f"{self.base}/branches/{quote(branch, safe='/')}/protection/required_status_checks"
        try:
            policy = self.http.call("GET", path) or {}
        except ForgeFailed as exc:
            if exc.status == 404:  # not protected, or no status checks required
                return []
            raise
        names = [str(n) for n in policy.get("contexts") or []]
        names += [str(c["context"]) for c in policy.get("checks") or [] if c.get("context")]
        return list(dict.fromkeys(names))


class Gitea(ForgeClient):
    """Gitea and Forgejo (``/api/v1``)."""

    @property
    def can_toggle_draft(self) -> bool:
        return True  # the title's WIP prefix is the draft mark

    @staticmethod
    def _title(title: str, draft: bool) -> str:
        bare = title.removeprefix(GITEA_DRAFT_PREFIX)
        return f"{GITEA_DRAFT_PREFIX}{bare}" if draft else bare

    def open(self, *, head: str, base: str, title: str, body: str, draft: bool) -> PullRequest:
        raw = self.http.call(
            "POST",
            f"{self.base}/pulls",
            json={"title": self._title(title, draft), "head": head, "base": base, "body": body},
        )
        return self._pr(raw)

    def find_open(self, *, head: str, base: str) -> PullRequest | None:
        # Gitea's list has no head filter, and its ``pulls/{base}/{head}`` answers a
        # pull request whatever its state (a closed one can hide the open one): the
        # open ones are read a page at a time and matched here. A page may hold fewer
        # than asked (the server's MAX_RESPONSE_ITEMS), so only an empty one ends it.
        for page in range(1, LIST_PAGES + 1):
            listed = self.http.call(
                "GET", f"{self.base}/pulls", params={"state": "open", "page": page, "limit": 50}
            )
            if not listed:
                return None
            for raw in listed:
                if self._matches(raw, head, base):
                    return self._pr(raw)
        log.warning("%s pages of open pull requests and no %s among them", LIST_PAGES, head)
        return None

    def edit(self, number: int, **changes: Any) -> PullRequest:
        body = {k: v for k, v in changes.items() if k in ("title", "body", "state", "base")}
        if "title" in body:
            body["title"] = self._title(body["title"], bool(changes.get("draft")))
        return self._pr(self.http.call("PATCH", f"{self.base}/pulls/{number}", json=body))

    def merge(self, number: int, *, sha: str, title: str, message: str) -> None:
        self.http.call(
            "POST",
            f"{self.base}/pulls/{number}/merge",
            json={
                "Do": GITEA_MERGE[self.forge.merge_method],
                "MergeTitleField": title,
                "MergeMessageField": message,
                "head_commit_id": sha,
            },
        )

    def checks(self, sha: str) -> list[Check]:
        combined = self.http.call("GET", f"{self.base}/commits/{sha}/status", params={"limit": 50})
        found = []
        for status in (combined or {}).get("statuses") or []:
            word = status.get("status")
            found.append(
                Check(
                    name=str(status.get("context")),
                    state={"success": "success", "pending": "pending", "warning": "success"}.get(
                        word, "failure"
                    ),
                    conclusion=word,
                    url=status.get("target_url"),
                    output=_tail(str(status.get("description") or "")),
                )
            )
        return found

    def change_requests(self, number: int) -> list[ChangeRequest]:
        reviews = self.http.call("GET", f"{self.base}/pulls/{number}/reviews", params={"limit": 50})
        asked = []
        for review in reviews or []:
            if review.get("state") != "REQUEST_CHANGES" or review.get("dismissed"):
                continue
            comments = self.http.call(
                "GET", f"{self.base}/pulls/{number}/reviews/{review['id']}/comments"
            )
            asked.append(
                ChangeRequest.of(
                    review, comments or [], line_keys=("position", "original_position")
                )
            )
        return asked

    def delete_branch(self, branch: str) -> bool:
        # One path segment, its slash escaped: Gitea unescapes it.
        try:
            self.http.call("DELETE", f"{self.base}/branches/{quote(branch, safe='')}")
        except ForgeFailed as exc:
            if exc.status == 404:  # the forge deleted it on merge
                return False
            raise
        return True

    def required_checks(self, branch: str) -> list[str]:
        # A rule is named by a branch or by a glob ("release/*"): the one that applies
        # is chosen among them all as Gitea chooses it, not looked up by the name.
        try:
            rules = self.http.call("GET", f"{self.base}/branch_protections")
        except ForgeFailed as exc:
            if exc.status == 404:
                return []
            raise
        rule = branch_rules.rule_for(rules if isinstance(rules, list) else [], branch)
        if rule is None or not rule.get("enable_status_check"):
            return []
        return [str(n) for n in rule.get("status_check_contexts") or []]


# The vendors, as data: kind → (client class, the Authorization header's scheme).
VENDORS: dict[str, tuple[type[ForgeClient], str, dict[str, str]]] = {
    "github": (
        GitHub,
        "Bearer",
        {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"},
    ),
    "gitea": (Gitea, "token", {"Accept": "application/json"}),
}


def client_for(forge: Forge, *, transport: httpx.BaseTransport | None = None) -> ForgeClient:
    """The client of ``forge`` (its token in the Authorization header alone)."""
    cls, scheme, headers = VENDORS[forge.kind]
    http = Http(
        forge.api_url,
        {**headers, "Authorization": f"{scheme} {forge.token}"},
        transport=transport,
    )
    return cls(forge, http)

"""The forge client: timeouts and backoff on every call, rate limits honoured, the
token in the Authorization header alone."""

from __future__ import annotations

import time

import httpx
import pytest

from core.models import Forge
from worktrees import forge_client, pull_requests
from worktrees.forge_client import ForgeFailed, Http

TOKEN = "sekrit-token"  # noqa: S105


def _http(handler, slept: list[float]) -> Http:
    return Http(
        "https://api.github.test",
        {"Authorization": f"Bearer {TOKEN}"},
        transport=httpx.MockTransport(handler),
        sleep=slept.append,
    )


def test_a_5xx_is_retried_with_growing_backoff_then_answered():
    answers = iter([503, 502, 200])
    slept: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers["Authorization"] == f"Bearer {TOKEN}"
        return httpx.Response(next(answers), json={"ok": True})

    assert _http(handler, slept).call("GET", "/x") == {"ok": True}
    assert slept == [forge_client.BACKOFF_S, forge_client.BACKOFF_S * 2]


def test_retry_after_and_the_rate_limit_reset_are_honoured():
    reset = time.time() + 5
    answers = iter(
        [
            httpx.Response(429, headers={"Retry-After": "3"}),
            httpx.Response(
                403, headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(reset))}
            ),
            httpx.Response(200, json=[]),
        ]
    )
    slept: list[float] = []
    assert _http(lambda request: next(answers), slept).call("GET", "/x") == []
    assert slept[0] == 3.0 and 3.0 <= slept[1] <= 6.0


def test_a_rate_limit_past_the_longest_wait_fails_now_without_the_token():
    reset = time.time() + 3600
    slept: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            403,
            headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(reset))},
            json={"message": "API rate limit exceeded"},
        )

    with pytest.raises(ForgeFailed) as caught:
        _http(handler, slept).call("GET", "/x")
    assert "rate limited" in caught.value.detail and slept == []
    assert TOKEN not in str(caught.value.as_dict())


def test_a_refusal_is_not_retried_and_a_dead_forge_gives_up():
    slept: list[float] = []
    with pytest.raises(ForgeFailed) as caught:
        _http(lambda r: httpx.Response(422, json={"message": "Validation Failed"}), slept).call(
            "POST", "/x", json={}
        )
    assert caught.value.status == 422 and slept == []

    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    with pytest.raises(ForgeFailed):
        _http(down, slept).call("GET", "/x")
    assert len(slept) == forge_client.ATTEMPTS - 1


def test_every_call_has_a_timeout():
    forge = Forge(kind="gitea", api_url="https://gitea.test/api/v1", repo="o/r", token=TOKEN)
    client = forge_client.client_for(forge)
    try:
        timeout = client.http._client.timeout
        assert timeout.connect and timeout.read
        assert client.http._client.headers["Authorization"] == f"token {TOKEN}"
    finally:
        client.close()


def test_a_rate_limited_protection_read_is_not_taken_for_a_token_that_may_not():
    forge = Forge(kind="github", api_url="https://api.github.test", repo="octo/app", token=TOKEN)
    reset = str(int(time.time() + 3600))

    def limited(request: httpx.Request) -> httpx.Response:
        headers = {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset}
        return httpx.Response(403, headers=headers, json={"message": "API rate limit exceeded"})

    def denied(request: httpx.Request) -> httpx.Response:
        return httpx.Response(403, json={"message": "Resource not accessible by integration"})

    client = forge_client.client_for(forge, transport=httpx.MockTransport(limited))
    with pytest.raises(ForgeFailed) as caught:
        pull_requests.required_checks(client, forge, "main")
    assert caught.value.rate_limited  # the refresh fails; the poll asks again
    client = forge_client.client_for(forge, transport=httpx.MockTransport(denied))
    assert pull_requests.required_checks(client, forge, "main") == []  # every check counts


def test_a_stored_api_url_that_is_no_url_is_that_forges_failure_not_an_error_of_its_callers():
    # Stored before the address was checked: the poll catches ForgeFailed, not InvalidURL.
    forge = Forge(kind="github", api_url="http://[::1", repo="o/r", token=TOKEN)
    with pytest.raises(ForgeFailed, match="not a usable URL"):
        forge_client.client_for(forge)

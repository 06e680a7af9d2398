"""50 real clients against one daphne on SQLite for a while: no 500, ever; a write
that cannot get the lock in time is ``503 busy`` with a Retry-After, and the clients
that honour it all get through. The default run loads it for seconds, ``-m slow`` for
longer (``bench/sqlite_clients.py`` runs the 60 s version)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from bench.sqlite_clients import run_clients
from core import registry

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]


@pytest.mark.sqlite_only  # SQLite's one writer is what this loads
@pytest.mark.parametrize(
    ("seconds", "tight_seconds"),
    [(6, 4), pytest.param(15, 10, marks=pytest.mark.slow)],
    ids=["short", "soak"],
)
def test_fifty_clients_on_sqlite_never_see_a_500(
    daphne: Callable[..., str],
    seconds: float,
    tight_seconds: float,
) -> None:
    user = get_user_model().objects.create_user("load", password="pw")
    registry.add_member("default", user)
    token = Token.objects.create(user=user).key
    base = daphne(extra_env={"CLAWBOO_HTTP_RATE_LIMIT": "0"})
    result = run_clients(base, token, clients=50, seconds=seconds)
    # The load really ran (each operation is four requests; on a busy 2-core machine
    # a 6 s window has seen as few as two per client): what is proven is below.
    assert result["operations"] >= 50, result
    assert result["server_errors"] == 0, result
    assert result["statuses"].get("0", 0) == 0, result  # no dropped connection
    assert result["busy_without_retry_after"] == 0, result
    assert result["failed_operations"] == 0, result
    # A write budget short enough that writes do run out of it: each is a 503 busy
    # with a Retry-After (a 500 before), never an error of the server's.
    tight = daphne(extra_env={"CLAWBOO_HTTP_RATE_LIMIT": "0", "CLAWBOO_DB_WRITE_BUDGET_MS": "60"})
    result = run_clients(tight, token, clients=50, seconds=tight_seconds)
    assert result["busy"] > 0, result
    assert result["server_errors"] == 0, result
    assert result["statuses"].get("0", 0) == 0, result
    assert result["busy_without_retry_after"] == 0, result

"""A bounded schemathesis run against /api/schema/: fuzzed requests to every
operation never produce a server error, and every response code is a documented one."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

schemathesis = pytest.importorskip("schemathesis")
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    response_schema_conformance,
    status_code_conformance,
)

from clawboo.wsgi import application  # noqa: E402

schema = schemathesis.openapi.from_wsgi("/api/schema/", application)


@pytest.fixture
def token(db):
    # Like Django's test client: keep the test's connection open across requests.
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    from tests.api.conftest import make_client

    client = make_client("fuzz")
    from rest_framework.authtoken.models import Token

    return Token.objects.get(user=client.user).key


@schema.parametrize()
@settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@pytest.mark.django_db
def test_api_survives_fuzzing(case, token):
    from django.core.cache import cache

    cache.clear()  # the per-client rate limit is not what is under test here
    response = case.call(headers={"Authorization": f"Token {token}"})
    case.validate_response(
        response,
        checks=(not_a_server_error, status_code_conformance, response_schema_conformance),
    )

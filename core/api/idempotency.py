"""``Idempotency-Key`` on create and settle POSTs.

The same key and body within 24 h returns the first response and writes nothing
again; the same key with another body is a 409 ``conflict``. The record is
claimed before the view runs (a unique insert), so concurrent retries serialise.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from typing import Any

from django.db import IntegrityError
from django.utils import timezone
from rest_framework.request import Request
from rest_framework.response import Response

from core import storage
from core.api.auth import bound_agent
from core.api.errors import error_body
from core.models import IdempotencyRecord
from core.retention import IDEMPOTENCY_TTL

HEADER = "Idempotency-Key"
# A key's answer is replayed this long (core.retention prunes the records after it).
TTL = IDEMPOTENCY_TTL
KEY_MAX = 255


def _claim(request: Request, key: str, digest: str) -> IdempotencyRecord | Response:
    """Insert the in-flight record, or answer from (or refuse by) an existing one."""
    now = timezone.now()
    user: Any = request.user  # authenticated: the wrapper checked

    def run() -> IdempotencyRecord | Response:
        IdempotencyRecord.objects.filter(user=user, key=key, created_at__lt=now - TTL).delete()
        existing = IdempotencyRecord.objects.filter(user=user, key=key).first()
        if existing is not None:
            if existing.body_sha256 != digest or existing.path != request.path:
                return Response(
                    error_body(
                        "conflict", "this Idempotency-Key was used with a different request"
                    ),
                    status=409,
                )
            if existing.status == 0:
                return Response(
                    error_body(
                        "conflict", "a request with this Idempotency-Key is still in flight"
                    ),
                    status=409,
                )
            response = Response(existing.response, status=existing.status)
            response["Idempotent-Replayed"] = "true"
            return response
        return IdempotencyRecord.objects.create(
            user=user,
            key=key,
            method=request.method or "POST",
            path=request.path,
            body_sha256=digest,
            created_at=now,
        )

    try:
        return storage.write(run)
    except IntegrityError:
        return Response(
            error_body("conflict", "a request with this Idempotency-Key is still in flight"),
            status=409,
        )


def _digest(request: Request) -> str:
    """The request's fingerprint: its body, and the agent its credential is bound to.
    An agent's key or a run's credential authenticates as the agent's owner, yet is
    the agent side and sees its agent's team only: it is never answered from the
    owner's record of the same key (which may show another team's work), nor the
    owner from its -- the same key is then another request (409)."""
    acting = bound_agent(getattr(request, "auth", None))
    if acting is None:
        return hashlib.sha256(request.body).hexdigest()
    return hashlib.sha256(f"agent {acting}\0".encode() + request.body).hexdigest()


def idempotent(view_method: Callable[..., Response]) -> Callable[..., Response]:
    """Wrap an APIView ``post`` so a retried request is answered from the record."""

    @functools.wraps(view_method)
    def wrapper(self: Any, request: Request, *args: Any, **kwargs: Any) -> Response:
        key = request.headers.get(HEADER)
        if not key or not request.user or not request.user.is_authenticated:
            return view_method(self, request, *args, **kwargs)
        if len(key) > KEY_MAX or not (key.isascii() and key.isprintable()):
            return Response(
                error_body(
                    "validation_error",
                    f"{HEADER}: at most {KEY_MAX} printable ASCII characters",
                    field=HEADER,
                ),
                status=400,
            )
        claimed = _claim(request, key, _digest(request))
        if isinstance(claimed, Response):
            return claimed
        record = claimed
        try:
            response = view_method(self, request, *args, **kwargs)
        except BaseException:
            storage.write(lambda: IdempotencyRecord.objects.filter(pk=record.pk).delete())
            raise
        if 200 <= response.status_code < 300:
            data = response.data

            def save() -> None:
                IdempotencyRecord.objects.filter(pk=record.pk).update(
                    status=response.status_code, response=data
                )

            storage.write(save)
        else:
            # A refused request wrote nothing: let the client retry it for real.
            storage.write(lambda: IdempotencyRecord.objects.filter(pk=record.pk).delete())
        return response

    return wrapper

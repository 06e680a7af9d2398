"""The one place where refusals become HTTP: every 4xx/5xx body is
``{"error": <code>, "detail": <sentence>, ...}``."""

from __future__ import annotations

import sys
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.db.utils import DatabaseError
from django.http import Http404, HttpResponse, JsonResponse
from django.views import csrf as django_csrf
from django.views import defaults as django_defaults
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions, status
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import set_rollback

from core.api.auth import NO_KEY
from core.api.status import status_for
from core.errors import ClawbooError
from core.storage import WriteBudgetExceeded, is_transient_lock_error

# A write that could not get the database's lock in its budget (SQLite's one writer,
# a PostgreSQL serialization failure that outlasted its retries) is the server's
# moment, not the request's fault: ``503 busy`` with a Retry-After, never a 500.
BUSY_RETRY_AFTER_S = 1
BUSY_DETAIL = "the database is busy with other writes; retry after a moment"


def is_busy(exc: BaseException | None) -> bool:
    return isinstance(exc, WriteBudgetExceeded) or (
        isinstance(exc, DatabaseError) and is_transient_lock_error(exc)
    )


def error_body(code: str, detail: str, **extra: Any) -> dict[str, Any]:
    return {"error": code, "detail": detail, **extra}


def _first_field_error(detail: Any, prefix: str = "") -> tuple[str, str]:
    if isinstance(detail, dict):
        for key, value in detail.items():
            name = key if key != "non_field_errors" else (prefix or "body")
            return _first_field_error(value, f"{prefix}.{name}" if prefix else str(name))
    if isinstance(detail, list) and detail:
        return _first_field_error(detail[0], prefix)
    return (prefix or "body", str(detail))


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's exception hook: domain errors by code, framework errors by kind. A
    refusal is written as JSON whatever the view writes its answers in (the schema's
    YAML, say) and whatever the caller asked for: the envelope, every time."""
    response = _refusal(exc)
    request = context.get("request")
    if response is not None and request is not None:
        request.accepted_renderer = JSONRenderer()
        request.accepted_media_type = JSONRenderer.media_type
    return response


def _refusal(exc: Exception) -> Response | None:
    if isinstance(exc, ClawbooError):
        body = exc.as_dict()
    elif isinstance(exc, Http404):
        body = error_body("not_found", "not found")
    elif isinstance(exc, DjangoPermissionDenied):
        body = error_body("forbidden", "you do not have access to this")
    elif isinstance(exc, exceptions.NotAuthenticated):
        body = error_body("unauthenticated", NO_KEY)
    elif isinstance(exc, exceptions.AuthenticationFailed):
        body = error_body("unauthenticated", str(exc.detail))
    elif isinstance(exc, exceptions.PermissionDenied):
        body = error_body("forbidden", str(exc.detail))
    elif isinstance(exc, exceptions.Throttled):
        body = error_body("rate_limited", str(exc.detail), retry_after=getattr(exc, "wait", None))
    elif isinstance(exc, exceptions.ParseError):
        # The parser's words name the body themselves ("The request body is not valid JSON: …").
        body = error_body("validation_error", str(exc.detail), field="body")
    elif isinstance(exc, exceptions.ValidationError):
        field, message = _first_field_error(exc.detail)
        body = error_body("validation_error", f"{field}: {message}", field=field)
    elif isinstance(exc, exceptions.MethodNotAllowed):
        body = error_body("method_not_allowed", str(exc.detail))
    elif isinstance(exc, exceptions.UnsupportedMediaType):
        body = error_body("unsupported_media_type", str(exc.detail))
    elif isinstance(exc, exceptions.NotFound):
        body = error_body("not_found", str(exc.detail))
    elif isinstance(exc, exceptions.NotAcceptable):
        body = error_body("not_acceptable", str(exc.detail))
    elif is_busy(exc):
        body = error_body("busy", BUSY_DETAIL, retry_after=BUSY_RETRY_AFTER_S)
    elif isinstance(exc, exceptions.APIException):
        body = error_body("error", str(exc.detail))
        set_rollback()
        return Response(body, status=exc.status_code)
    else:
        return None
    set_rollback()
    response = Response(body, status=status_for(body["error"]))
    if body["error"] == "unauthenticated":
        response["WWW-Authenticate"] = 'Token realm="api"'
    if body["error"] == "rate_limited" and body.get("retry_after"):
        response["Retry-After"] = str(int(body["retry_after"]) + 1)
    if body["error"] == "busy":
        response["Retry-After"] = str(BUSY_RETRY_AFTER_S)
    return response


@csrf_exempt  # an unknown path is a 404 whatever the method, not a CSRF page
def api_404(request: Any, exception: Exception | None = None) -> JsonResponse:
    """Unknown paths under /api/ answer in the API's error envelope, not HTML."""
    return JsonResponse(error_body("not_found", "no such path"), status=status.HTTP_404_NOT_FOUND)


# Django's own error pages, for what fails outside a DRF view (URL resolution, the
# CSRF middleware, an uncaught exception): under /api/ they are the JSON envelope
# too, elsewhere Django's usual pages. The project's urls.py installs them.


def is_api(request: Any) -> bool:
    return str(getattr(request, "path_info", "")).startswith("/api/")


def csrf_failure(request: Any, reason: str = "") -> Any:
    if is_api(request):
        return JsonResponse(
            error_body(
                "forbidden",
                f"CSRF check failed ({reason}); scripts authenticate with "
                "'Authorization: Token <key>'",
            ),
            status=403,
        )
    return django_csrf.csrf_failure(request, reason=reason)


def bad_request(request: Any, exception: Exception | None = None) -> Any:
    if is_api(request):
        return JsonResponse(error_body("validation_error", "bad request"), status=400)
    return django_defaults.bad_request(request, exception or Exception("bad request"))


def permission_denied(request: Any, exception: Exception | None = None) -> Any:
    if is_api(request):
        return JsonResponse(error_body("forbidden", "you do not have access to this"), status=403)
    return django_defaults.permission_denied(request, exception or Exception("forbidden"))


def page_not_found(request: Any, exception: Exception | None = None) -> Any:
    if is_api(request):
        return api_404(request, exception)
    return django_defaults.page_not_found(request, exception)


def server_error(request: Any) -> Any:
    # Django calls this inside its except block: the failure is still at hand.
    if is_busy(sys.exc_info()[1]):
        return busy_response(request)
    if is_api(request):
        return JsonResponse(
            error_body("server_error", "the server failed on this request"),
            status=500,
        )
    return django_defaults.server_error(request)


def busy_response(request: Any) -> HttpResponse:
    """``503 busy`` outside a DRF view (middleware, a session save, a plain view)."""
    response: HttpResponse
    if is_api(request):
        body = error_body("busy", BUSY_DETAIL, retry_after=BUSY_RETRY_AFTER_S)
        response = JsonResponse(body, status=503)
    else:
        response = HttpResponse(BUSY_DETAIL, status=503, content_type="text/plain")
    response["Retry-After"] = str(BUSY_RETRY_AFTER_S)
    return response

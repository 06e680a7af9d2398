"""The API's door: what no view could answer well is refused here, as JSON.

Under ``/api/``: a body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` is ``413``, before any
of it is parsed (DRF would otherwise read the stream past Django's limit); a body
sent with a content coding (``Content-Encoding: gzip``, any but ``identity``) is
``415``, before it is read (DRF would parse the coded bytes as plain); a path
or query string holding a NUL or a lone surrogate is ``400`` (either would reach
a query and break it on PostgreSQL); every refusal is the usual error envelope.
Elsewhere (the admin's filters and object ids, the board's pages) such a path or
query is ``400`` too, as Django's own page.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse

from core.api.errors import bad_request, error_body, is_api
from core.checks import unstorable_text


class ApiGuardMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if is_api(request):
            refused = self.refusal(request)
            if refused is not None:
                return refused
        elif unstorable_address(request) is not None:
            return bad_request(request)
        return self.get_response(request)

    def refusal(self, request: HttpRequest) -> HttpResponse | None:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        raw = request.META.get("CONTENT_LENGTH") or "0"
        try:
            length = int(raw)
        except ValueError:
            return _refuse(400, "validation_error", "Content-Length is not a number")
        if length < 0:
            return _refuse(400, "validation_error", "Content-Length is not a number")
        if limit is not None and length > limit:
            return _too_large(limit)
        coding = content_coding(request)
        if coding is not None:
            status, body = coding_refusal(coding)
            return JsonResponse(body, status=status)
        unstorable = unstorable_address(request)
        if unstorable is not None:
            field, problem = unstorable
            return _refuse(400, "validation_error", f"{field}: {problem}", field=field[:100])
        if request.method not in ("GET", "HEAD", "OPTIONS"):
            try:
                request.body  # noqa: B018 - read now, under Django's size check
            except RequestDataTooBig:
                return _too_large(limit)
        return None


def content_coding(request: HttpRequest) -> str | None:
    """The content coding a request says its body is in, or None for none
    (``identity``, or no ``Content-Encoding``): the API decodes none."""
    return coded(request.META.get("HTTP_CONTENT_ENCODING"))


def coded(content_encoding: str | None) -> str | None:
    """A ``Content-Encoding`` header's coding, None for none or ``identity``."""
    coding = (content_encoding or "").strip()
    if coding == "" or coding.lower() == "identity":
        return None
    return coding


def coding_refusal(coding: str) -> tuple[int, dict[str, object]]:
    """The answer to a body in a content coding (the REST API's and MCP's)."""
    detail = f"Content-Encoding {coding[:40]!r} is not read here: send the body uncoded"
    return 415, error_body("unsupported_media_type", detail)


def unstorable_address(request: HttpRequest) -> tuple[str, str] | None:
    """The path, or the query parameter, holding text no database can store, and why."""
    problem = unstorable_text(request.path)
    if problem:
        return ("path", problem)
    for key, values in request.GET.lists():
        for text in (key, *values):
            problem = unstorable_text(text)
            if problem:
                return (str(key), problem)
    return None


def _refuse(status: int, code: str, detail: str, **extra: object) -> JsonResponse:
    return JsonResponse(error_body(code, detail, **extra), status=status)


def _too_large(limit: int | None) -> JsonResponse:
    return _refuse(413, "payload_too_large", f"the request body is over {limit} bytes", limit=limit)

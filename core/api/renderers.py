"""How the API's answers are written: JSON, or for a browser the browsable API's page
for what succeeded -- never for a refusal (core.api.errors says what a refusal is) --
and how the way to write one is chosen (:class:`ContentNegotiation`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework import exceptions, renderers
from rest_framework.negotiation import DefaultContentNegotiation


class BrowsableAPIRenderer(renderers.BrowsableAPIRenderer):
    """The browsable API's page for what succeeded; an error stays the JSON envelope.

    A browser asks for ``text/html`` first, so content negotiation picks the page for
    every answer, refusals included; the contract says every error under /api/ is the
    envelope whatever asked for it. The response's Content-Type was set from the
    negotiated renderer before ``render`` runs: it is put right here, as DRF's own
    renderer rewrites a 204's status here."""

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> Any:
        response = (renderer_context or {}).get("response")
        if response is not None and response.status_code >= 400:
            response["Content-Type"] = "application/json"
            return renderers.JSONRenderer().render(data, "application/json", renderer_context)
        return super().render(data, accepted_media_type, renderer_context)


class ContentNegotiation(DefaultContentNegotiation):
    """DRF's negotiation, with ``?format=`` refused as ``Accept`` is: a format no
    renderer writes is ``406 not_acceptable`` naming the formats offered, where DRF
    answers 404 as if the path did not exist. Negotiation runs before authentication
    and before the body is read, so nothing is written."""

    def filter_renderers(self, renderers: Any, format: str) -> Any:  # noqa: A002 - DRF's name
        offered = [renderer for renderer in renderers if renderer.format == format]
        if not offered:
            raise exceptions.NotAcceptable(
                "the format asked for (?format=) is not offered: "
                + ", ".join(dict.fromkeys(renderer.format for renderer in renderers))
            )
        return offered

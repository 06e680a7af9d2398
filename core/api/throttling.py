"""The general per-client HTTP limit: ``CLAWBOO_HTTP_RATE_LIMIT`` requests per 60 s."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework.throttling import SimpleRateThrottle


class ClientRateThrottle(SimpleRateThrottle):
    scope = "client"

    def get_rate(self) -> str | None:
        limit = int(getattr(settings, "CLAWBOO_HTTP_RATE_LIMIT", 3000))
        return f"{limit}/min" if limit > 0 else None

    def allow_request(self, request: Any, view: Any) -> bool:
        if self.rate is None:
            return True
        return super().allow_request(request, view)

    def get_cache_key(self, request: Any, view: Any) -> str:
        if request.user and request.user.is_authenticated:
            ident = f"user:{request.user.pk}"
        else:
            ident = f"ip:{self.get_ident(request)}"
        return f"clawboo-throttle:{ident}"

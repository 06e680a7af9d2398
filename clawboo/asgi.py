"""ASGI entry point: HTTP (Django, with static files), ``/mcp/`` (the board's MCP
server) and ``/ws/board/`` (Channels)."""

import gc
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clawboo.settings")
django_http = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402
from django.urls import path  # noqa: E402

from boardmcp.http import with_mcp  # noqa: E402
from clawboo import bodylimit  # noqa: E402
from core.consumers import BoardConsumer  # noqa: E402
from core.ws_auth import auth_stack  # noqa: E402

# Before daphne accepts a connection: bodies are bounded while they arrive.
bodylimit.install()

websocket_urls = [path("ws/board/", BoardConsumer.as_asgi())]

application = ProtocolTypeRouter(
    {
        # The embedded default serves its own static files (admin, API docs, board).
        "http": bodylimit.BodyLimitApp(with_mcp(ASGIStaticFilesHandler(django_http))),
        # No blanket Origin check: it guards cookie sessions only (core.ws_auth), so
        # token clients, which send no Origin, are served.
        "websocket": auth_stack(URLRouter(websocket_urls)),
    }
)
# Everything loaded so far (Django, the apps, the URLconf) lives as long as the
# server. Frozen, it is left out of the garbage collector's full passes, which
# otherwise walk all of it and stall the event loop -- and every live frame of the
# moment -- several times longer than a pass over what the server made since.
gc.freeze()

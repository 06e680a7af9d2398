"""``/mcp/``: the board's MCP server over Streamable HTTP, in the project's ASGI app.

Each request is authenticated with the REST API's tokens (``Authorization: Token
<key>``, or ``Bearer <key>`` for clients that only send that scheme) or a run
credential, before the SDK sees it; the caller rides along in the ASGI scope to the
tools. The SDK's transport runs stateless with JSON responses: any server process
can answer any request, as with the REST API, so several daphne processes behind
one address need nothing shared but the database.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.http.request import split_domain_port, validate_host
from mcp.server.transport_security import TransportSecuritySettings

from boardmcp.credentials import caller_for_key
from boardmcp.tools import BoardMcpServer, build_server
from core.api import throttling
from core.api.middleware import coded, coding_refusal

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Any]]
Send = Callable[[Any], Awaitable[None]]
# Loose on purpose: Django's, Starlette's and Channels' handlers each spell it apart.
ASGIApp = Callable[..., Awaitable[None]]

PATH = "/mcp"
SCHEMES = ("token", "bearer")


def is_mcp_path(path: str) -> bool:
    return path == PATH or path == PATH + "/"


async def _json(send: Send, status: int, body: dict[str, Any], **headers: str) -> None:
    data = json.dumps(body).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    raw += [(k.encode(), v.encode()) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": data})


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


def presented_key(scope: Scope) -> str | None:
    value = _header(scope, b"authorization")
    if value is None:
        return None
    scheme, _, key = value.partition(" ")
    return key.strip() if scheme.lower() in SCHEMES and key.strip() else None


class McpHttpApp:
    """The ASGI app serving ``/mcp``. The SDK's session manager needs a task group
    that outlives requests; daphne sends no lifespan events, so the first request on
    an event loop starts it, in a task of its own."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready: asyncio.Event | None = None
        self._app: ASGIApp | None = None
        self._runner: asyncio.Task[None] | None = None

    async def _started(self) -> ASGIApp:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            server = build_server()
            self._app = server.streamable_http_app(
                streamable_http_path=PATH,
                stateless_http=True,
                json_response=True,
                # Hosts are Django's ALLOWED_HOSTS, checked in __call__.
                transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            )
            self._loop, self._ready = loop, asyncio.Event()
            self._runner = loop.create_task(self._run_sessions(server, self._ready))
        assert self._ready is not None and self._app is not None
        await self._ready.wait()
        return self._app

    @staticmethod
    async def _run_sessions(server: BoardMcpServer, ready: asyncio.Event) -> None:
        async with server.session_manager.run():
            ready.set()
            await asyncio.Event().wait()  # until the loop is stopped

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        host, _port = split_domain_port(_header(scope, b"host") or "")
        if not validate_host(host, settings.ALLOWED_HOSTS):
            await _json(send, 400, {"error": "bad_request", "detail": "host not allowed"})
            return
        # As at the REST API's door: a coded body is refused before it is read (the
        # SDK would parse it as plain JSON).
        coding = coded(_header(scope, b"content-encoding"))
        if coding is not None:
            status, refusal = coding_refusal(coding)
            await _json(send, status, refusal)
            return
        caller = await database_sync_to_async(caller_for_key)(presented_key(scope))
        if caller is None:
            await _json(
                send,
                401,
                {
                    "error": "unauthenticated",
                    "detail": "send Authorization: Token <key> (an API token or a run credential)",
                },
                **{"www-authenticate": 'Token realm="mcp"'},
            )
            return
        if caller.client:
            wait = await database_sync_to_async(throttling.wait_for)(caller.client)
            if wait is not None:
                await _json(
                    send,
                    429,
                    {"error": "rate_limited", "detail": "too many requests", "retry_after": wait},
                    **{"retry-after": str(int(wait) + 1)},
                )
                return
        app = await self._started()
        await app(
            {**scope, "path": PATH, "raw_path": PATH.encode(), "clawboo.caller": caller},
            receive,
            send,
        )


def with_mcp(http: ASGIApp) -> ASGIApp:
    """``http`` with ``/mcp`` (and ``/mcp/``) served by the board's MCP server."""
    mcp = McpHttpApp()

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and is_mcp_path(scope.get("path", "")):
            await mcp(scope, receive, send)
        else:
            await http(scope, receive, send)

    return app

"""The request body limit, enforced while the body arrives, not after it is stored.

Django refuses a body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` only once the server has
received all of it, and daphne (Twisted) receives a whole body, into a temp file
past 100 kB, before the application sees a byte: a 300 MB anonymous upload was a
300 MB file. Two guards close that, for every path and before any authentication:

* :class:`BoundedWebRequest`, daphne's request with a counting body sink: a
  ``Content-Length`` over the limit is answered ``413`` as soon as the headers are
  in, a chunked body as soon as its count passes the limit; either way nothing past
  the limit is stored, and the connection is closed after a short drain (so the
  client reads the answer instead of a reset). :func:`install` puts it in daphne's
  place; :mod:`clawboo.asgi` calls it, so ``daphne clawboo.asgi:application``
  (``up`` and any deployment) gets it without a server of its own.
* :class:`BodyLimitApp`, the same rule as ASGI middleware for servers that stream
  the body to the application (uvicorn, hypercorn): it checks ``Content-Length``
  up front and counts ``http.request`` chunks, answering ``413`` itself.

Both answer with the API's error envelope (``payload_too_large``, with ``limit``).
daphne's request also leaves a form body unparsed: every body reaches the application.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from daphne.http_protocol import WebRequest
from django.conf import settings

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[..., Awaitable[None]]

# After a refusal the client may still be sending: read (and drop) at most this
# long, so the 413 is not lost to a reset, then close.
DRAIN_SECONDS = 2.0


def body_limit() -> int | None:
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def refusal_body(limit: int) -> bytes:
    return json.dumps(
        {
            "error": "payload_too_large",
            "detail": f"the request body is over {limit} bytes",
            "limit": limit,
        }
    ).encode()


# --- daphne ------------------------------------------------------------------------


class BoundedWebRequest(WebRequest):  # type: ignore[misc]
    """daphne's request, refusing a body past the limit while it arrives."""

    _received = 0
    _drained = 0
    _refused = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Twisted parses a form POST's body itself before the application sees it,
        # and answers a multipart one it cannot parse (no boundary) with a bare 400 of
        # its own: an error outside the API's envelope. daphne passes the raw body on
        # and never reads Twisted's parse, so the application is the one to judge it.
        self._parsePOSTFormSubmission = False

    def gotLength(self, length: int | None) -> None:  # noqa: N802 - Twisted's name
        limit = body_limit()
        if limit is not None and length is not None and length > limit:
            self.content = None
            self._refuse(limit)
            return
        super().gotLength(length)

    def handleContentChunk(self, data: bytes) -> None:  # noqa: N802 - Twisted's name
        if self._refused:
            self._drained += len(data)
            if self._drained > (body_limit() or 0):
                _abort(self.channel.transport)  # a client that will not stop
            return  # drained, never stored
        self._received += len(data)
        limit = body_limit()
        if limit is not None and self._received > limit:
            if self.content is not None:
                self.content.close()
                self.content = None
            self._refuse(limit)
            return
        super().handleContentChunk(data)

    def requestReceived(self, command: bytes, path: bytes, version: bytes) -> None:  # noqa: N802
        if self._refused:
            # Answered already, and the whole body is in: close cleanly now.
            self.channel.transport.loseConnection()
            return
        super().requestReceived(command, path, version)

    def _refuse(self, limit: int) -> None:
        from twisted.internet import reactor as installed

        reactor: Any = installed  # daphne's, installed before any connection
        self._refused = True
        # Twisted answers ``Expect: 100-continue`` right after gotLength: a refused
        # body must not be invited after its refusal.
        self.requestHeaders.removeHeader(b"expect")
        body = refusal_body(limit)
        head = (
            "HTTP/1.1 413 Payload Too Large\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n"
        ).encode()
        transport = self.channel.transport
        transport.write(head + body)
        reactor.callLater(DRAIN_SECONDS, _abort, transport)


def _abort(transport: Any) -> None:
    if not getattr(transport, "disconnected", False):
        transport.abortConnection()


def install() -> None:
    """Make daphne build :class:`BoundedWebRequest` for every HTTP connection.

    daphne's factory looks its request class up by name at each connection, and
    offers no setting for it; this is the one place that replaces it."""
    import daphne.http_protocol

    daphne.http_protocol.WebRequest = BoundedWebRequest  # type: ignore[misc]


# --- any ASGI server -----------------------------------------------------------------


class BodyLimitApp:
    """ASGI middleware: a body over the limit is ``413`` before the app reads past it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(
        self, scope: Scope, receive: Callable[[], Awaitable[Message]], send: Any
    ) -> None:
        limit = body_limit()
        if scope.get("type") != "http" or limit is None:
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            await _answer_413(send, limit)
            return
        received = 0
        over = False
        started = False

        async def counted_receive() -> Message:
            nonlocal received, over
            if over:
                return {"type": "http.disconnect"}
            message = await receive()
            if message.get("type") == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    over = True
                    # The app sees the client leave; the 413 is ours to send.
                    return {"type": "http.disconnect"}
            return message

        async def watched_send(message: Message) -> None:
            nonlocal started
            if message.get("type") == "http.response.start":
                if over:
                    return  # the refusal below answers instead
                started = True
            elif over and not started:
                return
            await send(message)

        await self.app(scope, counted_receive, watched_send)
        if over and not started:
            await _answer_413(send, limit)


def _content_length(scope: Scope) -> int | None:
    for key, value in scope.get("headers", ()):
        if bytes(key).lower() == b"content-length":
            try:
                return int(bytes(value))
            except ValueError:
                return None
    return None


async def _answer_413(send: Any, limit: int) -> None:
    body = refusal_body(limit)
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})

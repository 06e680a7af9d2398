"""OpenTelemetry export through the official SDK: off unless the standard variables
name an OTLP endpoint (``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``).

Off, nothing is imported and no exporter or provider is created: :func:`tracer` is
None and every export is one environment look. On, one ``TracerProvider`` per
process with a batching OTLP/HTTP exporter (``opentelemetry-exporter-otlp-proto-http``,
the ``otel`` extra), configured by the standard ``OTEL_*`` variables themselves
(headers, timeout, service name).

The board's spans are written after the fact (a run's step is exported once it has
ended), so their ids are derived from what they stand for -- the trace's from its
task tree's root, a span's from its task, run or step -- and a child exported before
its parent still names it: one trace per task tree, parented task → run → step.
The foundation knows nothing of tasks: :mod:`board.traces` says what a span is.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import os
import threading
from collections.abc import Mapping
from typing import Any

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
SERVICE_NAME = "clawboo"

_lock = threading.Lock()
_provider: Any = None
_missing = False  # the endpoint is set, the SDK is not installed
log = logging.getLogger(__name__)
# The ids the next span takes (set around one start_span by export_span).
_next = threading.local()


def enabled() -> bool:
    return any(os.environ.get(name) for name in ENDPOINT_VARIABLES)


def trace_id_for(key: str) -> int:
    """A 128-bit trace id derived from ``key`` (never 0, which OpenTelemetry reserves)."""
    return int.from_bytes(hashlib.sha256(b"trace:" + key.encode()).digest()[:16], "big") or 1


def span_id_for(key: str) -> int:
    """A 64-bit span id derived from ``key`` (never 0)."""
    return int.from_bytes(hashlib.sha256(b"span:" + key.encode()).digest()[:8], "big") or 1


def provider() -> Any:
    """The process's tracer provider, made on first use; None when export is off, or
    when the endpoint is set but the ``otel`` extra is not installed (said once in the
    log, not once per span)."""
    global _provider, _missing
    if not enabled() or _missing:
        return None
    with _lock:
        if _provider is None:
            try:
                _provider = _make_provider()
            except ImportError as exc:
                _missing = True
                log.warning(
                    "OTEL_EXPORTER_OTLP_ENDPOINT is set but the OpenTelemetry SDK is not "
                    "installed (%s): no spans are exported; pip install 'clawboo[otel]'",
                    exc,
                )
                return None
        return _provider


def _make_provider() -> Any:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

    class DerivedIds(RandomIdGenerator):
        """The ids :func:`export_span` chose for the span it starts, else random."""

        def generate_span_id(self) -> int:
            chosen = getattr(_next, "span_id", None)
            return chosen if chosen is not None else super().generate_span_id()

        def generate_trace_id(self) -> int:
            chosen = getattr(_next, "trace_id", None)
            return chosen if chosen is not None else super().generate_trace_id()

    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", SERVICE_NAME)})
    made = TracerProvider(resource=resource, id_generator=DerivedIds())
    made.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return made


def export_span(
    *,
    trace_key: str,
    span_key: str,
    parent_key: str | None,
    name: str,
    start: dt.datetime,
    end: dt.datetime,
    attributes: Mapping[str, Any],
    error: str | None = None,
) -> bool:
    """Export one finished span whose trace, own and parent ids derive from the keys.
    False when export is off."""
    made = provider()
    if made is None:
        return False
    from opentelemetry import trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext, Status, StatusCode, TraceFlags

    trace_id = trace_id_for(trace_key)
    context = None
    if parent_key is not None:
        parent = SpanContext(
            trace_id=trace_id,
            span_id=span_id_for(parent_key),
            is_remote=True,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )
        context = trace.set_span_in_context(NonRecordingSpan(parent))
    tracer = made.get_tracer("clawboo")
    values = {k: v for k, v in attributes.items() if v is not None}
    _next.span_id, _next.trace_id = span_id_for(span_key), trace_id
    try:
        span = tracer.start_span(name, context=context, attributes=values, start_time=_nanos(start))
    finally:
        _next.span_id = _next.trace_id = None
    if error:
        span.set_status(Status(StatusCode.ERROR, error[:500]))
    span.end(end_time=_nanos(max(end, start)))
    return True


def flush(timeout_ms: int = 5_000) -> None:
    """Send what is batched (tests, shutdown); nothing when export is off."""
    if _provider is not None:
        _provider.force_flush(timeout_ms)


def reset() -> None:
    """Forget the provider (tests that change the environment), shutting it down."""
    global _provider, _missing
    with _lock:
        if _provider is not None:
            _provider.shutdown()
        _provider = None
        _missing = False


def _nanos(at: dt.datetime) -> int:
    return int(at.timestamp() * 1_000_000_000)

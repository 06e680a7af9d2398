"""Every request body is declared once: the keys the OpenAPI document lists for an
operation are the keys its view accepts (the declaration it hands to
``json_object``), and the required ones agree too."""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any

import pytest
from drf_spectacular.generators import EndpointEnumerator, SchemaGenerator
from rest_framework import serializers
from rest_framework.views import APIView

from core.api.bodies import body_fields, is_open, json_object, required_keys

WRITE_METHODS = ("post", "put", "patch")


def _specs_used(view_class: type, method: str) -> list[Any] | None:
    """The body declarations the view's handler passes to ``json_object`` (following
    ``super().<method>``), or None when it never reads its body that way."""
    found: list[Any] = []
    seen_call = False
    for klass in view_class.__mro__:
        handler = klass.__dict__.get(method)
        if handler is None:
            continue
        inner = inspect.unwrap(handler)
        tree = ast.parse(textwrap.dedent(inspect.getsource(inner)))
        names = dict(inner.__globals__)
        if inner.__closure__:
            names.update(
                zip(
                    inner.__code__.co_freevars,
                    (c.cell_contents for c in inner.__closure__),
                    strict=True,
                )
            )
        calls_super = False
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            if isinstance(node.func, ast.Name) and node.func.id == "json_object":
                seen_call = True
                found.append(eval(compile(ast.Expression(node.args[1]), "<spec>", "eval"), names))
            if (
                isinstance(node.func, ast.Attribute)
                and node.func.attr == method
                and isinstance(node.func.value, ast.Call)
                and getattr(node.func.value.func, "id", None) == "super"
            ):
                calls_super = True
        if not calls_super:
            break
    return found if seen_call else None


def _accepted(specs: list[Any]) -> tuple[set[str], set[str]]:
    """The keys a view accepts across its declarations, and the keys every one of
    them requires."""
    keys: set[str] = set()
    required: set[str] | None = None
    for spec in specs:
        keys |= set(body_fields(spec))
        wanted = set(required_keys(spec))
        required = wanted if required is None else required & wanted
    return keys, required or set()


def _documented(schema: dict[str, Any], operation: dict[str, Any]) -> tuple[set[str], set[str]]:
    body = operation.get("requestBody")
    if body is None:
        return set(), set()
    media = body["content"].get("application/json") or next(iter(body["content"].values()))
    shape = media["schema"]
    if "$ref" in shape:
        shape = schema["components"]["schemas"][shape["$ref"].rsplit("/", 1)[1]]
    return set(shape.get("properties", {})), set(shape.get("required", []))


def _operations() -> list[tuple[str, str, type]]:
    rows = []
    for path, _regex, method, callback in EndpointEnumerator().get_api_endpoints():
        view_class = getattr(callback, "cls", None)
        if method.lower() in WRITE_METHODS and view_class is not None:
            if issubclass(view_class, APIView):
                rows.append((path, method.lower(), view_class))
    return rows


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return SchemaGenerator().get_schema(request=None, public=True)


def drift(schema: dict[str, Any], path: str, method: str, view_class: type) -> str | None:
    """What differs between the document and the view, or None."""
    operation = schema["paths"][path][method]
    specs = _specs_used(view_class, method)
    documented, documented_required = _documented(schema, operation)
    if specs is None:
        return f"{view_class.__name__}.{method} reads no declared body"
    accepted, required = _accepted(specs)
    if documented != accepted:
        return f"documented {sorted(documented)} but accepts {sorted(accepted)}"
    if documented_required != required:
        return f"documents required {sorted(documented_required)} but requires {sorted(required)}"
    return None


def test_the_writes_are_enumerated() -> None:
    # A guard on the walk itself: the board, worktrees, routines and the registry.
    paths = {path for path, _, _ in _operations()}
    assert "/api/board/tasks/{task_id}/heartbeat" in paths
    assert "/api/board/tasks/{task_id}/workspace/handoff" in paths
    assert "/api/schedules" in paths and "/api/agents" in paths
    assert len(paths) >= 25


@pytest.mark.parametrize(
    ("path", "method", "view_class"),
    _operations(),
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_the_documented_body_is_the_accepted_body(schema, path, method, view_class) -> None:
    assert drift(schema, path, method, view_class) is None


def test_a_view_accepting_a_key_the_document_omits_is_found(schema) -> None:
    # The heartbeat once accepted lease_ms while its schema omitted it: a view
    # reading a different declaration than its document is reported.
    class Wider(serializers.Serializer):
        ticket = serializers.CharField()
        lease_ms = serializers.IntegerField(required=False)
        extra = serializers.CharField(required=False)

    class DriftedHeartbeat(APIView):
        def post(self, request: Any, task_id: str) -> Any:
            return json_object(request, Wider)

    found = drift(schema, "/api/board/tasks/{task_id}/heartbeat", "post", DriftedHeartbeat)
    assert found is not None and "extra" in found


def test_the_open_bodies_are_the_pass_through_ones() -> None:
    from routines.api import ScheduleCreateSerializer, SchedulePatchSerializer

    assert is_open(ScheduleCreateSerializer) and is_open(SchedulePatchSerializer)

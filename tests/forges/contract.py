"""The vendors' published API descriptions, as the stand-in forge checks them.

``contracts/github.openapi.json`` is the subset of GitHub's OpenAPI 3.0 description
(``github/rest-api-description``, as npm ``@octokit/openapi`` ships it) holding the
operations Clawboo calls and every component they reference;
``contracts/gitea.swagger.json`` the same for Gitea's Swagger 2.0 document
(``go-gitea/gitea`` ``templates/swagger/v1_json.tmpl``). :class:`Contract` finds the
operation a request names, and says what is wrong with a request (parameters, body)
or an answer (status, body) against it; :func:`synthesize` makes a body that the
document accepts, so the stand-in's answers carry every field a real one must.

Schemas are checked with ``jsonschema`` (Draft 4, the dialect both documents' schemas
are written in; OpenAPI 3.0's ``nullable`` becomes ``anyOf [..., null]``).
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema

HERE = Path(__file__).parent / "contracts"


def _nullable(node: Any) -> Any:
    if isinstance(node, dict):
        node = {k: _nullable(v) for k, v in node.items()}
        if node.pop("nullable", False):
            return {"anyOf": [node, {"type": "null"}]}
        return node
    if isinstance(node, list):
        return [_nullable(v) for v in node]
    return node


@dataclass(frozen=True)
class Operation:
    method: str
    template: str
    spec: dict[str, Any]

    @property
    def operation_id(self) -> str:
        return str(self.spec.get("operationId"))


class Contract:
    def __init__(self, name: str) -> None:
        raw = json.loads((HERE / name).read_text())
        self.swagger = raw.get("swagger") == "2.0"
        self.doc = raw if self.swagger else _nullable(raw)
        self.base_path = raw.get("basePath", "") if self.swagger else ""
        self.operations: list[tuple[re.Pattern[str], Operation]] = []
        for template, item in self.doc["paths"].items():
            for method, spec in item.items():
                pattern = self._pattern(template, spec)
                self.operations.append((pattern, Operation(method.upper(), template, spec)))

    def _pattern(self, template: str, spec: dict[str, Any]) -> re.Pattern[str]:
        """A path parameter is one segment, unless GitHub's document marks it
        ``x-multi-segment`` (a ref such as ``heads/clawboo/task-1``, its slashes kept)."""
        multi = {p.get("name") for p in self._parameters_of(spec) if p.get("x-multi-segment")}

        def segment(match: re.Match[str]) -> str:
            return "(.+)" if match.group(1) in multi else "([^/]+)"

        return re.compile("^" + re.sub(r"\\\{([^}]+)\\\}", segment, re.escape(template)) + "$")

    # --- resolving ------------------------------------------------------------
    def resolve(self, node: Any) -> Any:
        while isinstance(node, dict) and "$ref" in node and len(node) == 1:
            node = self.pointer(node["$ref"])
        return node

    def pointer(self, ref: str) -> Any:
        node: Any = self.doc
        for part in ref.lstrip("#/").split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return node

    def check_schema(self, schema: dict[str, Any], value: Any, where: str) -> list[str]:
        rooted = {**self.doc, **schema} if "$ref" not in schema else {**self.doc, **schema}
        validator = jsonschema.Draft4Validator(rooted)
        return [
            f"{where}: {'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message[:300]}"
            for e in validator.iter_errors(value)
        ]

    # --- requests ---------------------------------------------------------------
    def find(self, method: str, path: str) -> tuple[Operation, dict[str, str]] | None:
        if self.base_path and path.startswith(self.base_path):
            path = path[len(self.base_path) :]
        for pattern, op in self.operations:
            match = pattern.match(path)
            if match and op.method == method:
                names = re.findall(r"\{([^}]+)\}", op.template)
                return op, dict(zip(names, match.groups(), strict=True))
        return None

    def _parameters(self, op: Operation) -> list[dict[str, Any]]:
        return self._parameters_of(op.spec)

    def _parameters_of(self, spec: dict[str, Any]) -> list[dict[str, Any]]:
        return [self.resolve(p) for p in spec.get("parameters") or []]

    def _param_ok(self, param: dict[str, Any], raw: str) -> bool:
        kind = param.get("type") or (self.resolve(param.get("schema") or {}) or {}).get("type")
        if kind == "integer":
            return bool(re.fullmatch(r"-?\d+", raw))
        if kind == "boolean":
            return raw in ("true", "false")
        enum = param.get("enum") or (param.get("schema") or {}).get("enum")
        return not enum or raw in enum

    def check_request(
        self,
        op: Operation,
        path_params: dict[str, str],
        query: dict[str, str],
        body: Any,
        has_body: bool,
    ) -> list[str]:
        problems = []
        params = self._parameters(op)
        declared = {(p["in"], p["name"]): p for p in params}
        for name, raw in path_params.items():
            param = declared.get(("path", name))
            if param is None or not self._param_ok(param, raw):
                problems.append(f"path parameter {name}={raw!r} is not what the document says")
        for name, raw in query.items():
            param = declared.get(("query", name))
            if param is None:
                problems.append(f"query parameter {name!r} is not in the document")
            elif not self._param_ok(param, raw):
                problems.append(f"query parameter {name}={raw!r} has the wrong type")
        schema, required = self._body_schema(op)
        if schema is None:
            if has_body:
                problems.append("a body the operation does not take")
        elif not has_body:
            if required:
                problems.append("the operation's body is required")
        else:
            problems += self.check_schema(schema, body, f"{op.operation_id} request body")
        return problems

    def _body_schema(self, op: Operation) -> tuple[dict[str, Any] | None, bool]:
        if self.swagger:
            for param in self._parameters(op):
                if param.get("in") == "body":
                    return param["schema"], bool(param.get("required"))
            return None, False
        body = self.resolve(op.spec.get("requestBody"))
        if not body:
            return None, False
        return body["content"]["application/json"]["schema"], bool(body.get("required"))

    # --- answers ----------------------------------------------------------------
    def response_schema(self, op: Operation, status: int) -> dict[str, Any] | None:
        responses = op.spec["responses"]
        entry = responses.get(str(status))
        if entry is None:
            raise KeyError(f"{op.operation_id} declares no {status} answer")
        entry = self.resolve(entry)
        if self.swagger:
            return entry.get("schema")
        content = (entry.get("content") or {}).get("application/json")
        return None if content is None else content.get("schema")

    def check_response(self, op: Operation, status: int, body: Any) -> list[str]:
        try:
            schema = self.response_schema(op, status)
        except KeyError as exc:
            return [str(exc)]
        if schema is None:
            return [] if body is None else [f"{op.operation_id} {status} has no body"]
        return self.check_schema(schema, body, f"{op.operation_id} {status} answer")

    # --- bodies the document accepts ------------------------------------------
    def synthesize(self, schema: Any, depth: int = 0) -> Any:
        """A minimal value ``schema`` accepts: every required property (Swagger 2.0
        declares none, so there every declared scalar), placeholders of the right
        type; nullable things null."""
        schema = self.resolve(schema)
        if not isinstance(schema, dict):
            return None
        if "anyOf" in schema or "oneOf" in schema:
            options = [self.resolve(s) for s in schema.get("anyOf") or schema.get("oneOf")]
            if any(o.get("type") == "null" for o in options):
                return None
            return self.synthesize(options[0], depth)
        if "allOf" in schema:
            merged: dict[str, Any] = {}
            for part in schema["allOf"]:
                value = self.synthesize(part, depth)
                if isinstance(value, dict):
                    merged.update(value)
            return merged
        if "enum" in schema:
            return schema["enum"][0]
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = next(k for k in kind if k != "null")
        if kind == "object" or "properties" in schema:
            props = schema.get("properties") or {}
            wanted = schema.get("required")
            if wanted is None:
                wanted = (
                    [
                        k
                        for k, v in props.items()
                        if self.resolve(v).get("type") in ("string", "integer", "boolean")
                    ]
                    if depth < 3
                    else []
                )
            return {k: self.synthesize(props.get(k, {}), depth + 1) for k in wanted}
        if kind == "array":
            return []
        if kind == "integer":
            return 1
        if kind == "number":
            return 1.0
        if kind == "boolean":
            return False
        if kind == "string":
            fmt = schema.get("format")
            if fmt == "date-time":
                return "2026-01-01T00:00:00Z"
            if fmt in ("uri", "url"):
                return "https://forge.invalid/x"
            if fmt == "email":
                return "someone@forge.invalid"
            return "x"
        return None


def deep_merge(base: Any, over: Any) -> Any:
    if isinstance(base, dict) and isinstance(over, dict):
        out = copy.deepcopy(base)
        for key, value in over.items():
            out[key] = deep_merge(out.get(key), value) if key in out else value
        return out
    return over

"""The OpenAPI 3.1 description of the public JSON routes, declared next to each view.

Invariants:
- each operation is declared once, by `@api.operation(...)` on its view (core's and the
  overlays'); the document (`document()`) is built from the URL conf: a routed view's
  declarations become the operations of its route, whose path and path parameters come from the
  route itself (`<int:event_id>` → `{event_id}`, an id), so a path cannot drift from the code;
- error answers are declared by their codes: each code's HTTP status is the one the views answer
  (`events.errors.http_status`, the enums of the `errors.py` modules), so the statuses cannot
  drift either; every error body is the pinned envelope `{"error": {"code", "message", …}}`;
- shared component schemas (`register_schema`) and the outbound webhook messages
  (`register_webhook`, the top-level `webhooks` map) are registered by the app that owns them,
  an overlay in its own modules or `AppConfig.ready()`; a name is registered once (the same
  value again is a no-op);
- tests check the document against the OpenAPI 3.1 schema, that every public JSON route is
  declared and every declaration routed, that each request schema names exactly the fields its
  view reads, and serve it to Schemathesis (tests/events/api_description/).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.converters import IntConverter, PathConverter, StringConverter
from django.urls.resolvers import RoutePattern

from events.errors import registered_code

OPENAPI_VERSION = "3.1.0"
API_VERSION = "1"
BIGINT_MAX = 2**63 - 1
ATTRIBUTE = "openapi_operations"  # the declarations a view carries (functools.wraps copies it)
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")

# Headers some error codes always answer with (the views set them; `_error_responses` requires
# them on a status only when every code of that status carries them).
ERROR_HEADERS: dict[str, tuple[str, ...]] = {
    "rate_limited": ("Retry-After",),
    "service_unavailable": ("Retry-After",),
}
HEADERS: dict[str, dict[str, Any]] = {
    "Retry-After": {
        "description": "Seconds to wait before retrying.",
        "schema": {"type": "string", "pattern": "^[0-9]+$"},
    },
    "Cache-Control": {
        "description": "`private, no-store`: the answer is about this request only.",
        "schema": {"type": "string"},
    },
    "Idempotent-Replayed": {
        "description": "`true` when this is the stored first answer to the Idempotency-Key.",
        "schema": {"type": "string", "enum": ["true"]},
    },
}


def ref(name: str) -> dict[str, str]:
    """A reference to a component schema."""
    return {"$ref": f"#/components/schemas/{name}"}


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


# --- declarations ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Operation:
    """One operation as declared on its view (`api.operation`)."""

    method: str
    operation_id: str
    summary: str
    description: str = ""
    tags: tuple[str, ...] = ()
    parameters: tuple[dict[str, Any], ...] = ()  # query and header parameters
    path_parameters: Mapping[str, str] = field(default_factory=dict)  # name → description
    request_body: dict[str, Any] | None = None
    responses: Mapping[int, dict[str, Any]] = field(default_factory=dict)
    errors: tuple[str, ...] = ()
    security: tuple[dict[str, list[str]], ...] | None = None

    def as_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "operationId": self.operation_id,
            "summary": self.summary,
        }
        if self.description:
            body["description"] = self.description
        if self.tags:
            body["tags"] = list(self.tags)
        if self.parameters:
            body["parameters"] = copy.deepcopy(list(self.parameters))
        if self.request_body is not None:
            body["requestBody"] = copy.deepcopy(self.request_body)
        responses = {str(status): copy.deepcopy(r) for status, r in self.responses.items()}
        for status, response in _error_responses(self.errors).items():
            if status in responses:
                raise ValueError(f"{self.operation_id}: status {status} declared twice")
            responses[status] = response
        body["responses"] = dict(sorted(responses.items()))
        if self.security is not None:
            body["security"] = [dict(s) for s in self.security]
        return body


class ApiDescription:
    """The registry the document is built from: operations (on their views), component schemas,
    security schemes, tags and outbound webhooks."""

    def __init__(self) -> None:
        self.operations: list[Operation] = []  # every declaration made, routed or not
        self.schemas: dict[str, dict[str, Any]] = {}
        self.security_schemes: dict[str, dict[str, Any]] = {}
        self.tags: dict[str, str] = {}
        self.webhooks: dict[str, dict[str, Any]] = {}

    def operation(
        self,
        method: str,
        *,
        operation_id: str,
        summary: str,
        description: str = "",
        tags: Iterable[str] = (),
        query: Iterable[dict[str, Any]] = (),
        headers: Iterable[dict[str, Any]] = (),
        path_parameters: Mapping[str, str] | None = None,
        body: dict[str, Any] | None = None,
        responses: Mapping[int, dict[str, Any]] | None = None,
        errors: Iterable[str] = (),
        security: Iterable[dict[str, list[str]]] | None = None,
    ) -> Callable[[Callable], Callable]:
        """Declare the operation `method` of the view this decorates. `query` and `headers` are
        parameter objects without their `in`; `body` a requestBody; `responses` the answers other
        than the errors, which `errors` names by code (statuses derived)."""
        method = method.lower()
        if method not in METHODS:
            raise ValueError(f"{operation_id}: unknown method {method!r}")
        declared = Operation(
            method=method,
            operation_id=operation_id,
            summary=summary,
            description=description,
            tags=tuple(tags),
            parameters=(
                *({"in": "query", **p} for p in query),
                *({"in": "header", **p} for p in headers),
            ),
            path_parameters=dict(path_parameters or {}),
            request_body=body,
            responses=dict(responses or {}),
            errors=tuple(errors),
            security=tuple(security) if security is not None else None,
        )

        def decorate(view: Callable) -> Callable:
            existing = getattr(view, ATTRIBUTE, ())
            if any(op.method == method for op in existing):
                raise ValueError(f"{operation_id}: {method} declared twice on one view")
            setattr(view, ATTRIBUTE, (*existing, declared))
            self.operations.append(declared)
            _forget()
            return view

        return decorate

    def register_schema(self, name: str, schema: dict[str, Any]) -> None:
        _register(self.schemas, "schema", name, schema)

    def register_security_scheme(self, name: str, scheme: dict[str, Any]) -> None:
        _register(self.security_schemes, "security scheme", name, scheme)

    def register_tag(self, name: str, description: str) -> None:
        _register(self.tags, "tag", name, description)

    def register_webhook(self, name: str, path_item: dict[str, Any]) -> None:
        if not isinstance(path_item, dict) or not path_item:
            raise ValueError(f"webhook {name!r}: a path item (a non-empty mapping) is needed")
        _register(self.webhooks, "webhook", name, path_item)


def _register(into: dict[str, Any], what: str, name: str, value: Any) -> None:
    if not isinstance(name, str) or not name:
        raise ValueError(f"a {what} needs a name")
    if name in into and into[name] != value:
        raise ValueError(f"{what} {name!r} is registered already, with another value")
    into[name] = copy.deepcopy(value)
    _forget()


api = ApiDescription()


def register_schema(name: str, schema: dict[str, Any]) -> None:
    """A component schema (`#/components/schemas/<name>`)."""
    api.register_schema(name, schema)


def register_webhook(name: str, path_item: dict[str, Any]) -> None:
    """An outbound webhook message: `path_item` is an OpenAPI Path Item (usually one `post`
    whose requestBody is the message we send), listed under the document's `webhooks`."""
    api.register_webhook(name, path_item)


# --- error answers -----------------------------------------------------------------------------


def _error_responses(codes: Iterable[str]) -> dict[str, dict[str, Any]]:
    """One response per HTTP status of `codes`: the envelope with `code` limited to them."""
    by_status: dict[int, list[str]] = {}
    for code in codes:
        member = registered_code(code)
        if member is None:
            raise ValueError(f"error code {code!r} is not registered (errors.py)")
        by_status.setdefault(member.http_status, []).append(code)
    responses = {}
    for status, found in sorted(by_status.items()):
        schema = {
            "allOf": [
                ref("Error"),
                {
                    "type": "object",
                    "properties": {
                        "error": {"type": "object", "properties": {"code": {"enum": found}}}
                    },
                },
            ]
        }
        response: dict[str, Any] = {
            "description": "Error: " + ", ".join(f"`{code}`" for code in found) + ".",
            "content": {"application/json": {"schema": schema}},
        }
        always = set.intersection(*(set(ERROR_HEADERS.get(code, ())) for code in found))
        sometimes = set().union(*(ERROR_HEADERS.get(code, ()) for code in found))
        if sometimes:
            response["headers"] = {
                name: {**HEADERS[name], "required": name in always} for name in sorted(sometimes)
            }
        responses[str(status)] = response
    return responses


ERROR_SCHEMA = {
    "type": "object",
    "description": "Every error answer: a stable `code` (never translated) and a human "
    "`message` (translated), with details that depend on the code (`field`, `attendee`, "
    "`question`, `path`, `retry_after`, …).",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
            },
            "additionalProperties": True,
        }
    },
}
# --- the document ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Route:
    """One route of the URL conf: its OpenAPI path (None for a regular expression route), its
    Django name, view and converters."""

    path: str | None
    name: str
    view: Callable
    converters: Mapping[str, Any]

    @property
    def operations(self) -> tuple[Operation, ...]:
        return getattr(self.view, ATTRIBUTE, ())


def routes(urlconf: Any = None) -> Iterator[Route]:
    """Every route of the URL conf, walked recursively."""
    yield from _walk(get_resolver(urlconf).url_patterns, "", "", {}, True)


def _walk(
    patterns: Iterable[Any],
    prefix: str,
    namespace: str,
    converters: dict[str, Any],
    plain: bool,
) -> Iterator[Route]:
    for entry in patterns:
        pattern = entry.pattern
        is_route = isinstance(pattern, RoutePattern)
        text = str(pattern) if is_route else ""
        own = {**converters, **(pattern.converters if is_route else {})}
        if isinstance(entry, URLResolver):
            inner = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
            yield from _walk(entry.url_patterns, prefix + text, inner, own, plain and is_route)
        elif isinstance(entry, URLPattern):
            path = "/" + _template(prefix + text) if plain and is_route else None
            yield Route(path, f"{namespace}{entry.name or ''}", entry.callback, own)


def _template(route: str) -> str:
    """`api/v1/events/<int:event_id>/x` → `api/v1/events/{event_id}/x`."""
    return re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route)


def _path_parameter(name: str, converter: Any, description: str) -> dict[str, Any]:
    if isinstance(converter, IntConverter):
        schema: dict[str, Any] = ref("Id")
    elif isinstance(converter, StringConverter | PathConverter):
        schema = {"type": "string", "minLength": 1}
    else:
        raise ValueError(f"path parameter {name}: no schema for {type(converter).__name__}")
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": schema,
    }


INFO = {
    "title": "backbone-events public API",
    "version": API_VERSION,
    "description": (
        "The public JSON routes: the attendee intake and waiting list, the host's catalog "
        "reads and sale seam (Standard Webhooks), the attendance desk, the health check. "
        'Every answer is JSON; an error is `{"error": {"code", "message", …}}`, its '
        "`code` stable and never translated. Guides: docs/integrators.md."
    ),
}


def document(urlconf: Any = None) -> dict[str, Any]:
    """The OpenAPI 3.1 document of the routes of `urlconf` (the project's when None)."""
    paths: dict[str, dict[str, Any]] = {}
    for route in routes(urlconf):
        if not route.operations:
            continue
        if route.path is None:
            raise ValueError(f"{route.name}: a declared view needs a path() route, not re_path()")
        item = paths.setdefault(route.path, {})
        described = {n for op in route.operations for n in op.path_parameters}
        unknown = described - set(route.converters)
        if unknown:
            raise ValueError(f"{route.path}: no path parameter named {sorted(unknown)}")
        for op in route.operations:
            if op.method in item:
                raise ValueError(f"{route.path}: {op.method} declared twice")
            item[op.method] = op.as_dict()
        if route.converters:
            descriptions = {n: d for op in route.operations for n, d in op.path_parameters.items()}
            item["parameters"] = [
                _path_parameter(name, converter, descriptions.get(name, ""))
                for name, converter in route.converters.items()
            ]
    components: dict[str, Any] = {"schemas": dict(sorted(api.schemas.items()))}
    if api.security_schemes:
        components["securitySchemes"] = dict(sorted(api.security_schemes.items()))
    return {
        "openapi": OPENAPI_VERSION,
        "info": dict(INFO),
        "jsonSchemaDialect": "https://spec.openapis.org/oas/3.1/dialect/base",
        "tags": [{"name": n, "description": d} for n, d in api.tags.items()],
        "paths": dict(sorted(paths.items())),
        "webhooks": dict(sorted(api.webhooks.items())),
        "components": copy.deepcopy(components),
    }


@cache
def document_bytes() -> bytes:
    """The project's document as served (built once per process, rebuilt after a
    registration)."""
    return json.dumps(document(), ensure_ascii=False, indent=1).encode()


def _forget() -> None:
    document_bytes.cache_clear()


# --- request bodies and answers ----------------------------------------------------------------


def json_body(schema: dict[str, Any], *, description: str = "") -> dict[str, Any]:
    body: dict[str, Any] = {"required": True, "content": {"application/json": {"schema": schema}}}
    if description:
        body["description"] = description
    return body


def json_answer(
    description: str, schema: dict[str, Any], *, headers: Mapping[str, bool] | None = None
) -> dict[str, Any]:
    """A JSON response; `headers` maps a name of HEADERS to whether it is always sent."""
    answer: dict[str, Any] = {
        "description": description,
        "content": {"application/json": {"schema": schema}},
    }
    if headers:
        answer["headers"] = {
            name: {**HEADERS[name], "required": required} for name, required in headers.items()
        }
    return answer


register_schema("Error", ERROR_SCHEMA)
register_schema(
    "Id",
    {"type": "integer", "minimum": 1, "maximum": BIGINT_MAX, "description": "A database id."},
)

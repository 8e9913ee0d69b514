"""The API description, served: the OpenAPI document (`GET /api/v1/openapi.json`) and its viewer
for people (`GET /api/docs/`: Swagger UI from our own static files, the
`drf-spectacular-sidecar` package; no CDN, nothing fetched from elsewhere at run time).

The document is built from the declarations on the views (events.openapi) once per process; it
is public and the same for everyone, so it is cacheable (an ETag, `Cache-Control: public`).
The viewer page runs no inline script (its start-up is a static file, under the site's CSP).
"""

from __future__ import annotations

import hashlib

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import condition, require_GET

from events import openapi
from events.openapi import api, json_answer
from events.views_api import json_methods

CACHE_CONTROL = "public, max-age=300"


def _etag(request: HttpRequest) -> str:
    return hashlib.sha256(openapi.document_bytes()).hexdigest()[:32]


@api.operation(
    "get",
    operation_id="openapiDocument",
    summary="This API description (OpenAPI 3.1)",
    tags=["Operations"],
    responses={
        200: json_answer(
            "The OpenAPI 3.1 document of the public JSON routes, with the outbound webhooks "
            "under `webhooks`.",
            {"type": "object", "required": ["openapi", "info", "paths"]},
        )
    },
)
@json_methods("GET")
@condition(etag_func=_etag)
def openapi_document(request: HttpRequest) -> HttpResponse:
    response = HttpResponse(openapi.document_bytes(), content_type="application/json")
    response["Cache-Control"] = CACHE_CONTROL
    return response


@require_GET
def api_docs(request: HttpRequest) -> HttpResponse:
    response = render(request, "events/api_docs.html", {"document_url": "/api/v1/openapi.json"})
    response["Cache-Control"] = CACHE_CONTROL
    return response

"""A request body the client never finishes sending answers 408 (the read timed out) or 400 (the
connection broke), never a 500 with a traceback.

Gunicorn gives the app a socket that times out a silent read (config/gunicorn.py,
BODY_READ_TIMEOUT); Django turns that, or a connection reset mid-body, into UnreadablePostError
wherever the body is first read: a JSON view's `request.body` (intake, waiting list, seam, desk),
a form's `request.POST`, the CSRF check's, each of which would answer it its own way (a 500
with a traceback, a JSON 500 `server_error`, a 403 CSRF page). Here, before any of them, the
body is read once:
- a declared body within DATA_UPLOAD_MAX_MEMORY_SIZE is read here (every route reads it whole
  anyway; a larger one is refused unread by the route, 413, or by Django, as before);
- a body that cannot be read answers at once: JSON in the pinned error shape on the JSON routes
  (`request_timeout` 408, `body_unreadable` 400), a plain-text page elsewhere; one WARNING line
  names the method, the path (tokens masked) and the client, without a traceback.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.http import HttpRequest, HttpResponse, UnreadablePostError
from django.utils.translation import gettext as _

from events.access_log import escape_controls, mask
from events.client import client_address
from events.errors import Code
from events.views_api import transport_error

logger = logging.getLogger("events.request")

# The routes that answer JSON whatever happens (interfaces.md "Routes").
JSON_PREFIXES = ("/api/", "/seams/", "/desk/api/")


def _declared_length(request: HttpRequest) -> int:
    raw = request.META.get("CONTENT_LENGTH") or ""
    return int(raw) if raw.isascii() and raw.isdigit() else 0


class RequestBodyMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        length = _declared_length(request)
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if length and (limit is None or length <= limit):
            try:
                request.body  # noqa: B018 — read now, kept by Django for every later reader
            except UnreadablePostError as error:
                return unreadable(request, error)
        return self.get_response(request)


def _cause(error: BaseException) -> BaseException:
    """The socket's own error under Django's UnreadablePostError (wrapped once per reader)."""
    while isinstance(error, UnreadablePostError) and error.__cause__ is not None:
        error = error.__cause__
    return error


def unreadable(request: HttpRequest, error: UnreadablePostError) -> HttpResponse:
    cause = _cause(error)
    timed_out = isinstance(cause, TimeoutError)
    code = Code.REQUEST_TIMEOUT if timed_out else Code.BODY_UNREADABLE
    logger.warning(
        "%s %s from %s: the request body could not be read (%s): answering %d",
        escape_controls(request.method or ""),
        escape_controls(mask(request.path)),
        client_address(request),
        type(cause).__name__,
        code.http_status,
    )
    message = (
        _("The request body did not arrive in time.")
        if timed_out
        else _("The request body could not be read.")
    )
    if request.path.startswith(JSON_PREFIXES) or request.content_type == "application/json":
        return transport_error(code, message)
    return HttpResponse(
        f"{message}\n", status=code.http_status, content_type="text/plain; charset=utf-8"
    )

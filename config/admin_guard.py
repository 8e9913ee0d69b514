"""A NUL byte in an admin page's query string answers 400.

The admin's list filters pass their values to the database as written (`?status__exact=`,
`?verb=`, a field's own lookups), and PostgreSQL refuses text holding a NUL: the list answered
500 when it read its rows. No browser or link of the admin writes one (`%00` is the only way a
query string carries it), so the request is refused before any view runs, as Django refuses
other malformed input: `400 Bad Request`. Other routes validate their few parameters themselves
(tests/probes/test_route_fuzz.py).
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.urls import reverse


class AdminQueryGuard:
    def __init__(self, get_response):
        self.get_response = get_response
        self.prefix: str | None = None  # the admin's URL prefix, resolved on first use

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if "%00" in request.META.get("QUERY_STRING", ""):
            if self.prefix is None:
                self.prefix = reverse("admin:index")
            if request.path.startswith(self.prefix):
                return HttpResponseBadRequest(
                    b"Bad request: the query string holds a NUL byte.\n",
                    content_type="text/plain; charset=utf-8",
                )
        return self.get_response(request)

"""Malformed admin requests answer 400, never 500.

- A NUL byte in an admin page's query string. The admin's list filters pass their values to the
  database as written (`?status__exact=`, `?verb=`, a field's own lookups), and PostgreSQL
  refuses text holding a NUL: the list answered 500 when it read its rows. No browser or link
  of the admin writes one (`%00` is the only way a query string carries it).
- A selected row that is no primary key of the list's model (`_selected_action=abc`, a NUL):
  Django's action handling filters the rows by the values as sent, and the action's first
  read raised ValueError, a 500. The list's own checkboxes only ever send primary keys.
Both are refused before the view runs, as Django refuses other malformed input: `400 Bad
Request`. Other routes validate their few parameters themselves
(tests/probes/test_route_fuzz.py).
"""

from __future__ import annotations

from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.core.exceptions import ValidationError
from django.db import models
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.urls import reverse

from events import inputs


def _refused(why: str) -> HttpResponse:
    return HttpResponseBadRequest(
        f"Bad request: {why}.\n".encode(), content_type="text/plain; charset=utf-8"
    )


class AdminQueryGuard:
    def __init__(self, get_response):
        self.get_response = get_response
        self.prefix: str | None = None  # the admin's URL prefix, resolved on first use

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if "%00" in request.META.get("QUERY_STRING", ""):
            if self.prefix is None:
                self.prefix = reverse("admin:index")
            if request.path.startswith(self.prefix):
                return _refused("the query string holds a NUL byte")
        return self.get_response(request)

    def process_view(self, request: HttpRequest, view_func, view_args, view_kwargs):
        model_admin = getattr(view_func, "model_admin", None)  # set on every ModelAdmin view
        if model_admin is None or request.method != "POST":
            return None
        selected = request.POST.getlist(ACTION_CHECKBOX_NAME)
        if not selected:
            return None
        pk = model_admin.model._meta.pk
        if not all(_is_key(pk, value) for value in selected):
            return _refused("a selected row is not one of this list's rows")
        return None


def _is_key(pk: models.Field, value: str) -> bool:
    """`value` can be a primary key of the model: ASCII digits within bigint for an integer
    key (events.inputs.as_id: "١" or "²" are no row's key), else text PostgreSQL can
    hold that the key field accepts."""
    if isinstance(pk, models.IntegerField):  # the auto fields included
        return inputs.as_id(value) is not None
    if not inputs.storable(value):
        return False
    try:
        pk.to_python(value)
    except ValidationError:
        return False
    return True

"""The desk surface (spec-overlay.md §5.2): pages and the JSON verbs, all thin.

Who: an active staff user with `events.checkin_registration` (the Event desk group has it).
Pages send an anonymous visitor to the login page and answer 403 to other staff; the JSON
routes answer 403 `{"error": …}` to both. CSRF is enforced on the POSTs by Django's own check,
run here (not by the global middleware) so that a failure answers in the pinned JSON shape.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache, wraps
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.contrib.auth.views import redirect_to_login
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import BadRequest, PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.shortcuts import render
from django.utils import timezone
from django.utils.decorators import decorator_from_middleware
from django.views.decorators.csrf import csrf_exempt, ensure_csrf_cookie

from desk import selectors
from desk.errors import CsrfFailed, Forbidden, MethodNotAllowed
from desk.services import confirm_attendance, register_attendee
from events import selectors as core_selectors
from events.errors import DomainError, NotFound, ValidationFailed, http_status
from events.services import inputs, rows
from events.views_api import DATABASE_UNAVAILABLE, database_unavailable

PERMISSION = "events.checkin_registration"


def can_use_desk(user) -> bool:
    """An active staff user holding PERMISSION (a superuser holds every permission): what
    `user.has_perm` answers with Django's model backend, asked in one query instead of loading
    every permission of the user and its groups (two joins) on each scan."""
    if not (user.is_active and user.is_staff):
        return False
    return user.is_superuser or has_checkin_permission(user.pk)


@cache
def _permission_sql() -> str:
    user_model = get_user_model()
    permission, content_type = Permission._meta.db_table, ContentType._meta.db_table
    user_permission = user_model.user_permissions.through._meta.db_table
    user_group = user_model.groups.through._meta.db_table
    group_permission = Group.permissions.through._meta.db_table
    # S608: built from constants (table names from model meta); values are params.
    return f"""
        SELECT EXISTS (
            SELECT 1 FROM {permission} p JOIN {content_type} c ON c.id = p.content_type_id
             WHERE c.app_label = %s AND p.codename = %s
               AND (EXISTS (SELECT 1 FROM {user_permission} up
                             WHERE up.user_id = %s AND up.permission_id = p.id)
                    OR EXISTS (SELECT 1 FROM {user_group} ug
                                 JOIN {group_permission} gp ON gp.group_id = ug.group_id
                                WHERE ug.user_id = %s AND gp.permission_id = p.id)))
    """  # noqa: S608


def has_checkin_permission(user_id: int) -> bool:
    """PERMISSION granted to the user directly or through one of its groups: one fixed
    statement, prepared by psycopg on a connection's second request."""
    app_label, codename = PERMISSION.split(".")
    ((granted,),) = rows.fetch(_permission_sql(), [app_label, codename, user_id, user_id])
    return bool(granted)


def error_response(error: DomainError) -> JsonResponse:
    response = JsonResponse(error.as_dict(), status=http_status(error.code))
    response["Cache-Control"] = "private, no-store"
    return response


class _JsonCsrfCheck(CsrfViewMiddleware):
    """Django's CSRF check, answering a refusal as `{"error": {"code": "csrf_failed"}}`."""

    def _reject(self, request: HttpRequest, reason: str) -> JsonResponse:
        return error_response(CsrfFailed(f"CSRF check failed: {reason}"))


_csrf_check = decorator_from_middleware(_JsonCsrfCheck)


def desk_page(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        if not can_use_desk(request.user):
            raise PermissionDenied("The desk needs the check-in permission.")
        return view(request, *args, **kwargs)

    return wrapped


def desk_api(*, method: str) -> Callable:
    """JSON route: method, then CSRF (unsafe methods), then who; typed errors → JSON, a
    database fault → 503 `service_unavailable` (the rescan of an admitted ticket answers
    `already_registered`)."""

    def decorate(view: Callable[..., JsonResponse]) -> Callable[..., JsonResponse]:
        def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
            if not can_use_desk(request.user):
                return error_response(Forbidden("A desk login is needed (staff, check-in)."))
            try:
                response = view(request, *args, **kwargs)
            except DomainError as error:
                return error_response(error)
            response["Cache-Control"] = "private, no-store"
            return response

        checked = _csrf_check(guarded)

        @csrf_exempt  # the global middleware steps aside: `checked` runs the same check
        @wraps(view)
        def entry(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
            if request.method != method:
                response = error_response(MethodNotAllowed(f"Use {method}."))
                response["Allow"] = method
                return response
            try:
                return checked(request, *args, **kwargs)
            except DATABASE_UNAVAILABLE as error:
                # Also when the session or the user could not be read: JSON, never a 500 page.
                return database_unavailable(error, api="desk API")
            except BadRequest as error:
                # Django refused to read the body for the CSRF check (a form declaring a
                # charset other than UTF-8): JSON, like every answer of this API.
                return error_response(ValidationFailed(str(error), code="invalid_value"))

        return entry

    return decorate


def _body(request: HttpRequest) -> dict[str, Any]:
    try:
        body = inputs.load_json(request.body)
    except ValueError:  # not JSON, not UTF-8, or nested deeper than inputs.MAX_JSON_DEPTH
        raise ValidationFailed("The body must be a JSON object.", code="invalid_value") from None
    if not isinstance(body, dict):
        raise ValidationFailed("The body must be a JSON object.", code="invalid_value")
    return body


# Primary keys are bigint: a larger number names nothing and must not reach the database.
ID_MAX = 2**63 - 1


def _id(value: Any, field: str, *, optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= ID_MAX:
        raise ValidationFailed(f"{field} must be a positive integer id.", code="invalid_value")
    return value


def _actor(request: HttpRequest):
    return request.user  # the service turns a user into the desk actor (type "desk")


# --- pages -------------------------------------------------------------------------------------


@desk_page
def index(request: HttpRequest) -> HttpResponse:
    rows = selectors.desk_events(now=timezone.now())
    return render(request, "desk/index.html", {"rows": rows})


@desk_page
@ensure_csrf_cookie
def scanner(request: HttpRequest, event_id: int) -> HttpResponse:
    event = selectors.desk_event(event_id=event_id)
    if event is None:
        raise Http404("No such event.")
    now = timezone.now()
    return render(
        request,
        "desk/scanner.html",
        {
            "event": event,
            "counters": selectors.counters(event=event),
            "ongoing": core_selectors.is_ongoing(event, now=now),
            "not_ongoing": selectors.is_not_ongoing(event, stage_name=event.stage.name, now=now),
        },
    )


# --- JSON --------------------------------------------------------------------------------------


@desk_api(method="POST")
def api_scan(request: HttpRequest) -> JsonResponse:
    body = _body(request)
    barcode = body.get("barcode")
    if not isinstance(barcode, str):
        raise ValidationFailed("barcode must be a string.", code="invalid_value")
    event_id = _id(body.get("event_id"), "event_id", optional=True)
    return JsonResponse(
        register_attendee(barcode=barcode, event_id=event_id, actor=_actor(request))
    )


@desk_api(method="POST")
def api_confirm(request: HttpRequest) -> JsonResponse:
    registration_id = _id(_body(request).get("registration_id"), "registration_id")
    return JsonResponse(confirm_attendance(registration_id=registration_id, actor=_actor(request)))


@desk_api(method="GET")
def api_counters(request: HttpRequest, event_id: int) -> JsonResponse:
    event = selectors.desk_event(event_id=event_id)
    if event is None:
        raise NotFound(f"Event {event_id} does not exist.")
    return JsonResponse({"event_id": event.pk, **selectors.counters(event=event)})

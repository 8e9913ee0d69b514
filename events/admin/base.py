"""The admin's building blocks, shared by core and every overlay's admin module.

- `ReadOnlyAdmin` / `ReadOnlyInline`: rows written only by services (ledgers, outboxes, logs).
- `ServiceErrorsMixin`: a typed service error raised while saving becomes an admin message.
- `run_verb`: an admin action calls a service per object and reports each typed refusal.
Business rules never live here: these classes only route to services and show their errors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from django.contrib import admin, messages

from events.errors import DomainError


def run_verb(
    modeladmin: admin.ModelAdmin,
    request,
    objects: Iterable[Any],
    verb: Callable[[Any], Any],
    done: str,
) -> None:
    """Call `verb(obj)` for each object; a DomainError becomes an error message naming its code."""
    ok = 0
    for obj in objects:
        try:
            verb(obj)
        except DomainError as exc:
            modeladmin.message_user(request, f"{obj}: {exc.code} — {exc.message}", messages.ERROR)
        else:
            ok += 1
    if ok:
        modeladmin.message_user(request, f"{done}: {ok}.", messages.SUCCESS)


def action(description: str, permission: str = "change"):
    def wrap(fn):
        return admin.action(description=description, permissions=[permission])(fn)

    return wrap


class ServiceErrorsMixin:
    """A typed service error raised while saving becomes an admin message, never a 500.

    The admin wraps the save in a transaction, so nothing of the failed change is kept.
    """

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        from django.http import HttpResponseRedirect

        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except DomainError as exc:
            self.message_user(request, f"{exc.code} — {exc.message}", messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows written only by services: visible to staff, never edited by hand."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

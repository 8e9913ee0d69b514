"""The admin's building blocks, shared by core and every overlay's admin module.

- `ReadOnlyAdmin` / `ReadOnlyInline`: rows written only by services (ledgers, outboxes, logs).
- `ServiceErrorsMixin`: a typed service error raised while saving becomes an admin message.
- `run_verb`: an admin action calls a service per object and reports each typed refusal.
- `ServiceAdmin` / `ServiceInline` + `RowVerbs`: a config model edited in the admin (and each
  row of its inlines) is created, updated and deleted by service verbs only; `form_fields`
  hands a verb the fields the form changed. tests/events/admin/test_admin_writes.py checks that
  every `save_model`/`delete_model`/`save_formset`/`delete_queryset` override calls a service.
Business rules never live here: these classes only route to services and show their errors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.contrib import admin, messages
from django.http import HttpResponseRedirect

from events.errors import DomainError

# Form fields a verb never receives: the inline's parent key, the row id, the delete box.
_NOT_FIELDS = frozenset({"id", "DELETE"})


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


def _error_text(exc: DomainError) -> str:
    field = exc.details.get("field")
    return f"{exc.code} — {exc.message}" + (f" (field: {field})" if field else "")


class ServiceErrorsMixin:
    """A typed service error raised while saving or deleting becomes an admin message, never a
    500. The admin wraps the change form and the delete page in a transaction, so nothing of
    the failed change is kept (an inline row refused rolls back the whole form)."""

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except DomainError as exc:
            self.message_user(request, _error_text(exc), messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())

    def delete_view(self, request, object_id, extra_context=None):
        try:
            return super().delete_view(request, object_id, extra_context)
        except DomainError as exc:
            self.message_user(request, _error_text(exc), messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())


def form_fields(form, *, changed_only: bool) -> dict[str, Any]:
    """The cleaned values a verb receives: the changed ones on an edit, all on a creation."""
    fk = getattr(form, "_inline_fk_name", None)
    # A texts-per-language form (events/admin/translations.py) hands over one `translations`.
    inputs = getattr(form, "translation_inputs", {})
    names = (
        form.changed_data if changed_only else [*form.fields, *(["translations"] * bool(inputs))]
    )
    return {
        name: form.cleaned_data[name]
        for name in names
        if name in form.cleaned_data
        and name not in _NOT_FIELDS
        and name not in inputs
        and name != fk
        and not (name in form.fields and form.fields[name].disabled)
    }


@dataclass(frozen=True)
class RowVerbs:
    """The service verbs behind one inline's rows, each taking the acting user.

    create(parent, actor, fields) -> row; update(row, actor, fields) -> row;
    delete(row, actor) -> None.
    """

    create: Callable[[Any, Any, dict[str, Any]], Any]
    update: Callable[[Any, Any, dict[str, Any]], Any]
    delete: Callable[[Any, Any], None]


class ServiceInline(admin.TabularInline):
    """An editable inline whose rows are written by `verbs`, never by the formset."""

    extra = 0
    verbs: RowVerbs | None = None

    def get_formset(self, request, obj=None, **kwargs):
        formset = super().get_formset(request, obj, **kwargs)
        formset.row_verbs = self.verbs
        return formset


def save_inline_rows(request, form, formset) -> None:
    """Route each changed row of an inline formset to its verb (deleted, changed, new).

    Fills the formset's new/changed/deleted lists as `formset.save()` would, because the
    admin's change message reads them. An inline without verbs (a read-only one) must hold no
    change: a change there is a programming error, not silently dropped.
    """
    verbs: RowVerbs | None = getattr(formset, "row_verbs", None)
    formset.new_objects, formset.changed_objects, formset.deleted_objects = [], [], []
    parent = form.instance
    fk_name = getattr(getattr(formset, "fk", None), "name", None)
    for row_form in formset.forms:
        row_form._inline_fk_name = fk_name
        deleting = formset.can_delete and formset._should_delete_form(row_form)
        new = row_form.instance.pk is None or row_form not in formset.initial_forms
        if not (deleting or row_form.has_changed()):
            continue
        if new and deleting:
            continue
        if verbs is None:
            raise RuntimeError(f"{formset.model.__name__} inline rows are written by services")
        if deleting:
            verbs.delete(row_form.instance, request.user)
            formset.deleted_objects.append(row_form.instance)
        elif new:
            fields = form_fields(row_form, changed_only=False)
            formset.new_objects.append(verbs.create(parent, request.user, fields))
        else:
            fields = form_fields(row_form, changed_only=True)
            row = verbs.update(row_form.instance, request.user, fields)
            formset.changed_objects.append((row, row_form.changed_data))


def delete_each(modeladmin: admin.ModelAdmin, request, queryset, verb: Callable[[Any], Any]):
    """The bulk "delete selected" action, one verb (one transaction) per row, refusals told."""
    for obj in queryset.order_by("pk"):
        try:
            verb(obj)
        except DomainError as exc:
            modeladmin.message_user(request, f"{obj}: {_error_text(exc)}", messages.ERROR)


class ServiceAdmin(ServiceErrorsMixin, admin.ModelAdmin):
    """A config model's admin: `save_model`/`delete_model`/`delete_queryset` call its verbs
    (each subclass overrides them) and every inline row goes through `save_inline_rows`.
    Many-to-many fields are the verbs' business too: `save_related` never calls
    `form.save_m2m()`."""

    def save_formset(self, request, form, formset, change):
        save_inline_rows(request, form, formset)

    def save_related(self, request, form, formsets, change):
        for formset in formsets:
            self.save_formset(request, form, formset, change=change)


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

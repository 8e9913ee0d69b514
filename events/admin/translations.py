"""Texts per language in the admin: one input per (translated field, language) beside the column.

`translated_form(base, model, fields)` makes a form class with an input "<field>__<lang>" per
language of settings.LANGUAGES, filled from the row's `translations` and folded back into one
`translations` value the save hands to the model's service verb (which checks it,
events.services.reference.check_texts). An empty input means "no text in that language": the
attendee then reads the column, written in the event's default language.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from django import forms
from django.conf import settings
from django.db import models


class TranslationsMixin:
    translated_fields: tuple[str, ...] = ()
    # input name -> (language, field)
    translation_inputs: dict[str, tuple[str, str]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[call-arg]
        current = getattr(self.instance, "translations", None) or {}  # type: ignore[attr-defined]
        for name, (lang, field) in self.translation_inputs.items():
            if name in self.fields:  # type: ignore[attr-defined]
                self.fields[name].initial = current.get(lang, {}).get(field, "")  # type: ignore[attr-defined]

    def clean(self) -> dict[str, Any]:
        data = super().clean()  # type: ignore[misc]
        merged = {
            lang: dict(texts)
            for lang, texts in (getattr(self.instance, "translations", None) or {}).items()  # type: ignore[attr-defined]
        }
        for name, (lang, field) in self.translation_inputs.items():
            if name not in self.fields:  # type: ignore[attr-defined]
                continue
            text = (data.get(name) or "").strip()
            if text:
                merged.setdefault(lang, {})[field] = text
            else:
                merged.get(lang, {}).pop(field, None)
        data["translations"] = {lang: texts for lang, texts in merged.items() if texts}
        return data

    @cached_property
    def changed_data(self) -> list[str]:
        changed = super().changed_data  # type: ignore[misc]
        names = [name for name in changed if name not in self.translation_inputs]
        if len(names) != len(changed):
            names.append("translations")
        return names


def input_names(fields: tuple[str, ...]) -> tuple[str, ...]:
    """The inputs a translated form adds, in display order (for fieldsets and inline fields)."""
    return tuple(f"{field}__{lang}" for field in fields for lang, _name in settings.LANGUAGES)


def translated_form(
    base: type[forms.ModelForm], model: type[models.Model], fields: tuple[str, ...]
) -> type[forms.ModelForm]:
    attrs: dict[str, Any] = {"translated_fields": fields, "translation_inputs": {}}
    for field in fields:
        model_field = model._meta.get_field(field)
        long_text = isinstance(model_field, models.TextField)
        for lang, name in settings.LANGUAGES:
            key = f"{field}__{lang}"
            attrs["translation_inputs"][key] = (lang, field)
            attrs[key] = forms.CharField(
                label=f"{str(model_field.verbose_name).capitalize()} ({name})",
                required=False,
                max_length=getattr(model_field, "max_length", None),
                strip=True,
                widget=forms.Textarea(attrs={"rows": 3}) if long_text else forms.TextInput,
            )
    return type(f"{model.__name__}TextsForm", (TranslationsMixin, base), attrs)


class TranslatedAdminMixin:
    """For a staff user who may only view: the per-language inputs give way to the row's
    `translations`, shown read only (the form then has no field to change)."""

    def _inputs(self) -> set[str]:
        return set(getattr(self.form, "translation_inputs", {}))  # type: ignore[attr-defined]

    def _viewing(self, request, obj) -> bool:
        return obj is not None and not self.has_change_permission(request, obj)  # type: ignore[attr-defined]

    def _without_inputs(self, names) -> list[str]:
        inputs = self._inputs()
        kept = [name for name in names if name not in inputs]
        if len(kept) != len(names) and "translations" not in kept:
            kept.append("translations")
        return kept

    def get_fieldsets(self, request, obj=None):
        fieldsets = super().get_fieldsets(request, obj)  # type: ignore[misc]
        if not self._viewing(request, obj):
            return fieldsets
        return [
            (title, {**options, "fields": self._without_inputs(list(options["fields"]))})
            for title, options in fieldsets
        ]

    def get_readonly_fields(self, request, obj=None):
        readonly = super().get_readonly_fields(request, obj)  # type: ignore[misc]
        return (*readonly, "translations") if self._viewing(request, obj) else readonly

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change=change, **kwargs)  # type: ignore[misc]
        if self._viewing(request, obj):
            for name in self._inputs():
                form.base_fields.pop(name, None)
        return form

"""Reference data and event types: stages, tags, tag categories, event types and their
template lines; every write goes through the verbs of events.services.reference, event_types,
tickets and questions."""

from __future__ import annotations

from django.contrib import admin

from events.admin.base import (
    RowVerbs,
    ServiceAdmin,
    ServiceInline,
    delete_each,
    form_fields,
)
from events.models import (
    EventType,
    Question,
    Stage,
    Tag,
    TagCategory,
    Ticket,
    TypeMail,
)
from events.services import event_types, questions, reference, tickets


@admin.register(Stage)
class StageAdmin(ServiceAdmin):
    list_display = ("name", "sequence", "fold", "pipe_end", "is_cancelled")
    list_editable = ("sequence",)
    ordering = ("sequence",)

    def save_model(self, request, obj, form, change):
        fields = form_fields(form, changed_only=change)
        if change:
            reference.update_stage(stage=obj, actor=request.user, **fields)
        else:
            obj.pk = reference.create_stage(actor=request.user, **fields).pk

    def delete_model(self, request, obj):
        reference.delete_stage(stage=obj, actor=request.user)

    def delete_queryset(self, request, queryset):
        delete_each(
            self, request, queryset, lambda s: reference.delete_stage(stage=s, actor=request.user)
        )


class TagInline(ServiceInline):
    model = Tag
    fields = ("name", "sequence", "color")
    verbs = RowVerbs(
        create=lambda category, actor, fields: reference.create_tag(
            actor=actor, category=category, **fields
        ),
        update=lambda tag, actor, fields: reference.update_tag(tag=tag, actor=actor, **fields),
        delete=lambda tag, actor: reference.delete_tag(tag=tag, actor=actor),
    )


@admin.register(TagCategory)
class TagCategoryAdmin(ServiceAdmin):
    list_display = ("name", "sequence")
    inlines = [TagInline]
    search_fields = ("name",)

    def save_model(self, request, obj, form, change):
        fields = form_fields(form, changed_only=change)
        if change:
            reference.update_tag_category(category=obj, actor=request.user, **fields)
        else:
            obj.pk = reference.create_tag_category(actor=request.user, **fields).pk

    def delete_model(self, request, obj):
        reference.delete_tag_category(category=obj, actor=request.user)

    def delete_queryset(self, request, queryset):
        delete_each(
            self,
            request,
            queryset,
            lambda c: reference.delete_tag_category(category=c, actor=request.user),
        )


@admin.register(Tag)
class TagAdmin(ServiceAdmin):
    list_display = ("name", "category", "color", "sequence")
    list_filter = ("category",)
    search_fields = ("name", "category__name")

    def save_model(self, request, obj, form, change):
        fields = form_fields(form, changed_only=change)
        if change:
            reference.update_tag(tag=obj, actor=request.user, **fields)
        else:
            obj.pk = reference.create_tag(actor=request.user, **fields).pk

    def delete_model(self, request, obj):
        reference.delete_tag(tag=obj, actor=request.user)

    def delete_queryset(self, request, queryset):
        delete_each(
            self, request, queryset, lambda t: reference.delete_tag(tag=t, actor=request.user)
        )


class TypeTicketInline(ServiceInline):
    model = Ticket
    fk_name = "event_type"
    fields = ("name", "sequence", "seats_max", "price", "product_ref", "limit_max_per_order")
    verbs = RowVerbs(
        create=lambda event_type, actor, fields: tickets.create_ticket(
            actor=actor, event_type=event_type, **fields
        ),
        update=lambda t, actor, fields: tickets.update_ticket(ticket=t, actor=actor, **fields),
        delete=lambda t, actor: tickets.delete_ticket(ticket=t, actor=actor),
    )


class TypeQuestionInline(ServiceInline):
    model = Question
    fk_name = "event_type"
    fields = ("title", "question_type", "is_mandatory_answer", "once_per_order", "sequence")
    show_change_link = True
    verbs = RowVerbs(
        create=lambda event_type, actor, fields: questions.create_question(
            actor=actor, event_type=event_type, **fields
        ),
        update=lambda q, actor, fields: questions.update_question(
            question=q, actor=actor, **fields
        ),
        delete=lambda q, actor: questions.delete_question(question=q, actor=actor),
    )


TYPE_MAIL_FIELDS = (
    "sequence",
    "template_ref",
    "notification_type",
    "interval_nbr",
    "interval_unit",
    "interval_type",
)


class TypeMailInline(ServiceInline):
    model = TypeMail
    fields = TYPE_MAIL_FIELDS
    verbs = RowVerbs(
        create=lambda event_type, actor, fields: event_types.create_type_mail(
            event_type=event_type, actor=actor, **fields
        ),
        update=lambda line, actor, fields: event_types.update_type_mail(
            line=line, actor=actor, **fields
        ),
        delete=lambda line, actor: event_types.delete_type_mail(line=line, actor=actor),
    )


@admin.register(EventType)
class EventTypeAdmin(ServiceAdmin):
    list_display = ("name", "sequence", "has_seats_limitation", "seats_max", "default_timezone")
    search_fields = ("name",)
    filter_horizontal = ("tags",)
    inlines = [TypeTicketInline, TypeQuestionInline, TypeMailInline]

    def save_model(self, request, obj, form, change):
        fields = form_fields(form, changed_only=change)
        if change:
            event_types.update_event_type(event_type=obj, actor=request.user, **fields)
        else:
            obj.pk = event_types.create_event_type(actor=request.user, **fields).pk

    def delete_model(self, request, obj):
        event_types.delete_event_type(event_type=obj, actor=request.user)

    def delete_queryset(self, request, queryset):
        delete_each(
            self,
            request,
            queryset,
            lambda t: event_types.delete_event_type(event_type=t, actor=request.user),
        )


@admin.register(TypeMail)
class TypeMailAdmin(ServiceAdmin):
    list_display = (
        "template_ref",
        "event_type",
        "interval_type",
        "interval_nbr",
        "interval_unit",
        "notification_type",
    )
    list_filter = ("event_type", "interval_type")

    def get_fields(self, request, obj=None):
        return TYPE_MAIL_FIELDS if obj is not None else ("event_type", *TYPE_MAIL_FIELDS)

    def save_model(self, request, obj, form, change):
        fields = form_fields(form, changed_only=change)
        if change:
            event_types.update_type_mail(line=obj, actor=request.user, **fields)
        else:
            event_type = fields.pop("event_type")
            obj.pk = event_types.create_type_mail(
                event_type=event_type, actor=request.user, **fields
            ).pk

    def delete_model(self, request, obj):
        event_types.delete_type_mail(line=obj, actor=request.user)

    def delete_queryset(self, request, queryset):
        delete_each(
            self,
            request,
            queryset,
            lambda line: event_types.delete_type_mail(line=line, actor=request.user),
        )

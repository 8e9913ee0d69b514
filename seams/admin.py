from django.contrib import admin

from seams.models import SeamInbox, SeamOrder


@admin.register(SeamInbox)
class SeamInboxAdmin(admin.ModelAdmin):
    list_display = (
        "received_at",
        "type",
        "message_id",
        "order_ref",
        "status",
        "error_code",
        "applied_at",
    )
    list_filter = ("status", "type", "source")
    search_fields = ("message_id", "order_ref")
    date_hierarchy = "received_at"
    readonly_fields = [f.name for f in SeamInbox._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(SeamOrder)
class SeamOrderAdmin(admin.ModelAdmin):
    list_display = ("order_ref", "version", "state")
    search_fields = ("order_ref",)
    readonly_fields = ("order_ref", "version", "state")

    def has_add_permission(self, request):
        return False

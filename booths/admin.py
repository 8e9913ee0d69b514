from django.contrib import admin

from booths.models import Booth, BoothBooking, BoothCategory, TypeBooth


@admin.register(BoothCategory)
class BoothCategoryAdmin(admin.ModelAdmin):
    list_display = ("name", "sequence", "price", "product_ref", "active")
    list_filter = ("active",)
    search_fields = ("name", "product_ref")


@admin.register(TypeBooth)
class TypeBoothAdmin(admin.ModelAdmin):
    list_display = ("name", "event_type", "booth_category")
    list_filter = ("event_type", "booth_category")
    list_select_related = ("event_type", "booth_category")


class BookingInline(admin.TabularInline):
    model = BoothBooking
    extra = 0
    can_delete = False
    fields = ("order_ref", "partner_ref", "contact_name", "state", "created_at", "decided_at")
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Booth)
class BoothAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "event",
        "booth_category",
        "state",
        "partner_ref",
        "contact_name",
        "is_paid",
    )
    list_filter = ("state", "booth_category", "is_paid", "event")
    search_fields = ("name", "event__name", "partner_ref", "contact_name", "order_ref")
    list_select_related = ("event", "booth_category")
    readonly_fields = (
        "state",
        "partner_ref",
        "contact_name",
        "contact_email",
        "contact_phone",
        "is_paid",
        "order_ref",
        "order_line_ref",
    )
    inlines = [BookingInline]


@admin.register(BoothBooking)
class BoothBookingAdmin(admin.ModelAdmin):
    list_display = ("booth", "order_ref", "partner_ref", "state", "created_at", "decided_at")
    list_filter = ("state",)
    search_fields = ("order_ref", "partner_ref", "booth__name")
    list_select_related = ("booth",)
    readonly_fields = [f.name for f in BoothBooking._meta.fields]

    def has_add_permission(self, request):
        return False

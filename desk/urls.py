from django.urls import path

from desk import views

app_name = "desk"

urlpatterns = [
    path("", views.index, name="index"),
    path("<int:event_id>/", views.scanner, name="scanner"),
    path("api/scan", views.api_scan, name="api-scan"),
    path("api/confirm", views.api_confirm, name="api-confirm"),
    path("api/events/<int:event_id>/counters", views.api_counters, name="api-counters"),
    path("api/events/<int:event_id>/snapshot", views.api_snapshot, name="api-snapshot"),
    # Last: every other path under api/ answers JSON too (never Django's HTML 404).
    path("api/", views.api_unknown, name="api-index"),
    path("api/<path:rest>", views.api_unknown, name="api-unknown"),
]

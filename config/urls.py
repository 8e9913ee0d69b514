from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("desk/", include("desk.urls")),  # by name: core never imports an overlay
    path("", include("seams.urls")),  # /seams/v1/sale and the catalog read; by name too
    path("", include("events.urls")),
]

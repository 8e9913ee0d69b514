from django.urls import path

from events import views

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    path("events/", views.event_list, name="event-list"),
]

from django.urls import path

from events import views, views_api

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    path("events/", views.event_list, name="event-list"),
    path("events/<int:event_id>/", views.event_detail, name="event-detail"),
    path(
        "api/v1/events/<int:event_id>/registrations",
        views_api.intake_registrations,
        name="api-intake",
    ),
    path("my-tickets/<str:token>/", views.my_tickets, name="my-tickets"),
    path("ics/<str:token>.ics", views.ics, name="ics"),
]

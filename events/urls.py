from django.urls import path

from events import views, views_api, views_docs, views_waitlist

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    path("events/", views.event_list, name="event-list"),
    path("events/<int:event_id>/", views.event_detail, name="event-detail"),
    path("events/<int:event_id>/waitlist", views_waitlist.join_page, name="waitlist-join"),
    path(
        "api/v1/events/<int:event_id>/registrations",
        views_api.intake_registrations,
        name="api-intake",
    ),
    path(
        "api/v1/events/<int:event_id>/waitlist",
        views_waitlist.join_api,
        name="api-waitlist",
    ),
    path("api/v1/openapi.json", views_docs.openapi_document, name="api-description"),
    path("api/docs/", views_docs.api_docs, name="api-docs"),
    path("my-tickets/<str:token>/", views.my_tickets, name="my-tickets"),
    path("my-tickets/<str:token>/cancel", views.my_tickets_cancel, name="my-tickets-cancel"),
    path(
        "my-tickets/<str:token>/<int:registration_id>/ticket.pdf",
        views.my_ticket_pdf,
        name="my-tickets-pdf",
    ),
    path("ics/<str:token>.ics", views.ics, name="ics"),
    path("waitlist/offer/<str:token>/", views_waitlist.offer, name="waitlist-offer"),
]

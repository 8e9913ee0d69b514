from django.contrib import admin
from django.urls import include, path
from django.views import defaults

from config.request_body import JSON_PREFIXES
from events.errors import NotFound
from events.views_api import error_response

urlpatterns = [
    path("admin/", admin.site.urls),
    path("desk/", include("desk.urls")),  # by name: core never imports an overlay
    path("", include("seams.urls")),  # /seams/v1/sale and the catalog read; by name too
    path("", include("events.urls")),
]

# Django's error pages without their `requires_csrf_token`, which runs the CSRF check's read of
# request.POST again. When that read is what failed (a form declaring a charset other than
# UTF-8: django.http.request raises BadRequest without marking the parse as failed), the error
# page raised in turn, and so did the 500 page: the exception left Django's handler and the
# server answered 500. The pages render as before (no template of ours uses a CSRF token).
handler400 = defaults.bad_request.__wrapped__
handler403 = defaults.permission_denied.__wrapped__
_page_not_found = defaults.page_not_found.__wrapped__


def handler404(request, exception):
    """A path under the JSON routes' prefixes that names no route answers the pinned JSON
    `not_found` (an integrator's typo gets JSON, as every answer there); elsewhere Django's
    page."""
    if request.path_info.startswith(JSON_PREFIXES):
        return error_response(NotFound("No such API route."))
    return _page_not_found(request, exception)


handler500 = defaults.server_error.__wrapped__

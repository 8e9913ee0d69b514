"""The language of a request (docs/spec.md "Languages").

In order: an explicit choice in the query string (`?lang=fr`, the public pages' switcher: plain
links, no JavaScript, the same URLs), then the choice remembered in the language cookie, then
`Accept-Language`, then `LANGUAGE_CODE`. A choice made with `?lang=` is remembered in the cookie,
so the next page (and the form posted from it) keeps it. The language is active only while the
request is answered: a worker thread never keeps a visitor's language.
"""

from __future__ import annotations

from django.conf import settings
from django.utils import translation
from django.utils.cache import patch_vary_headers

LANGUAGE_CODES = frozenset(code for code, _name in settings.LANGUAGES)


def supported(value: object) -> str | None:
    """`value` when it names one of the product's languages (LANGUAGES), else None."""
    return value if isinstance(value, str) and value in LANGUAGE_CODES else None


class LocaleMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        chosen = supported(request.GET.get("lang")) if "lang" in request.GET else None
        language = chosen or translation.get_language_from_request(request)
        with translation.override(language):
            request.LANGUAGE_CODE = language
            response = self.get_response(request)
        patch_vary_headers(response, ("Accept-Language", "Cookie"))
        response.headers.setdefault("Content-Language", language)
        if chosen is not None and request.COOKIES.get(settings.LANGUAGE_COOKIE_NAME) != chosen:
            response.set_cookie(
                settings.LANGUAGE_COOKIE_NAME,
                chosen,
                max_age=settings.LANGUAGE_COOKIE_AGE,
                path=settings.LANGUAGE_COOKIE_PATH,
                domain=settings.LANGUAGE_COOKIE_DOMAIN,
                secure=settings.LANGUAGE_COOKIE_SECURE,
                httponly=settings.LANGUAGE_COOKIE_HTTPONLY,
                samesite=settings.LANGUAGE_COOKIE_SAMESITE,
            )
        return response

"""The language of a request (docs/spec.md "Languages").

In order: an explicit choice in the query string (`?lang=fr`, the public pages' switcher: plain
links, no JavaScript, the same URLs), then the choice remembered in the language cookie, then
the first language of `Accept-Language` the product has, then `LANGUAGE_CODE`. A choice made
with `?lang=` is remembered in the cookie, so the next page (and the form posted from it)
keeps it. `request.expressed_language` is the language the visitor asked for in one of these
ways, or None (the intake then registers in the event's default language). The language is
active only while the request is answered: a thread never keeps a visitor's language.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest
from django.utils import translation
from django.utils.cache import patch_vary_headers
from django.utils.translation.trans_real import parse_accept_lang_header

from events.i18n import supported


def expressed_language(request: HttpRequest) -> str | None:
    """The product language the request asks for (?lang=, the cookie, Accept-Language)."""
    chosen = supported(request.GET.get("lang")) or supported(
        request.COOKIES.get(settings.LANGUAGE_COOKIE_NAME)
    )
    if chosen is not None:
        return chosen
    # META, not request.headers: that builds a mapping of every header on first use.
    for code, _quality in parse_accept_lang_header(request.META.get("HTTP_ACCEPT_LANGUAGE", "")):
        if code == "*":
            break
        try:
            return translation.get_supported_language_variant(code)
        except LookupError:
            continue
    return None


class LocaleMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        chosen = supported(request.GET.get("lang"))
        expressed = chosen or expressed_language(request)
        language = expressed or settings.LANGUAGE_CODE
        request.LANGUAGE_CODE = language
        request.expressed_language = expressed
        with translation.override(language):
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

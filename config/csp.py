"""django-csp's middleware, with the policy text built once.

django-csp 4.0 builds both headers' text from settings on every response, exempt ones included:
about 120 µs of CPU, an eighth of an /ics request (bench B5). The project's policy uses no
nonce and no per-view decorator, so the text changes only with the settings. `CSPMiddleware`
keeps it per header and builds it again after a change of either policy setting
(`setting_changed`, which tests' `override_settings` sends). A request that used a nonce, or a
response a django-csp decorator marked, goes through django-csp's own code. Otherwise the
headers are set exactly as django-csp sets them (tests/events/web/test_csp.py compares both).
"""

from __future__ import annotations

from csp import middleware as csp_middleware
from csp.constants import HEADER, HEADER_REPORT_ONLY
from csp.utils import build_policy
from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

# (header, its setting, the attribute csp_exempt leaves on a response, report-only)
_KINDS = (
    (HEADER, "CONTENT_SECURITY_POLICY", "_csp_exempt", False),
    (HEADER_REPORT_ONLY, "CONTENT_SECURITY_POLICY_REPORT_ONLY", "_csp_exempt_ro", True),
)
# What django-csp's decorators (csp_update, csp_replace, csp and their report-only forms) leave
# on a response: such a response's policy differs from the settings'.
_OVERRIDES = tuple(
    f"_csp_{kind}{suffix}" for kind in ("config", "update", "replace") for suffix in ("", "_ro")
)
_SETTINGS = frozenset(kind[1] for kind in _KINDS)
_DEBUG_EXEMPT = (404, 500)  # django-csp leaves Django's debug pages alone

_built: dict[str, tuple[str, tuple[str, ...]]] = {}  # setting -> (policy text, excluded prefixes)


@receiver(setting_changed)
def _forget(*, setting: str, **kwargs) -> None:
    if setting in _SETTINGS:
        _built.clear()


def _policy(setting: str, report_only: bool) -> tuple[str, tuple[str, ...]]:
    kept = _built.get(setting)
    if kept is None:
        prefixes = (getattr(settings, setting, None) or {}).get("EXCLUDE_URL_PREFIXES") or ()
        kept = _built[setting] = (build_policy(report_only=report_only), tuple(prefixes))
    return kept


class CSPMiddleware(csp_middleware.CSPMiddleware):
    def process_response(self, request, response):
        if getattr(request, "_csp_nonce", None) is not None or any(
            hasattr(response, name) for name in _OVERRIDES
        ):
            return super().process_response(request, response)
        if response.status_code in _DEBUG_EXEMPT and settings.DEBUG:
            return response
        for header, setting, exempt, report_only in _KINDS:
            text, prefixes = _policy(setting, report_only)
            if (
                text
                and header not in response
                and getattr(response, exempt, False) is False
                and not request.path_info.startswith(prefixes)
            ):
                response[header] = text
        # As django-csp: a nonce asked for after the header was written is an error.
        request.csp_nonce = csp_middleware.CheckableLazyObject(self._csp_nonce_post_response)
        return response

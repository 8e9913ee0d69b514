"""Start-up refuses an HTTP gateway adapter without a gateway (spec.md §10, §11).

When EVENT_SMS_QUEUE names an adapter that POSTs to the gateway (`needs_gateway_url`, e.g.
`sms.adapters.GatewaySmsQueue`) and EVENT_SMS_GATEWAY_URL is unset or empty, the system check
fails (every `manage.py` command, `make run`'s `migrate` and `check`) and so does the WSGI
application (through `events.hooks.startup_checks`): SMS would otherwise pile up queued forever.
"""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, register
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string


@register()
def check_gateway_url(app_configs=None, **kwargs) -> list[Error]:
    path = getattr(settings, "EVENT_SMS_QUEUE", "") or ""
    try:
        adapter = import_string(path)
    except ImportError:
        return []  # events.ports names a broken dotted path; ports_check reports it
    if not getattr(adapter, "needs_gateway_url", False):
        return []
    if (getattr(settings, "EVENT_SMS_GATEWAY_URL", "") or "").strip():
        return []
    return [
        Error(
            f"EVENT_SMS_GATEWAY_URL is unset or empty, but EVENT_SMS_QUEUE={path} posts every "
            "SMS to it.",
            hint="Set EVENT_SMS_GATEWAY_URL (make run: the local sink, see .env.example) or "
            "wire another EVENT_SMS_QUEUE.",
            id="sms.E001",
        )
    ]


def refuse_without_gateway() -> None:
    """For the WSGI application: raise when the check fails (the server must not start)."""
    problems = check_gateway_url()
    if problems:
        raise ImproperlyConfigured("; ".join(problem.msg for problem in problems))

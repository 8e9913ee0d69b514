import os

from django.core.exceptions import ImproperlyConfigured
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()

# Fail closed (spec.md §7.1, §10): the server refuses to start with a secret it could not use
# (the capability secret missing or short, an EVENT_SEAM_SECRET entry that is no key, an SMS
# gateway token no bearer header can carry); gunicorn's worker then fails to boot and the
# master exits. The message names the knob and the entry, never the value.
from events.checks import check_secrets  # noqa: E402

_problems = check_secrets(None)
if _problems:
    raise ImproperlyConfigured("; ".join(problem.msg for problem in _problems))

# The overlays' own start-up refusals (events.hooks.startup_checks; sms: a gateway adapter
# without EVENT_SMS_GATEWAY_URL), each raising ImproperlyConfigured naming its knob.
from events import hooks  # noqa: E402

for _check in hooks.startup_checks:
    _check()

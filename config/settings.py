"""Settings from the environment (django-environ).

Every knob of the contract is read without a default: a missing knob stops start-up with
django-environ's ImproperlyConfigured naming it. A `.env` file beside manage.py (written by
`make run` from `.env.example`) is read when present; real environment variables win.
"""

import os
from datetime import timedelta
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured
from redis.backoff import NoBackoff
from redis.retry import Retry

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
_env_file = os.environ.get("DJANGO_ENV_FILE", str(BASE_DIR / ".env"))
if _env_file and Path(_env_file).is_file():
    environ.Env.read_env(_env_file, overwrite=False)

SECRET_KEY = env.str("DJANGO_SECRET_KEY")
DEBUG = env.bool("DJANGO_DEBUG")
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    # Swagger UI's files, served from our own static files for /api/docs/ (no CDN).
    "drf_spectacular_sidecar",
    "events",
    "sms",
    "booths",
    "leads",
    "desk",
    "seams",
    "axes",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "config.admin_guard.AdminQueryGuard",  # a NUL in an admin query string: 400, not a 500
    # Reads the body before any reader: one that never arrives is 408/400, never a 500.
    "config.request_body.RequestBodyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # The request's language: ?lang=, the language cookie, Accept-Language (config/locale.py).
    "config.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    # Django's, its user the one read with the session (config/auth.py).
    "config.auth.AuthenticationMiddleware",
    "config.messages.LazyMessageMiddleware",  # Django's, the storage built on first use
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "config.csp.CSPMiddleware",  # django-csp's, with the policy text kept
    # Last: it turns a refused (throttled) admin login into the lockout response.
    "axes.middleware.AxesMiddleware",
]

# Admin login throttle (django-axes): failures are counted in the Redis cache per (username,
# client address) pair and, separately, per client address (events.client.client_address, so
# EVENT_TRUSTED_PROXY decides which address counts). From the 5th failure of a pair, or the 20th
# of an address, within the cool-off on, that pair's (that address's) attempts answer 429
# "Account locked: too many login attempts. Please try again later." even with the right
# password, and a WARNING "AXES: Locking out …" line names both. The username alone is never
# locked: the real user still logs in from another address (events/login_throttle.py).
# A Redis fault never blocks staff: events.login_throttle fails open and logs it.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    # Django's ModelBackend, its get_user statement written once; a failed password check ends
    # the chain there (config/auth.py).
    "config.auth.ModelBackend",
    # Keeps sessions signed in by it valid; never checks a password (config/auth.py).
    "django.contrib.auth.backends.ModelBackend",
]
AXES_HANDLER = "events.login_throttle.FailOpenCacheHandler"
AXES_CACHE = "default"
AXES_FAILURE_LIMIT = 5  # per (username, address) pair
AXES_COOLOFF_TIME = timedelta(minutes=15)
# A nested list is "the combination", a flat entry "that parameter alone" (django-axes 8).
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"], "ip_address"]
LOGIN_THROTTLE_ADDRESS_LIMIT = 20  # the address alone, across usernames (not an axes setting)
AXES_CLIENT_IP_CALLABLE = "events.client.client_address"
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False  # no "AXES: BEGIN" line on every start of every process
# The lockout line names the username and address (axes masks both by default): staff need them.
AXES_SENSITIVE_PARAMETERS: list[str] = []

# Content-Security-Policy (django-csp) on every response, public pages and admin alike: scripts
# only from this origin (no inline script anywhere: the admin uses static files, the attendee
# pages have none); inline styles stay allowed (the attendee base template and the admin's change
# list carry <style> blocks; style injection cannot run code).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

# Django's database sessions, refusing a key Django could not have made (a NUL in the cookie).
SESSION_ENGINE = "config.sessions"

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {"default": env.db_url("DATABASE_URL")}
# Django's PostgreSQL backend with psycopg's C parser for timestamptz values (config/postgres).
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    DATABASES["default"]["ENGINE"] = "config.postgres"
DATABASES["default"]["CONN_MAX_AGE"] = 60
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# psycopg prepares a statement of a server-binding cursor from its third use on a connection.
# Only the core's hot statements (the booking, the transitions' locks) use such cursors;
# Django's own cursors bind on the client and never prepare. A pooler in front of PostgreSQL
# must then keep prepared statements per client (PgBouncer >= 1.21 max_prepared_statements,
# or session pooling): docs/runbook.md.
DATABASES["default"].setdefault("OPTIONS", {})["prepare_threshold"] = 2
if os.environ.get("EVENT_TEST_ADMIN_URL"):
    # Tests may point at another PostgreSQL server; pytest-django creates test_<name> there.
    _admin = env.db_url("EVENT_TEST_ADMIN_URL")
    DATABASES["default"].update({k: _admin[k] for k in ("HOST", "PORT", "USER", "PASSWORD")})

# Parallel test runs on one machine each get their own test database (test infrastructure,
# not a product knob): TEST_DB_SUFFIX=x → test_<name>_x.
if os.environ.get("TEST_DB_SUFFIX"):
    DATABASES["default"]["TEST"] = {
        "NAME": f"test_{DATABASES['default']['NAME']}_{os.environ['TEST_DB_SUFFIX']}"
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

CACHES = {"default": env.cache_url("CACHE_URL")}
# Short timeouts and no client-side retries on every Redis client: a down or hung Redis
# costs a request at most ~1 s (the limiter then answers 503, nudges are skipped and logged),
# never a worker blocked for 30 s. redis-py's default retry would multiply the wait.
REDIS_CONNECT_TIMEOUT = 0.5
REDIS_READ_TIMEOUT = 0.5
if CACHES["default"]["BACKEND"] == "django.core.cache.backends.redis.RedisCache":
    CACHES["default"].setdefault("OPTIONS", {}).update(
        {
            "socket_connect_timeout": REDIS_CONNECT_TIMEOUT,
            "socket_timeout": REDIS_READ_TIMEOUT,
            "retry": Retry(NoBackoff(), 0),
        }
    )

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# The attendee's languages (docs/spec.md "Languages"): interface strings from the gettext
# catalogs in locale/ (compiled by `make run` / `make test`, never committed), event content per
# language in each model's `translations`. Each language is named in itself (the switcher).
LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("fr", "Français"), ("nl", "Nederlands"), ("de", "Deutsch")]
LOCALE_PATHS = [BASE_DIR / "locale"]
LANGUAGE_COOKIE_AGE = 365 * 24 * 3600
LANGUAGE_COOKIE_HTTPONLY = True
LANGUAGE_COOKIE_SAMESITE = "Lax"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "var" / "static"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

LOGIN_URL = "/admin/login/"

# Email: Django's backend from EMAIL_URL (smtp://, filemail://, consolemail://, …). `filemail://`
# without a path writes each delivery batch as a file into var/mail/ (the demo's local mailbox;
# the admin's mail outbox shows the same mails): mails hold live capability links and must not go
# to a process's log, nor be readable by other users of the machine (config/mailbox.py: 0700
# folder, 0600 files).
_email = env.email_url("EMAIL_URL")
if _email["EMAIL_BACKEND"].endswith(".filebased.EmailBackend"):
    _email["EMAIL_BACKEND"] = "config.mailbox.OwnerOnlyFileBackend"
    if not _email["EMAIL_FILE_PATH"]:
        _email["EMAIL_FILE_PATH"] = str(BASE_DIR / "var" / "mail")
vars().update(_email)
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL")

# Celery
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL")
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TIMEZONE = "UTC"
# A hung or down broker must not hold a web worker: short socket timeouts, one quick
# publish retry, then the publisher's error (nudges log it; beat's next pass does the work).
# The worker's BRPOP is driven by its event loop (reads only when the socket is readable), so
# a 1 s read timeout does not disturb consuming.
CELERY_BROKER_CONNECTION_TIMEOUT = 1
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "socket_connect_timeout": 1,
    "socket_timeout": 1,
    "retry_on_timeout": False,
    "max_retries": 1,
}
CELERY_TASK_PUBLISH_RETRY = True
CELERY_TASK_PUBLISH_RETRY_POLICY = {
    "max_retries": 1,
    "interval_start": 0,
    "interval_step": 0.1,
    "interval_max": 0.1,
}

# The contract's knobs (spec.md §10): no defaults.
EVENT_CAPABILITY_SECRET = env.str("EVENT_CAPABILITY_SECRET")
EVENT_SEAM_SECRET = env.str("EVENT_SEAM_SECRET")
EVENT_MAIL_BATCH = env.int("EVENT_MAIL_BATCH")
EVENT_MAIL_CRON_LIMIT = env.int("EVENT_MAIL_CRON_LIMIT")
EVENT_LEAD_BATCH = env.int("EVENT_LEAD_BATCH")
EVENT_LEAD_CRON_LIMIT = env.int("EVENT_LEAD_CRON_LIMIT")
EVENT_TRUSTED_PROXY = env.str("EVENT_TRUSTED_PROXY")  # may be empty: no proxy trusted
EVENT_TEMPLATE_RENDERER = env.str("EVENT_TEMPLATE_RENDERER")
EVENT_MAIL_QUEUE = env.str("EVENT_MAIL_QUEUE")
EVENT_SMS_QUEUE = env.str("EVENT_SMS_QUEUE")
EVENT_LEAD_SINK = env.str("EVENT_LEAD_SINK")
EVENT_SMS_GATEWAY_URL = env.str("EVENT_SMS_GATEWAY_URL")
EVENT_SMS_GATEWAY_TOKEN = env.str("EVENT_SMS_GATEWAY_TOKEN")
EVENT_PUBLIC_URL = env.str("EVENT_PUBLIC_URL")


def _whole_hours(name: str, default: int) -> int:
    """A knob added by the project, so it has a default: anything but a whole number of hours
    from 1 to 8760 (a year) stops start-up."""
    raw = env.str(name, default=str(default)).strip()
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= 8760:
        raise ImproperlyConfigured(
            f"{name} must be a whole number of hours from 1 to 8760, not {raw!r}."
        )
    return int(raw)


# How long a waiting-list offer holds its seat.
EVENT_WAITLIST_OFFER_HOURS = _whole_hours("EVENT_WAITLIST_OFFER_HOURS", 24)
# Outbound webhooks: an endpoint failing this long without one success is disabled (its
# messages wait for it); after a secret rotation the previous secret signs this long too.
EVENT_WEBHOOK_DISABLE_HOURS = _whole_hours("EVENT_WEBHOOK_DISABLE_HOURS", 72)
EVENT_WEBHOOK_ROTATION_HOURS = _whole_hours("EVENT_WEBHOOK_ROTATION_HOURS", 24)
# Where `manage.py webhook_sink` listens (make run: the demo endpoint of seed_demo); empty: no
# sink and no demo endpoint.
EVENT_WEBHOOK_SINK_URL = env.str("EVENT_WEBHOOK_SINK_URL", default="")

# Fonts of the PDF tickets and name badges (events/pdf/fonts.py): TrueType files (a .ttc's
# first font), comma-separated, tried in this order for each word of a text. Unset or empty:
# Debian's DejaVu Sans (Latin, Greek, Cyrillic), Noto Sans Arabic and WenQuanYi Micro Hei
# (Chinese, Japanese, Korean) from fonts-dejavu-core, fonts-noto-core and fonts-wqy-microhei.
# The system check events.E005 stops start-up when a file cannot be used or when no listed
# font covers a script names are written in (events.pdf.fonts.REQUIRED_SCRIPTS).
DEFAULT_PDF_FONTS = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/noto/NotoSansArabic-Regular.ttf",
    "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc",
]
EVENT_PDF_FONTS = [
    path.strip() for path in env.list("EVENT_PDF_FONTS", default=[]) if path.strip()
] or DEFAULT_PDF_FONTS

# Per-client rate limits of the attendee surface (spec.md §7.5), not environment knobs:
# scope → (requests, window in seconds). "intake": registration POSTs (page and API);
# "token": /my-tickets/ and /ics/ GETs. Benchmarks lift them in their own settings module.
EVENT_RATE_LIMITS = {"intake": (30, 60), "token": (120, 60)}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    # Capability tokens in /ics/<token> and /my-tickets/<token> paths are masked wherever a
    # request path may be logged (spec.md §7.1).
    "filters": {"mask_tokens": {"()": "events.access_log.TokenMaskingFilter"}},
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "plain",
            "filters": ["mask_tokens"],
        }
    },
    "root": {"handlers": ["console"], "level": "INFO"},
    "loggers": {
        # gunicorn/django access lines would carry capability tokens in paths: keep them out.
        "django.request": {"level": "ERROR", "filters": ["mask_tokens"]},
        "django.server": {"level": "ERROR", "filters": ["mask_tokens"]},
        # One INFO line per gateway POST (SMS delivery, the seam's sender) is noise at volume;
        # the delivery service logs its own outcome per message.
        "httpx": {"level": "WARNING"},
        "httpcore": {"level": "WARNING"},
    },
}

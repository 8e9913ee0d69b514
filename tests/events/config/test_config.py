"""Configuration fails closed (spec.md §7.1, §10, §13; interfaces.md "Config knobs").

Each check runs `manage.py` in a subprocess with an explicit environment and no .env file
(`DJANGO_ENV_FILE=/dev/null`), so what the code reads is exactly what the test gives it.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.mail import EmailMessage, get_connection
from django.core.management import call_command

ROOT = Path(__file__).resolve().parents[3]

# interfaces.md → "Config knobs": every one is required by the code (no default).
KNOBS = [
    "DJANGO_SECRET_KEY",
    "DJANGO_DEBUG",
    "DJANGO_ALLOWED_HOSTS",
    "DATABASE_URL",
    "CELERY_BROKER_URL",
    "CACHE_URL",
    "EMAIL_URL",
    "EVENT_CAPABILITY_SECRET",
    "EVENT_SEAM_SECRET",
    "EVENT_MAIL_BATCH",
    "EVENT_MAIL_CRON_LIMIT",
    "EVENT_LEAD_BATCH",
    "EVENT_LEAD_CRON_LIMIT",
    "EVENT_TRUSTED_PROXY",
    "EVENT_TEMPLATE_RENDERER",
    "EVENT_MAIL_QUEUE",
    "EVENT_SMS_QUEUE",
    "EVENT_LEAD_SINK",
    "EVENT_SMS_GATEWAY_URL",
    "EVENT_SMS_GATEWAY_TOKEN",
    "EVENT_PUBLIC_URL",
]
# Also read without a default, beyond the pinned list.
EXTRA_KNOBS = ["DEFAULT_FROM_EMAIL"]


def _example_keys() -> list[str]:
    keys = []
    for line in (ROOT / ".env.example").read_text().splitlines():
        key, sep, _ = line.partition("=")
        if sep and not line.lstrip().startswith("#"):
            keys.append(key.strip())
    return keys


@pytest.fixture(scope="module")
def knob_values(tmp_path_factory) -> dict[str, str]:
    """A complete, valid set of knobs: what `make run` would write (scripts/write_env.py)."""
    target = tmp_path_factory.mktemp("env") / ".env"
    subprocess.run([sys.executable, "scripts/write_env.py", str(target)], cwd=ROOT, check=True)
    values = {}
    for line in target.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and not line.lstrip().startswith("#"):
            values[key] = value
    return values


def manage(*args: str, values: dict[str, str], settings: str = "config.settings"):
    env = {k: v for k, v in os.environ.items() if k not in _example_keys()}
    env.pop("EVENT_TEST_ADMIN_URL", None)
    env.update(values)
    env["DJANGO_ENV_FILE"] = "/dev/null"
    env["DJANGO_SETTINGS_MODULE"] = settings
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_env_example_declares_every_knob():
    keys = _example_keys()
    assert sorted(set(KNOBS + EXTRA_KNOBS) - set(keys)) == []
    assert len(keys) == len(set(keys))


def test_check_passes_with_every_knob_set(knob_values):
    assert knob_values["EVENT_TRUSTED_PROXY"] == ""  # empty is allowed: no proxy trusted
    result = manage("check", values=knob_values)
    assert result.returncode == 0, result.stderr
    assert "System check identified no issues" in result.stdout


@pytest.mark.parametrize("knob", KNOBS + EXTRA_KNOBS)
def test_a_missing_knob_stops_start_up_naming_it(knob, knob_values):
    values = {k: v for k, v in knob_values.items() if k != knob}
    result = manage("check", values=values)
    assert result.returncode != 0
    assert f"ImproperlyConfigured: Set the {knob} environment variable" in result.stderr


def test_production_needs_its_csrf_origins(knob_values):
    values = {k: v for k, v in knob_values.items() if k != "DJANGO_CSRF_TRUSTED_ORIGINS"}
    result = manage("check", values=values, settings="config.settings_production")
    assert result.returncode != 0
    assert "Set the DJANGO_CSRF_TRUSTED_ORIGINS environment variable" in result.stderr


@pytest.mark.parametrize("secret", ["", "s" * 31])
def test_a_short_capability_secret_fails_the_check(secret, knob_values):
    result = manage("check", values={**knob_values, "EVENT_CAPABILITY_SECRET": secret})
    assert result.returncode != 0
    assert "(events.E001) EVENT_CAPABILITY_SECRET is missing or shorter than 32" in result.stderr


def test_a_32_character_capability_secret_passes(knob_values):
    result = manage("check", values={**knob_values, "EVENT_CAPABILITY_SECRET": "s" * 32})
    assert result.returncode == 0, result.stderr


def test_an_empty_seam_secret_fails_the_check(knob_values):
    result = manage("check", values={**knob_values, "EVENT_SEAM_SECRET": "  "})
    assert result.returncode != 0
    assert "(events.E002) EVENT_SEAM_SECRET is empty" in result.stderr


def test_deploy_check_is_clean_with_production_settings(knob_values):
    result = manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        values=knob_values,
        settings="config.settings_production",
    )
    assert result.returncode == 0, result.stderr
    assert "System check identified no issues" in result.stdout


def test_deploy_check_fails_on_a_weak_secret_key(knob_values):
    """Control: the deploy gate does fail on a production weakness."""
    result = manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        values={**knob_values, "DJANGO_SECRET_KEY": "generate-me"},
        settings="config.settings_production",
    )
    assert result.returncode != 0
    assert "security.W009" in result.stderr


@pytest.mark.django_db
def test_migrations_match_the_models():
    out = StringIO()
    call_command("makemigrations", "--check", "--dry-run", stdout=out)  # SystemExit on a diff
    assert out.getvalue().strip() == "No changes detected"


def test_the_demo_mail_goes_to_a_local_mailbox_not_a_log(knob_values):
    # Mails carry live capability links: the demo writes them to var/mail/, never to stdout.
    assert knob_values["EMAIL_URL"] == "filemail://"
    result = manage(
        "shell",
        "-c",
        "from django.conf import settings as s; print(s.EMAIL_BACKEND, s.EMAIL_FILE_PATH)",
        values=knob_values,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1].split() == [
        "config.mailbox.OwnerOnlyFileBackend",
        str(ROOT / "var" / "mail"),
    ]


def test_the_demo_mailbox_files_are_the_owners_only(tmp_path):
    """Each file holds whole mails, live ticket links included: 0600 (a new folder 0700)."""
    folder = tmp_path / "mail"
    previous = os.umask(0o022)  # the usual shell umask: Django's own backend writes 0644
    try:
        connection = get_connection("config.mailbox.OwnerOnlyFileBackend", file_path=str(folder))
        sent = EmailMessage("Your tickets", "https://x/my-tickets/t/", to=["a@example.org"])
        assert connection.send_messages([sent]) == 1
    finally:
        os.umask(previous)

    (written,) = folder.iterdir()
    assert "Your tickets" in written.read_text()
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_a_mailbox_folder_that_cannot_be_made_is_refused_naming_it(tmp_path):
    """A file where the folder should be: start-up stops with ImproperlyConfigured naming the
    path, as Django's own file backend does, instead of failing later on the first mail."""
    from django.core.exceptions import ImproperlyConfigured

    blocker = tmp_path / "taken"
    blocker.write_text("")
    with pytest.raises(ImproperlyConfigured, match="taken/mail"):
        get_connection("config.mailbox.OwnerOnlyFileBackend", file_path=str(blocker / "mail"))

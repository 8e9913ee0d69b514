"""The deployment topology of docker-compose.yml (docs/runbook.md "Production on several
machines"), checked on the file itself: Docker is not needed to read it.

- exactly one beat, never replicated, and no worker runs an embedded beat (`-B`);
- web and worker replicated (two or more each), the web not published: a buffering nginx in
  front, the only published service, proxying to the web's bound port, and the one address
  the application trusts for X-Forwarded-For;
- migrations run once, in a one-shot service every application process waits for;
- every environment name an application service sets is a knob of .env.example (or the
  settings module itself), and all of them agree on the database and the broker;
- the database connections the processes can hold fit PostgreSQL's max_connections.
"""

from __future__ import annotations

import re
import runpy
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "docker-compose.yml"
# Selects the settings module; read by Django and Celery themselves, not by config/settings.py.
PROCESS_VARIABLES = {"DJANGO_SETTINGS_MODULE"}
SUPERUSER_RESERVED = 3  # PostgreSQL's superuser_reserved_connections default


def _compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


def _argv(service: dict[str, Any]) -> list[str]:
    """The command's words; a `sh -c "…"` script is split too, so every program it runs shows."""
    command = service.get("command") or []
    argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
    if argv[:2] == ["sh", "-c"] and len(argv) == 3:
        return ["sh", "-c", *shlex.split(argv[2])]
    return argv


def _replicas(service: dict[str, Any]) -> int:
    return int((service.get("deploy") or {}).get("replicas", 1))


def _is_app(service: dict[str, Any]) -> bool:
    return "build" in service


def _runs_celery(argv: list[str], verb: str) -> bool:
    return "celery" in argv and verb in argv


def _role(services: dict[str, Any], predicate) -> list[str]:
    return [name for name, service in services.items() if predicate(_argv(service))]


def _env_example_names() -> set[str]:
    names = set()
    for line in (ROOT / ".env.example").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            names.add(line.split("=", 1)[0].strip())
    return names


def _option(argv: list[str], name: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


@pytest.fixture(scope="module")
def services() -> dict[str, Any]:
    return _compose()["services"]


def test_exactly_one_beat_never_replicated(services):
    beats = _role(services, lambda argv: _runs_celery(argv, "beat"))
    assert len(beats) == 1, f"beat services: {beats}"
    assert _replicas(services[beats[0]]) == 1
    embedded = _role(
        services,
        lambda argv: _runs_celery(argv, "worker") and ("-B" in argv or "--beat" in argv),
    )
    assert embedded == [], f"workers with an embedded beat: {embedded}"


def test_web_and_worker_are_replicated(services):
    webs = _role(services, lambda argv: "gunicorn" in argv)
    workers = _role(services, lambda argv: _runs_celery(argv, "worker"))
    assert webs and workers
    assert sum(_replicas(services[name]) for name in webs) >= 2
    assert sum(_replicas(services[name]) for name in workers) >= 2


def test_a_buffering_proxy_is_the_only_way_in(services):
    proxies = [n for n, s in services.items() if str(s.get("image", "")).startswith("nginx")]
    assert len(proxies) == 1
    proxy = services[proxies[0]]
    assert [n for n, s in services.items() if s.get("ports")] == proxies

    mount = next(v for v in proxy["volumes"] if "/etc/nginx/conf.d/" in v)
    conf = (ROOT / mount.split(":", 1)[0]).read_text()
    assert re.search(r"^\s*proxy_request_buffering on;", conf, re.M)
    upstream = re.search(r"proxy_pass http://([\w-]+):(\d+);", conf)
    assert upstream, "the proxy passes to no web service"
    web_name, port = upstream.groups()
    web_argv = _argv(services[web_name])
    assert "gunicorn" in web_argv
    assert (_option(web_argv, "--bind") or "").endswith(f":{port}"), "the web binds elsewhere"

    # The proxy has a fixed address, and it is the one the application trusts.
    addresses = {
        net["ipv4_address"]
        for net in proxy["networks"].values()
        if isinstance(net, dict) and net.get("ipv4_address")
    }
    assert len(addresses) == 1
    for name, service in services.items():
        if _is_app(service):
            assert service["environment"]["EVENT_TRUSTED_PROXY"] in addresses, name


def test_migrations_run_once_before_every_process(services):
    migrators = _role(services, lambda argv: "migrate" in argv)
    assert len(migrators) == 1, f"services that migrate: {migrators}"
    migrate = migrators[0]
    assert _replicas(services[migrate]) == 1
    assert services[migrate].get("restart") == "no"
    for name, service in services.items():
        if _is_app(service) and name != migrate:
            assert service["depends_on"][migrate] == {
                "condition": "service_completed_successfully"
            }, name


def test_app_services_set_only_knobs_of_env_example(services):
    knobs = _env_example_names()
    apps = {name: s for name, s in services.items() if _is_app(s)}
    assert set(apps) >= {"web", "worker", "beat"}
    for name, service in apps.items():
        assert service["env_file"] in (".env", [".env"]), name
        unknown = set(service["environment"]) - knobs - PROCESS_VARIABLES
        assert not unknown, f"{name} sets names .env.example does not have: {unknown}"
    # One database, one broker, one cache for every process.
    environments = {tuple(sorted(s["environment"].items())) for s in apps.values()}
    assert len(environments) == 1


def test_database_connections_fit_max_connections(services):
    gunicorn = runpy.run_path(str(ROOT / "config" / "gunicorn.py"))
    budget = 0
    for service in services.values():
        if not _is_app(service):
            continue
        argv = _argv(service)
        if "gunicorn" in argv:
            per_replica = gunicorn["workers"] * gunicorn["threads"]
        elif _runs_celery(argv, "worker"):
            concurrency = _option(argv, "--concurrency") or _option(argv, "-c")
            assert concurrency, "a worker without --concurrency takes one process per CPU"
            per_replica = int(concurrency)
        else:
            per_replica = 1
        budget += per_replica * _replicas(service)
    postgres_argv = _argv(services["postgres"])
    max_connections = next(
        int(a.split("=", 1)[1]) for a in postgres_argv if a.startswith("max_connections=")
    )
    assert budget <= max_connections - SUPERUSER_RESERVED, (budget, max_connections)

#!/usr/bin/env bash
# Make sure PostgreSQL (DATABASE_URL) and Redis (CELERY_BROKER_URL) answer; start a local one
# on its default port when it is installed but stopped. A service that stays unreachable is
# named with its address and knob, and the script exits 1.
# Addresses come from the environment, else .env, else .env.example (before .env is written).
set -u
cd "$(dirname "$0")/.."

# host and port of a URL knob: environment → .env → .env.example
endpoint() {
  python3 - "$1" "$2" <<'PY'
import os, sys
from pathlib import Path
from urllib.parse import urlsplit

knob, default_port = sys.argv[1], int(sys.argv[2])
url = os.environ.get(knob)
for name in (os.environ.get("DJANGO_ENV_FILE", ".env"), ".env.example"):
    if url is not None:
        break
    if name and Path(name).is_file():
        for line in Path(name).read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip() == knob and not line.lstrip().startswith("#"):
                url = value.strip()
parts = urlsplit(url or "")
print(parts.hostname or "127.0.0.1", parts.port or default_port)
PY
}

answers() {  # host port [redis]
  python3 - "$@" <<'PY'
import socket, sys
host, port = sys.argv[1], int(sys.argv[2])
try:
    with socket.create_connection((host, port), timeout=1) as s:
        if len(sys.argv) > 3:
            s.settimeout(1)
            s.sendall(b"PING\r\n")
            sys.exit(0 if s.recv(16).startswith(b"+PONG") else 1)
except OSError:
    sys.exit(1)
PY
}

is_local_default() {  # host port default_port
  [ "$2" = "$3" ] && { [ "$1" = "127.0.0.1" ] || [ "$1" = "localhost" ] || [ "$1" = "::1" ]; }
}

read -r PG_HOST PG_PORT < <(endpoint DATABASE_URL 5432)
read -r REDIS_HOST REDIS_PORT < <(endpoint CELERY_BROKER_URL 6379)

if ! answers "$PG_HOST" "$PG_PORT"; then
  if is_local_default "$PG_HOST" "$PG_PORT" 5432 && command -v pg_ctlcluster >/dev/null 2>&1 \
     && [ -d /etc/postgresql ]; then
    echo "PostgreSQL is not answering: starting it"
    version="$(ls /etc/postgresql | sort -V | tail -n1)"
    pg_ctlcluster --skip-systemctl-redirect "$version" main start \
      || echo "pg_ctlcluster could not start PostgreSQL $version" >&2
    for _ in $(seq 1 30); do answers "$PG_HOST" "$PG_PORT" && break; sleep 1; done
  fi
  if ! answers "$PG_HOST" "$PG_PORT"; then
    echo "ERROR: PostgreSQL is not reachable on $PG_HOST:$PG_PORT (DATABASE_URL)." >&2
    exit 1
  fi
fi

if ! answers "$REDIS_HOST" "$REDIS_PORT" redis; then
  if is_local_default "$REDIS_HOST" "$REDIS_PORT" 6379 && command -v redis-server >/dev/null 2>&1
  then
    echo "Redis is not answering: starting it"
    # umask 077: its log file (and folder) readable by the owner only, as every log we create.
    (
      umask 077
      mkdir -p /var/lib/redis /var/log/redis
      redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
        --dir /var/lib/redis --logfile /var/log/redis/ci.log
    ) || echo "redis-server could not be started" >&2
    for _ in $(seq 1 30); do answers "$REDIS_HOST" "$REDIS_PORT" redis && break; sleep 1; done
  fi
  if ! answers "$REDIS_HOST" "$REDIS_PORT" redis; then
    echo "ERROR: Redis is not reachable on $REDIS_HOST:$REDIS_PORT (CELERY_BROKER_URL)." >&2
    exit 1
  fi
fi
exit 0

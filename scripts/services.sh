#!/usr/bin/env bash
# Make sure PostgreSQL and Redis answer; start them when installed but stopped.
set -u
pg_up() { pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null || python3 - <<'PY'
import socket, sys
s = socket.socket(); s.settimeout(1)
sys.exit(0 if s.connect_ex(("127.0.0.1", 5432)) == 0 else 1)
PY
}
redis_up() { python3 - <<'PY'
import socket, sys
s = socket.socket(); s.settimeout(1)
try:
    s.connect(("127.0.0.1", 6379)); s.sendall(b"PING\r\n"); sys.exit(0 if s.recv(16).startswith(b"+PONG") else 1)
except OSError:
    sys.exit(1)
PY
}
if ! pg_up; then
  if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
    echo "PostgreSQL is not answering: starting it"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
    for _ in $(seq 1 30); do pg_up && break; sleep 1; done
  fi
  pg_up || { echo "ERROR: PostgreSQL is not reachable on 127.0.0.1:5432 (DATABASE_URL)." >&2; exit 1; }
fi
if ! redis_up; then
  if command -v redis-server >/dev/null 2>&1; then
    echo "Redis is not answering: starting it"
    mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
    redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
      --dir /var/lib/redis --logfile /var/log/redis/ci.log || true
    for _ in $(seq 1 30); do redis_up && break; sleep 1; done
  fi
  redis_up || { echo "ERROR: Redis is not reachable on 127.0.0.1:6379 (CELERY_BROKER_URL)." >&2; exit 1; }
fi
exit 0

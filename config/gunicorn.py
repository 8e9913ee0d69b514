"""Gunicorn's settings for every deployment (Procfile and docker-compose pass `--config` this file;
each passes its own --bind).

Slow clients must not starve the server: threaded workers (`gthread`) keep idle
keep-alive connections in the worker's poller rather than in a thread, and 2 × 16 threads serve
requests; a client that trickles its body blocks one thread at most `BODY_READ_TIMEOUT` seconds
per silent read (the socket timeout set before the app reads the body). Gunicorn itself has no
whole-body deadline: deployments put a buffering reverse proxy in front (docker-compose's nginx
receives the whole request before it reaches gunicorn; docs/runbook.md).
"""

import os


def _body_read_timeout() -> float:
    """WEB_BODY_READ_TIMEOUT (seconds, default 10): how long one silent read of a request body
    may hold a thread. Anything but a number in (0, 300] stops the server at start-up."""
    raw = os.environ.get("WEB_BODY_READ_TIMEOUT", "10")
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0 < value <= 300:  # NaN fails too
        raise SystemExit(f"WEB_BODY_READ_TIMEOUT must be seconds in (0, 300], not {raw!r}")
    return value


BODY_READ_TIMEOUT = _body_read_timeout()

worker_class = "gthread"
workers = 2
threads = 16
timeout = 30  # a worker silent this long (its main loop stuck) is killed and replaced
graceful_timeout = 20  # SIGTERM: in-flight requests get this long to finish
keepalive = 5

# Capability tokens masked and control characters escaped in every access line (spec.md §7.1).
logger_class = "events.access_log.TokenMaskingLogger"
accesslog = "-"
access_log_format = '%(h)s "%(m)s %(U)s" %(s)s %(b)s %(M)sms'


def pre_request(worker, req):
    """Before the app reads the body: a read that waits longer than BODY_READ_TIMEOUT fails
    (the thread is freed) instead of waiting for the client forever."""
    sock = getattr(req.unreader, "sock", None)
    if sock is not None:
        sock.settimeout(BODY_READ_TIMEOUT)

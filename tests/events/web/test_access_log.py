"""The access line's atoms (events.access_log.TokenMaskingLogger): each atom a format reads is
token-masked, control-escaped and quote-escaped, as when every atom was processed up front."""

from __future__ import annotations

import io
import logging
from datetime import timedelta
from types import SimpleNamespace

from gunicorn.config import Config
from gunicorn.glogging import SafeAtoms
from hypothesis import given, settings
from hypothesis import strategies as st

from events.access_log import TokenMaskingLogger, escape_controls, mask

TOKEN = "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z:ZZxxYYww00"
FORMAT = '%(h)s "%(r)s" %(s)s %(b)s "%(f)s" "%(a)s" %({x-forwarded-for}i)s %({path_info}e)s %(q)s'


def _up_front(atoms: dict) -> SafeAtoms:
    """Every atom masked and escaped before gunicorn's SafeAtoms: the reference behaviour."""
    return SafeAtoms(
        {k: escape_controls(mask(v)) if isinstance(v, str) else v for k, v in atoms.items()}
    )


def _logger() -> tuple[TokenMaskingLogger, io.StringIO]:
    cfg = Config()
    cfg.set("access_log_format", FORMAT)
    cfg.set("accesslog", "-")
    logger = TokenMaskingLogger(cfg)
    stream = io.StringIO()
    for handler in logger.access_log.handlers:
        logger.access_log.removeHandler(handler)
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.access_log.addHandler(handler)
    return logger, stream


def _request(path: str, header: str):
    environ = {
        "REQUEST_METHOD": "GET",
        "RAW_URI": path,
        "PATH_INFO": path,
        "QUERY_STRING": header,
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_REFERER": f"https://shop.example.org{path}",
        "HTTP_USER_AGENT": header,
    }
    req = SimpleNamespace(headers=[("X-FORWARDED-FOR", header), ("REFERER", path)])
    resp = SimpleNamespace(status="200 OK", headers=[("Content-Type", "text/calendar")], sent=9)
    return resp, req, environ


paths = st.one_of(
    st.just(f"/ics/{TOKEN}.ics"),
    st.just(f"/my-tickets/{TOKEN}/"),
    st.builds(lambda t: f"/waitlist/offer/{t}/", st.text(min_size=1, max_size=40)),
    st.text(max_size=60),
)


@settings(max_examples=150, deadline=None)
@given(path=paths, header=st.text(max_size=60))
def test_the_atoms_a_line_reads_match_processing_every_atom(path, header):
    logger, _ = _logger()
    resp, req, environ = _request(path, header)
    atoms = logger.atoms(resp, req, environ, timedelta(milliseconds=3))
    lazy = logger.atoms_wrapper_class(atoms)
    reference = _up_front(atoms)
    for key in ("h", "r", "s", "b", "f", "a", "q", "U", "{x-forwarded-for}i", "{path_info}e"):
        assert lazy[key] == reference[key], key
    assert lazy["{X-Forwarded-For}i"] == reference["{x-forwarded-for}i"]  # any case
    assert lazy["{absent}i"] == "-" and lazy["nope"] == "-"


def test_a_line_never_holds_the_token_nor_a_raw_line_break():
    logger, stream = _logger()
    resp, req, environ = _request(f"/ics/{TOKEN}.ics", 'evil"\r\nforged 200')
    logger.access(resp, req, environ, timedelta(milliseconds=3))
    line = stream.getvalue()
    assert line.count("\n") == 1 and "\r" not in line
    assert TOKEN not in line and TOKEN.split(":")[0] not in line
    assert '"GET /ics/*** HTTP/1.1"' in line
    assert 'evil\\"\\r\\nforged 200' in line  # quote and CR/LF escaped, on one line

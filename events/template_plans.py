"""Compiled plans of the built-in template store: one template, many registrations, same text.

A scheduler batch renders one template for hundreds of registrations of one event. Only a few
values differ from one registration to the next (its own fields, its links); the rest of the
context (event, ticket, slot, event_begin) is shared by the batch. A plan renders the template
once through the Django template language with a marker in place of each per-registration
value; each message then only puts its values back in (HTML-escaped in a mail body, exactly as
the template language escapes them), which is the text `DatabaseTemplateRenderer.render` gives.

Invariants:
- a template gets plans only when each per-registration value is printed as a plain
  `{{ registration.<field> }}`, `{{ tickets_url }}` or `{{ ics_url }}` (no filter, no tag
  reading it) and every tag is `if`, `for` or `comment`; any other template renders per
  message (`render`);
- a plan is keyed by the values of the shared context (and the active language and time zone),
  never by object identity, so an event edited between batches gets a new plan;
- the plain-text part of a mail is taken from the plan only when no value can change how the
  HTML is read (markers in text or quoted attributes only, values without markup characters or
  line breaks); otherwise `html_to_text` runs on that message's HTML. A value that is not a
  `str` sends its message through `render`.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any, cast

from django.template import Context, Template
from django.template.base import NodeList, TextNode, VariableNode
from django.template.defaulttags import CommentNode, ForNode, IfNode
from django.utils import timezone, translation
from django.utils.html import strip_tags

from events.models import NotificationType
from events.ports import RenderedMessage

OPEN, CLOSE = "\ue000", "\ue001"  # private-use characters: a marker is OPEN <index> CLOSE
_BREAKS = re.compile(r"<br\s*/?>|</(p|div|li|h[1-6]|tr)>", re.IGNORECASE)
LINK = re.compile(r'<a\s[^>]*href="([^"]*)"[^>]*>(.*?)</a>', re.IGNORECASE | re.DOTALL)


def html_text_stages(markup: str) -> tuple[str, str, str]:
    """html_to_text step by step: (links and breaks marked, tags stripped, the text). The
    compiled plans below check the middle stages."""

    def link(match: re.Match) -> str:
        url, label = match.group(1), strip_tags(match.group(2)).strip()
        return url if not label or label == url else f"{label} ({url})"

    marked = _BREAKS.sub(lambda m: m.group(0) + "\n", LINK.sub(link, markup))
    stripped = strip_tags(marked)
    lines = [line.strip() for line in html.unescape(stripped).splitlines()]
    return marked, stripped, re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def html_to_text(markup: str) -> str:
    """A readable plain-text part for an HTML mail (links kept as "text (url)")."""
    return html_text_stages(markup)[2]


_MARK = re.compile(f"{OPEN}(\\d+){CLOSE}")
_MENTIONS = re.compile(r"\b(?:registration|tickets_url|ics_url)\b")
LINK_KEYS = ("tickets_url", "ics_url")
MAX_PLANS = 512  # per renderer (one pass): bounded memory whatever the number of events

# What HTMLParser / html.unescape would join with a value written right after it.
_OPEN_TAG = re.compile(r"<[/!?]?$")
_OPEN_REF = re.compile(r"&[#\w.-]*$")
_OPEN_UNESCAPE = re.compile(r"&[^\t\n\f <&;]*$")
# A value the plain text may take verbatim: no markup or quoting character, no whitespace but
# the space, no control character, not empty and not padded.
_NOT_PLAIN = re.compile(r"[<>&\"'=`\x00-\x1f\x7f\ue000\ue001]|[^\S ]")


def plain(value: str) -> bool:
    return bool(value) and value == value.strip() and not _NOT_PLAIN.search(value)


# --- which templates can have plans ------------------------------------------------------------


def printed_keys(*templates: Template, registration_fields: tuple[str, ...]) -> tuple | None:
    """The per-registration values the templates print, in order of first use ("registration.
    name", "tickets_url"…), or None when they use one in any other way or use another tag."""
    keys: list[str] = []
    for template in templates:
        if not _walk(template.nodelist, keys, registration_fields):
            return None
    return tuple(dict.fromkeys(keys))


def _printed_key(node: VariableNode, registration_fields: tuple[str, ...]) -> str | None:
    expression = node.filter_expression
    var = expression.var
    lookups = getattr(var, "lookups", None)
    if expression.filters or not lookups or var.translate or var.message_context:
        return None
    if len(lookups) == 2 and lookups[0] == "registration" and lookups[1] in registration_fields:
        return f"registration.{lookups[1]}"
    if len(lookups) == 1 and lookups[0] in LINK_KEYS:
        return lookups[0]
    return None


def _condition_mentions(condition: Any) -> bool:
    if condition is None:
        return False
    text = getattr(condition, "text", None)
    if isinstance(text, str) and _MENTIONS.search(text):
        return True
    return _condition_mentions(getattr(condition, "first", None)) or _condition_mentions(
        getattr(condition, "second", None)
    )


def _mentions(node: IfNode | ForNode) -> bool:
    token = node.token
    return token is None or bool(_MENTIONS.search(token.contents))  # no token: unknown, refuse


def _walk(nodelist: NodeList, keys: list[str], registration_fields: tuple[str, ...]) -> bool:
    for node in nodelist:
        if isinstance(node, TextNode | CommentNode):
            continue
        if isinstance(node, VariableNode):
            key = _printed_key(node, registration_fields)
            if key is not None:
                keys.append(key)
            elif _MENTIONS.search(node.filter_expression.token):
                return False
            continue
        children: list[NodeList]
        if isinstance(node, IfNode):
            if _mentions(node) or any(
                _condition_mentions(condition) for condition, _ in node.conditions_nodelists
            ):
                return False
            children = [nodelist for _, nodelist in node.conditions_nodelists]
        elif isinstance(node, ForNode):
            sequence = getattr(node.sequence, "token", node.sequence)
            if _mentions(node) or _MENTIONS.search(str(sequence)):
                return False
            children = [cast(NodeList, node.nodelist_loop), cast(NodeList, node.nodelist_empty)]
        else:
            return False  # include, with, now, cycle, autoescape, custom tags…: per message
        if not all(_walk(child, keys, registration_fields) for child in children):
            return False
    return True


# --- one plan ----------------------------------------------------------------------------------


def _format(rendered: str) -> str:
    """The rendered text as a str.format pattern, each marker a positional field."""
    escaped = rendered.replace("{", "{{").replace("}", "}}")
    return _MARK.sub(lambda m: "{" + m.group(1) + "}", escaped)


def _stray(rendered: str) -> bool:
    rest = _MARK.sub("", rendered)
    return OPEN in rest or CLOSE in rest


def _in_quoted_value(raw_tag: str, at: int) -> bool:
    quote = ""
    for i, char in enumerate(raw_tag[:at]):
        if quote:
            if char == quote:
                quote = ""
        elif char in "\"'" and raw_tag[:i].rstrip().endswith("="):
            quote = char
    return bool(quote)


class _MarkerProbe(HTMLParser):
    """Counts the markers HTMLParser (strip_tags' parser) sees in text or in a quoted
    attribute value; a marker anywhere else (a tag or attribute name, a comment…) is not."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.safe = 0

    def handle_data(self, data: str) -> None:
        self.safe += data.count(OPEN)

    def handle_starttag(self, tag: str, attrs: list) -> None:
        raw = self.get_starttag_text() or ""
        self.safe += sum(1 for m in _MARK.finditer(raw) if _in_quoted_value(raw, m.start()))

    handle_startendtag = handle_starttag


def _markers_safe(markup: str) -> bool:
    for m in _MARK.finditer(markup):
        before = markup[: m.start()]
        if _OPEN_TAG.search(before) or _OPEN_REF.search(before):
            return False
    probe = _MarkerProbe()
    probe.feed(markup)
    probe.close()
    return probe.safe == markup.count(OPEN)


@dataclass(frozen=True)
class _Link:
    label: str  # str.format patterns
    url: str
    url_only: bool  # what html_to_text chose on the marked text


def _text_plan(markup: str) -> tuple[str, tuple[_Link, ...]] | None:
    """The plain text of the marked HTML as a pattern, with the link choices it made; None when
    a value could change how the HTML is read."""
    if OPEN not in markup:
        return _format(html_text_stages(markup)[2]), ()
    if not _markers_safe(markup):
        return None
    links = []
    for m in LINK.finditer(markup):
        if OPEN not in m.group(0):
            continue
        outside = markup[m.start() : m.start(1)] + markup[m.end(1) : m.start(2)]
        outside += markup[m.end(2) : m.end()]
        if OPEN in outside or (OPEN in m.group(2) and not _markers_safe(m.group(2))):
            return None
        label, url = strip_tags(m.group(2)).strip(), m.group(1)
        links.append(_Link(_format(label), _format(url), not label or label == url))
    before_strip, stripped, text = html_text_stages(markup)
    if not _markers_safe(before_strip) or "<" in stripped or _stray(text):
        return None
    for m in _MARK.finditer(stripped):
        if _OPEN_UNESCAPE.search(stripped[: m.start()]):
            return None
    return _format(text), tuple(links)


Getter = Callable[[Any], Any]


class Plan:
    """One template rendered for one shared context, markers in place of the registration's
    values."""

    def __init__(
        self,
        *,
        channel: str,
        getters: tuple[Getter, ...],
        subject: str,
        body: str,
        text: tuple[str, tuple[_Link, ...]] | None,
        html_to_text: Callable[[str], str],
    ) -> None:
        self.channel = channel
        self.getters = getters
        self.subject = subject
        self.body = body
        self.text = text
        self.html_to_text = html_to_text

    def render(self, registration: Any) -> RenderedMessage | None:
        """This registration's message, or None when a value is not a str (render it the
        long way)."""
        values = [getter(registration) for getter in self.getters]
        if any(type(value) is not str for value in values):
            return None
        subject = " ".join(self.subject.format(*values).split())
        if self.channel == NotificationType.SMS:
            return RenderedMessage(
                channel=self.channel, subject=subject, body_text=self.body.format(*values).strip()
            )
        markup = self.body.format(*[html.escape(value) for value in values])
        return RenderedMessage(
            channel=self.channel,
            subject=subject,
            body_text=self._text(values, markup),
            body_html=markup,
        )

    def _text(self, values: list[str], markup: str) -> str:
        if self.text is not None and all(plain(value) for value in values):
            pattern, links = self.text
            for link in links:
                label, url = link.label.format(*values), link.url.format(*values)
                if (not label or label == url) != link.url_only:
                    return self.html_to_text(markup)
            return pattern.format(*values)
        return self.html_to_text(markup)


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple((k, _freeze(v)) for k, v in value.items())
    return value


class Plans:
    """The plans of one renderer instance (one pass): templates checked once, plans built once
    per distinct shared context."""

    def __init__(
        self,
        *,
        registration_fields: tuple[str, ...],
        link_getters: dict[str, Getter],
        html_to_text: Callable[[str], str],
    ) -> None:
        self.registration_fields = registration_fields
        self.link_getters = link_getters
        self.html_to_text = html_to_text
        self._keys: dict[str, tuple | None] = {}
        self._plans: dict[tuple, Plan | None] = {}

    def keys(self, template_ref: str, subject: Template, body: Template) -> tuple | None:
        if template_ref not in self._keys:
            self._keys[template_ref] = printed_keys(
                subject, body, registration_fields=self.registration_fields
            )
        return self._keys[template_ref]

    def plan(
        self,
        *,
        template_ref: str,
        channel: str,
        subject: Template,
        body: Template,
        shared: dict[str, Any],
    ) -> Plan | None:
        keys = self.keys(template_ref, subject, body)
        if keys is None:
            return None
        cache_key = (
            template_ref,
            translation.get_language(),
            timezone.get_current_timezone_name(),
            _freeze(shared),
        )
        if cache_key not in self._plans:
            if len(self._plans) >= MAX_PLANS:
                self._plans.clear()
            self._plans[cache_key] = self._build(channel, subject, body, keys, shared)
        return self._plans[cache_key]

    def _build(
        self, channel: str, subject: Template, body: Template, keys: tuple, shared: dict
    ) -> Plan | None:
        marks = {key: f"{OPEN}{i}{CLOSE}" for i, key in enumerate(keys)}
        values = {
            **shared,
            "registration": {
                key.partition(".")[2]: mark
                for key, mark in marks.items()
                if key.startswith("registration.")
            },
            **{key: marks.get(key, "") for key in LINK_KEYS},
        }
        subject_text = subject.render(Context(values, autoescape=False))
        sms = channel == NotificationType.SMS
        body_text = body.render(Context(values, autoescape=not sms))
        if _stray(subject_text) or _stray(body_text):
            return None  # the shared context itself holds marker characters
        return Plan(
            channel=channel,
            getters=tuple(self._getter(key) for key in keys),
            subject=_format(subject_text),
            body=_format(body_text),
            text=None if sms else _text_plan(body_text),
            html_to_text=self.html_to_text,
        )

    def _getter(self, key: str) -> Getter:
        if key in self.link_getters:
            return self.link_getters[key]
        field = key.partition(".")[2]
        return lambda registration: getattr(registration, field)

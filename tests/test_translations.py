"""The attendee's languages (docs/spec.md "Languages"): every attendee-facing string is marked
for translation, and the catalogs of en, fr, nl and de hold every message, translated.

- `unmarked_template_text(source)`: the words an attendee-facing template shows outside
  `{% translate %}` / `{% blocktranslate %}` (text, and the attributes a person reads: aria-label,
  title, alt, placeholder);
- `unmarked_messages(source)`: the literals an attendee-facing module gives as a message (a
  DomainError's message, a `"message"` of a JSON answer, a transport error's text) without
  gettext; in the presentation modules (views, forms, the calendar file), any sentence-like
  literal outside gettext, a log call, an API description or a docstring;
- `makemessages` run on a copy of the checkout finds no msgid the catalogs lack (and none they
  no longer need), and every catalog entry is translated, not fuzzy; compiled catalogs (.mo) are
  made by `make run` / `make test` (`compilemessages`), never committed.

The checkout tests run the readers on the product; the throwaway tests run them on a text, to
show that they report what they should.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest
from django.conf import settings
from django.template.base import Lexer, TokenType

ROOT = Path(__file__).resolve().parent.parent
LOCALE = ROOT / "locale"
LANGUAGES = [code for code, _name in settings.LANGUAGES]

# Every template an attendee (or the desk's staff at the door) reads: pages, mails, subjects.
# The API description page (events/api_docs.html) is for integrators, in English.
ATTENDEE_TEMPLATES = sorted(
    {
        ROOT / "templates" / "base.html",
        *(ROOT / "events" / "templates" / "events").rglob("*.html"),
        *(ROOT / "events" / "templates" / "events").rglob("*.txt"),
        *(ROOT / "desk" / "templates" / "desk").rglob("*.html"),
    }
    - {ROOT / "events" / "templates" / "events" / "api_docs.html"}
)
# The modules whose messages reach an attendee or the door: refusals of the public funnel, the
# token pages, the waiting list, the JSON APIs' messages, the desk.
ATTENDEE_MODULES = [
    "config/request_body.py",
    "events/inputs.py",
    "events/ratelimit.py",
    "events/services/capability.py",
    "events/services/intake.py",
    "events/services/registrations/booking.py",
    "events/services/registrations/rules.py",
    "events/services/registrations/transitions.py",
    "events/services/seats.py",
    "events/services/self_service.py",
    "events/services/waitlist.py",
    "events/intake_form.py",
    "events/waitlist_form.py",
    "events/views.py",
    "events/views_api.py",
    "events/views_waitlist.py",
    "events/read/ics.py",
    "desk/views.py",
    "desk/services/attendance.py",
]
# Of those, the ones that only present (every sentence in them is shown to a person).
PRESENTATION_MODULES = {
    "events/intake_form.py",
    "events/waitlist_form.py",
    "events/views.py",
    "events/views_waitlist.py",
    "events/read/ics.py",
    "desk/views.py",
}


# --- templates ---------------------------------------------------------------------------------

WORD = re.compile(r"[^\W\d_]{2,}")
READ_ATTRIBUTES = {"aria-label", "title", "alt", "placeholder"}
SKIPPED_BLOCKS = {
    "blocktranslate": "endblocktranslate",
    "blocktrans": "endblocktrans",
    "comment": "endcomment",
    "verbatim": "endverbatim",
}


class _Visible(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self._raw = 0  # inside <style> or <script>

    def handle_starttag(self, tag, attrs):
        if tag in ("style", "script"):
            self._raw += 1
        for name, value in attrs:
            if name in READ_ATTRIBUTES and value and WORD.search(value):
                self.found.append(f"{name}={value.strip()!r}")

    def handle_endtag(self, tag):
        if tag in ("style", "script"):
            self._raw = max(0, self._raw - 1)

    def handle_data(self, data):
        if not self._raw and WORD.search(data):
            self.found.append(" ".join(data.split()))


def unmarked_template_text(source: str) -> list[str]:
    """The words `source` (a Django template) shows that no translation tag holds."""
    kept: list[str] = []
    closing = None
    for token in Lexer(source).tokenize():
        name = token.contents.split()[0] if token.token_type == TokenType.BLOCK else ""
        if closing is not None:
            if name == closing:
                closing = None
            continue
        if token.token_type == TokenType.TEXT:
            kept.append(token.contents)
        elif name in SKIPPED_BLOCKS:
            closing = SKIPPED_BLOCKS[name]
    parser = _Visible()
    parser.feed("".join(kept))
    parser.close()
    return parser.found


def test_attendee_templates_hold_no_unmarked_text():
    found = {
        str(path.relative_to(ROOT)): words
        for path in ATTENDEE_TEMPLATES
        if (words := unmarked_template_text(path.read_text()))
    }
    assert found == {}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("<p>Hello {{ name }}</p>", ["Hello"]),
        ('{% load i18n %}<p>{% translate "Hello" %} {{ name }}</p>', []),
        ("{% load i18n %}<p>{% blocktranslate %}Hi {{ n }}{% endblocktranslate %}</p>", []),
        ('<ul aria-label="Tags"></ul>', ["aria-label='Tags'"]),
        ("<style>body { color: red; }</style><p>— · {{ x }} (1)</p>", []),
        ("{% if a %}Attendee {{ n }}{% else %}{% endif %}", ["Attendee"]),
        ("{% autoescape off %}Cancelled: {{ e }}{% endautoescape %}", ["Cancelled:"]),
        ("{% comment %}a note{% endcomment %}<p>{{ x }}</p>", []),
    ],
)
def test_the_template_reader_reports_unmarked_words(source, expected):
    assert unmarked_template_text(source) == expected


# --- Python messages ----------------------------------------------------------------------------

GETTEXT = {"_", "gettext", "gettext_lazy", "ngettext", "ngettext_lazy", "pgettext", "npgettext"}
GETTEXT |= {"pgettext_lazy", "npgettext_lazy", "gettext_noop"}
# Calls whose strings are not shown to an attendee: log lines, the API description (English,
# for integrators), headers and the like.
SKIPPED_CALLS = {"debug", "info", "warning", "error", "exception", "critical"}
SKIPPED_CALLS |= {"operation", "register_tag", "json_answer", "json_body", "ref", "one_line"}
SKIPPED_CALLS |= {"Http404", "ValueError", "TypeError", "RuntimeError", "AssertionError"}
SKIPPED_CALLS |= {"ImproperlyConfigured", "render", "render_to_string", "reverse", "redirect"}
# The transport answers' helpers: (name, index of the message argument).
MESSAGE_ARGUMENTS = {"transport_error": 1}
# Keyword arguments that name things for staff and logs (an audit actor's label, an API's name
# in a log line), never shown to an attendee.
SKIPPED_KEYWORDS = {"label", "api", "reason"}
# Literals of the presentation modules that are not words for a person: protocol identifiers.
NOT_WORDS = {"-//backbone-events//attendee calendar//EN"}
SENTENCE = re.compile(r"[^\W\d_]{2,} [^\W\d_]{2,}")


def _error_names() -> set[str]:
    from events.errors import DomainError

    names, pending = {"DomainError"}, [DomainError]
    while pending:
        for sub in pending.pop().__subclasses__():
            names.add(sub.__name__)
            pending.append(sub)
    return names


def _callee(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _is_literal(node: ast.AST) -> bool:
    """A literal text: a string, an f-string, or one formatted with % or .format()."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and bool(WORD.search(node.value))
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod | ast.Add):
        return _is_literal(node.left)
    if isinstance(node, ast.Call) and _callee(node) == "format":
        return isinstance(node.func, ast.Attribute) and _is_literal(node.func.value)
    return False


@dataclass
class _Reader(ast.NodeVisitor):
    errors: set[str]
    strict: bool
    found: list[tuple[int, str]] = field(default_factory=list)
    _reported: set[int] = field(default_factory=set)

    def _report(self, node: ast.AST) -> None:
        if id(node) not in self._reported:
            self._reported.add(id(node))
            self.found.append((getattr(node, "lineno", 0), ast.unparse(node)[:80]))

    def visit_FunctionDef(self, node):
        self._body(node)

    visit_AsyncFunctionDef = visit_FunctionDef
    visit_ClassDef = visit_FunctionDef

    def visit_Module(self, node):
        self._body(node)

    def _body(self, node):
        body = list(node.body)
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]  # the docstring
        for child in body:
            self.visit(child)
        for decorator in getattr(node, "decorator_list", []):
            if not (isinstance(decorator, ast.Call) and _callee(decorator) in SKIPPED_CALLS):
                self.visit(decorator)
        for child in getattr(node, "args", None) and [node.args] or []:
            self.visit(child)

    def visit_Call(self, node):
        callee = _callee(node)
        if callee in GETTEXT or callee in SKIPPED_CALLS:
            return
        messages: list[ast.AST] = []
        if callee in self.errors:
            messages = node.args[:1] + [k.value for k in node.keywords if k.arg == "message"]
        elif callee in MESSAGE_ARGUMENTS:
            messages = node.args[MESSAGE_ARGUMENTS[callee] : MESSAGE_ARGUMENTS[callee] + 1]
        for message in messages:
            if _is_literal(message):
                self._report(message)
        self.visit(node.func)
        for argument in node.args:
            self.visit(argument)
        for keyword in node.keywords:
            if keyword.arg not in SKIPPED_KEYWORDS:
                self.visit(keyword.value)

    def visit_Dict(self, node):
        for key, value in zip(node.keys, node.values, strict=True):
            if isinstance(key, ast.Constant) and key.value == "message" and _is_literal(value):
                self._report(value)
        self.generic_visit(node)

    def visit_Constant(self, node):
        if (
            self.strict
            and isinstance(node.value, str)
            and SENTENCE.search(node.value)
            and node.value not in NOT_WORDS
            and not node.value.lstrip().startswith("<")  # markup, its words are attributes
        ):
            self._report(node)

    def visit_JoinedStr(self, node):
        text = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
        if self.strict and SENTENCE.search(text):
            self._report(node)

    def visit_Subscript(self, node):
        self.visit(node.value)  # a key (d["some key"]) is not shown


def unmarked_messages(source: str, *, strict: bool = False) -> list[tuple[int, str]]:
    """(line, text) of each message literal of `source` that gettext does not hold."""
    tree = ast.parse(source)
    reader = _Reader(errors=_error_names(), strict=strict)
    reader.visit(tree)
    # A module's constant holding a sentence is a message given by name.
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and all(isinstance(t, ast.Name) and t.id.isupper() for t in node.targets)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
            and SENTENCE.search(node.value.value)
            and "\n" not in node.value.value  # SQL, a script: code, not a message
            and node.value.value not in NOT_WORDS
        ):
            reader._report(node.value)
    return sorted(reader.found)


def test_attendee_messages_in_python_are_marked():
    found = {
        module: lines
        for module in ATTENDEE_MODULES
        if (
            lines := unmarked_messages(
                (ROOT / module).read_text(), strict=module in PRESENTATION_MODULES
            )
        )
    }
    assert found == {}


@pytest.mark.parametrize(
    ("source", "strict", "expected"),
    [
        ('raise NotFound("No such event.")', False, [(1, "'No such event.'")]),
        ('raise NotFound(_("No such event."))', False, []),
        ('raise ValidationFailed(f"{x} is bad", code="c")', False, [(1, "f'{x} is bad'")]),
        ('raise ValidationFailed(_("%(x)s is bad") % {"x": x}, code="c")', False, []),
        (
            'body = {"error": {"code": "c", "message": "Try again later."}}',
            False,
            [(1, "'Try again later.'")],
        ),
        ('transport_error(Code.X, "Use POST.")', False, [(1, "'Use POST.'")]),
        ('note = "Sold out soon"', True, [(1, "'Sold out soon'")]),
        ('note = "Sold out soon"', False, []),
        ('logger.info("a line for staff")', True, []),
        ('def f():\n    """A docstring says what it does."""\n', True, []),
        ('hint = f"{n} seats left"', True, [(1, "f'{n} seats left'")]),
        ('NOT_NOW = "Please try again later."', False, [(1, "'Please try again later.'")]),
        ('NOT_NOW = gettext_lazy("Please try again later.")', False, []),
    ],
)
def test_the_python_reader_reports_unmarked_messages(source, strict, expected):
    assert unmarked_messages(source, strict=strict) == expected


# --- the catalogs -------------------------------------------------------------------------------


@dataclass
class Entry:
    context: str | None
    msgid: str
    plural: str | None
    translations: list[str]
    fuzzy: bool


def _unquote(line: str) -> str:
    return ast.literal_eval(line)


def read_po(text: str) -> list[Entry]:
    """The entries of a .po file (obsolete `#~` entries left out); the header included."""
    entries: list[Entry] = []
    for block in re.split(r"\n\s*\n", text.strip()):
        lines = [line for line in block.splitlines() if not line.startswith("#~")]
        if not any(line.startswith("msgid") for line in lines):
            continue
        fuzzy = any(line.startswith("#,") and "fuzzy" in line for line in lines)
        parts: dict[str, str] = {}
        current = None
        for line in lines:
            if line.startswith("#"):
                continue
            match = re.match(r"^(msgctxt|msgid_plural|msgid|msgstr(?:\[\d+\])?) (\".*\")$", line)
            if match:
                current = match.group(1)
                parts[current] = _unquote(match.group(2))
            elif line.startswith('"') and current is not None:
                parts[current] += _unquote(line)
        translations = [v for k, v in sorted(parts.items()) if k.startswith("msgstr")]
        entries.append(
            Entry(
                parts.get("msgctxt"), parts["msgid"], parts.get("msgid_plural"), translations, fuzzy
            )
        )
    return entries


def _catalog(lang: str, root: Path = ROOT) -> Path:
    return root / "locale" / lang / "LC_MESSAGES" / "django.po"


def _keys(path: Path) -> set[tuple[str | None, str]]:
    return {(e.context, e.msgid) for e in read_po(path.read_text()) if e.msgid}


@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_catalog_entry_is_translated_and_not_fuzzy(lang):
    entries = [e for e in read_po(_catalog(lang).read_text()) if e.msgid]
    header = next(e for e in read_po(_catalog(lang).read_text()) if not e.msgid)
    plurals = int(re.search(r"nplurals=(\d+)", header.translations[0]).group(1))
    assert entries
    assert [e.msgid for e in entries if e.fuzzy] == []
    assert [e.msgid for e in entries if not all(t.strip() for t in e.translations)] == []
    assert [e.msgid for e in entries if e.plural and len(e.translations) != plurals] == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('msgid "A"\nmsgstr "B"', [Entry(None, "A", None, ["B"], False)]),
        ('#, fuzzy\nmsgid "A"\nmsgstr ""\n"B"', [Entry(None, "A", None, ["B"], True)]),
        (
            'msgctxt "date"\nmsgid "x"\nmsgid_plural "xs"\nmsgstr[0] "y"\nmsgstr[1] ""',
            [Entry("date", "x", "xs", ["y", ""], False)],
        ),
        ('#~ msgid "old"\n#~ msgstr "vieux"', []),
    ],
)
def test_the_catalog_reader_reads_entries(text, expected):
    assert read_po(text) == expected


SOURCES = ("config", "events", "sms", "booths", "leads", "desk", "seams", "templates", "locale")


@pytest.mark.slow
def test_makemessages_finds_no_message_the_catalogs_lack(tmp_path):
    """`manage.py makemessages` on a copy of the checkout: the same msgids as committed."""
    for name in SOURCES:
        shutil.copytree(
            ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__", "*.mo")
        )
    shutil.copy(ROOT / "manage.py", tmp_path / "manage.py")
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "DJANGO_SETTINGS_MODULE": "config.settings"}
    languages = [arg for lang in LANGUAGES for arg in ("-l", lang)]
    subprocess.run(
        [sys.executable, "manage.py", "makemessages", *languages, "-v0"],
        cwd=tmp_path,
        env=env,
        check=True,
        timeout=300,
    )
    for lang in LANGUAGES:
        committed, made = _keys(_catalog(lang)), _keys(_catalog(lang, tmp_path))
        assert sorted(made - committed, key=str) == [], f"{lang}: new messages"
        assert sorted(committed - made, key=str) == [], f"{lang}: messages no longer used"


def test_compiled_catalogs_are_not_committed():
    listed = subprocess.run(
        ["git", "ls-files", "*.mo"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert listed == ""


def test_the_catalogs_are_compiled_for_every_language():
    """`compilemessages` ran (make run, make test): each language answers in its words."""
    from django.utils import translation

    words = set()
    for lang in LANGUAGES:
        assert (LOCALE / lang / "LC_MESSAGES" / "django.mo").is_file(), lang
        with translation.override(lang):
            words.add(translation.gettext("Upcoming events"))
    assert len(words) == len(LANGUAGES)

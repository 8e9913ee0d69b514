"""System checks: the secrets fail closed (spec.md §7.1, §10).

Every configured secret is parsed by the rule its user applies (events.secret_knobs): the
capability secret (events.E001), the seam secret empty (events.E002) or one of its entries
unusable (events.E003), the SMS gateway's bearer token (events.E004). `manage.py` commands run
the check; config/wsgi.py runs it too and refuses to start. The messages name the knob and the
entry's position, never a value.

The fonts of the PDF tickets and badges (events.E005): every file of `EVENT_PDF_FONTS` must be
a usable TrueType font, and together they must cover every script of
`events.pdf.fonts.REQUIRED_SCRIPTS`, or names would print as empty boxes.
"""

from django.core.checks import Error, register

from events import secret_knobs

HINTS = {
    secret_knobs.CAPABILITY_CHECK: "make run writes a .env with a generated secret; see "
    ".env.example.",
    secret_knobs.SEAM_ENTRY_CHECK: "Each space-separated entry is whsec_ followed by standard "
    "base64 (as Standard Webhooks writes it), or a raw secret without the prefix.",
    secret_knobs.GATEWAY_TOKEN_CHECK: "Give the token the SMS gateway issued; make run writes "
    "a generated one for the local sink.",
}


@register()
def check_secrets(app_configs, **kwargs) -> list[Error]:
    return [
        Error(str(problem), hint=HINTS.get(problem.check_id), id=problem.check_id)
        for problem in secret_knobs.problems()
    ]


FONT_HINT = (
    "On Debian: apt-get install fonts-dejavu-core fonts-noto-core fonts-wqy-microhei (the "
    "default chain), or list TrueType files that cover it in EVENT_PDF_FONTS (comma-separated, "
    'in order of preference); docs/runbook.md, "Fonts".'
)


@register()
def check_pdf_fonts(app_configs, **kwargs) -> list[Error]:
    # Imported when the checks run, not by every process that loads the app (reportlab).
    from events.pdf import fonts

    return [Error(problem, hint=FONT_HINT, id=fonts.CHECK_ID) for problem in fonts.problems()]

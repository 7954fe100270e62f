"""The participant pages' message catalogues (``translations/<lang>/LC_MESSAGES/messages.po``):
which languages ship, which strings the pages use (Babel's extractors over the participant
templates, browser scripts and server messages), and the catalogues compiled in memory.

Run ``python -m humanlike.server.study.languages`` after changing a participant-facing string: it
writes ``translations/messages.pot`` and merges it into every catalogue (docs/translations.md)."""

from __future__ import annotations

import functools
import io
from pathlib import Path

from babel import Locale
from babel.messages.catalog import Catalog
from babel.messages.extract import DEFAULT_KEYWORDS, extract_from_file
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po, write_po
from babel.support import Translations

ROOT = Path(__file__).resolve().parents[2]  # the checkout, or the installed package's folder
CATALOGUES = ROOT / "translations"
DEFAULT = "en"
"""The language the strings are written in (no catalogue: the msgids themselves)."""
SOURCES: tuple[tuple[str, str], ...] = (
    ("templates/*.html", "jinja2.ext:babel_extract"),  # templates/admin/ stays English
    ("static/js/*.js", "javascript"),
    ("static/js/plugins/*.js", "javascript"),
    ("server/web/participant.py", "python"),
    ("server/web/withdraw.py", "python"),
    ("server/participants/resume_policy.py", "python"),
    ("server/rights/withdrawal.py", "python"),
    ("server/errors.py", "python"),
    ("server/security.py", "python"),  # the /start rate limit's page
    ("server/platforms.py", "python"),  # the refusal of a link from another source
)
"""(glob under ROOT, Babel extraction method) of every file holding participant-facing strings."""
NOT_PARTICIPANT_FACING = frozenset({"static/js/admin_table.js"})
KEYWORDS = {**DEFAULT_KEYWORDS, "lazy_gettext": None}


@functools.cache
def shipped() -> tuple[str, ...]:
    """The languages a spec may name: English and every catalogue under ``translations/``."""
    found = sorted(p.parent.parent.name for p in CATALOGUES.glob("*/LC_MESSAGES/messages.po"))
    return (DEFAULT, *found)


def direction(language: str) -> str:
    """``rtl`` or ``ltr``: the script's direction from CLDR (Babel's ``Locale.character_order``)."""
    order = Locale.parse(language).character_order
    return "rtl" if order == "right-to-left" else "ltr"


@functools.cache
def template() -> Catalog:
    """Every participant-facing msgid, extracted by Babel (the POT catalogue)."""
    pot = Catalog(project="humanlike", fuzzy=False)
    for pattern, method in SOURCES:
        for path in sorted(ROOT.glob(pattern)):
            rel = path.relative_to(ROOT).as_posix()
            if rel in NOT_PARTICIPANT_FACING:
                continue
            for lineno, msgid, comments, context in extract_from_file(
                    method, str(path), keywords=KEYWORDS, options={"trimmed": "true"}):
                pot.add(msgid, locations=[(rel, lineno)], auto_comments=comments, context=context)
    return pot


def js_msgids() -> list[str]:
    """The msgids of the browser scripts (the strings the server hands the page)."""
    return sorted(m.id for m in template() if isinstance(m.id, str) and m.id
                  and any(loc[0].startswith("static/js/") for loc in m.locations))


@functools.cache
def catalogue(language: str) -> Catalog:
    """The ``.po`` catalogue of ``language`` as Babel reads it."""
    with (CATALOGUES / language / "LC_MESSAGES" / "messages.po").open("rb") as fh:
        return read_po(fh, locale=language)


def missing(language: str) -> list[str]:
    """The msgids the pages use that ``language``'s catalogue does not translate (absent, empty
    or fuzzy); none for English."""
    if language == DEFAULT:
        return []
    cat = catalogue(language)
    out = []
    for message in template():
        if not message.id:
            continue
        entry = cat.get(message.id, message.context)
        text = entry.string if entry is not None else None
        done = all(text) if isinstance(text, tuple) else bool(text)
        if entry is None or entry.fuzzy or not done:
            out.append(message.id if isinstance(message.id, str) else message.id[0])
    return out


@functools.cache
def translations(language: str) -> Translations:
    """``language``'s catalogue compiled in memory (``.po`` kept, compiled at first use: no build
    step, and the wheel ships the ``.po`` files as data)."""
    buffer = io.BytesIO()
    write_mo(buffer, catalogue(language))
    buffer.seek(0)
    return Translations(buffer, domain="messages")


def update() -> None:
    """Write ``translations/messages.pot`` and merge it into every catalogue (new msgids empty,
    vanished ones dropped): the translator's starting point."""
    pot = template()
    with (CATALOGUES / "messages.pot").open("wb") as fh:
        write_po(fh, pot, width=100, omit_header=False)
    for language in shipped()[1:]:
        cat = catalogue(language)
        cat.update(pot, no_fuzzy_matching=True)
        with (CATALOGUES / language / "LC_MESSAGES" / "messages.po").open("wb") as fh:
            write_po(fh, cat, width=100, ignore_obsolete=True)


if __name__ == "__main__":
    update()
    for lang in shipped()[1:]:
        print(f"{lang}: {len(missing(lang))} untranslated")

"""The participant pages' language: Flask-Babel with the locale the experiment's spec sets
(``language``), never the browser's; the catalogues come from ``server/study/languages.py``."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from babel.support import NullTranslations
from flask import Flask, g, request
from flask_babel import Babel, Domain, get_locale
from sqlalchemy.exc import SQLAlchemyError

from humanlike.server.extensions import db
from humanlike.server.study import languages
from humanlike.server.tables.core import Experiment, Participant

PARTICIPANT_BLUEPRINTS = frozenset({"participant", "withdrawal", "lab"})
"""The blueprints whose pages a participant reads (the dashboard stays English)."""


def spec_language(spec: dict[str, Any] | None) -> str:
    """The language a stored spec sets (``en`` when it sets none)."""
    return str((spec or {}).get("language") or languages.DEFAULT)


def request_language() -> str:
    """The locale selector: the language of the experiment the request's ``pid`` or ``slug``
    belongs to, on participant pages; English elsewhere."""
    if "humanlike_language" in g:
        return str(g.humanlike_language)
    language = languages.DEFAULT
    args = request.view_args or {}
    if request.blueprint in PARTICIPANT_BLUEPRINTS:
        language = spec_language(_spec_of(args))
    if language not in languages.shipped():
        language = languages.DEFAULT  # a spec stored before its catalogue was removed
    g.humanlike_language = language
    return language


def _usable(value: Any) -> bool:
    """An id or slug worth looking up: a short printable string (a NUL byte, which PostgreSQL
    refuses in a text parameter, or an overlong value is no study's)."""
    return isinstance(value, str) and 0 < len(value) <= 200 and value.isprintable()


def _spec_of(args: dict[str, Any]) -> dict[str, Any] | None:
    """The stored spec of the experiment a participant page's ``pid`` or ``slug`` names; None when
    it names none, or when the database cannot answer (the page, often an error page itself, is
    then shown in the default language rather than failing)."""
    if _usable(args.get("pid")):
        query = (sa.select(Experiment.spec)
                 .join(Participant, Participant.experiment_id == Experiment.id)
                 .where(Participant.public_id == args["pid"]))
    elif _usable(args.get("slug")):
        query = sa.select(Experiment.spec).where(Experiment.slug == args["slug"])
    else:
        return None
    try:
        return db.session.execute(query).scalar_one_or_none()
    except SQLAlchemyError:
        db.session.rollback()
        return None


class CatalogueDomain(Domain):
    """Flask-Babel's domain with the catalogues compiled in memory from the ``.po`` files."""

    def get_translations(self) -> Any:
        locale = get_locale()
        language = str(locale) if locale is not None else languages.DEFAULT
        if language == languages.DEFAULT:
            return NullTranslations()
        return languages.translations(language)


class CatalogueBabel(Babel):
    """Flask-Babel using ``CatalogueDomain``."""

    domain_instance = CatalogueDomain()  # type: ignore[assignment]


def page_strings() -> dict[str, Any]:
    """What every template reads: ``page_language``, ``page_direction`` and ``page_strings`` (the
    browser scripts' msgids translated, for ``static/js/i18n.js``; empty in English)."""
    language = request_language() if request else languages.DEFAULT
    strings: dict[str, str] = {}
    if language != languages.DEFAULT:
        table = languages.translations(language)
        strings = {m: table.gettext(m) for m in languages.js_msgids()}
    return {"page_language": language, "page_direction": languages.direction(language),
            "page_strings": strings}


def init_app(app: Flask) -> None:
    CatalogueBabel(app, locale_selector=request_language)
    app.context_processor(page_strings)

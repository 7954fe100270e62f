"""Lab sessions: the experimenter types (or scans) a participant id and an optional session number
on ``/lab/<slug>``; the participant then runs the study full screen on that machine.

The id rules are the spec's ``[platform]`` (preset ``lab``): ``id_pattern`` and ``sessions`` (1: one
participation per id; more: numbered sessions, each its own participant row ``ID:SESSION``)."""

from __future__ import annotations

import re
import string
from dataclasses import dataclass

from flask import Blueprint, render_template, request

from humanlike.server.platforms import ID_PATTERN, Entry, Platform, resolve
from humanlike.server.web.participant import _message, admit, live_experiment

bp = Blueprint("lab", __name__)


@dataclass(frozen=True)
class IdFormat:
    """An id pattern in words for the experimenter (``words``) with a matching ``example``."""

    words: str
    example: str | None


_NAMED = ((string.ascii_uppercase, "capital letters"), (string.ascii_lowercase, "small letters"),
          (string.digits, "digits"))


def _class_words(chars: list[str]) -> tuple[str, str]:
    """(words, a few example characters) for a set of allowed characters."""
    left, parts, sample = set(chars), [], []
    if set(string.ascii_letters) <= left:
        parts.append("letters")
        sample.append("Ab")
        left -= set(string.ascii_letters)
    for group, name in _NAMED:
        if set(group) <= left:
            parts.append(name)
            sample.append(group[:2])
            left -= set(group)
    rest = sorted(left, key=chars.index)
    runs: list[list[str]] = []  # consecutive characters (1-9) read as a range
    for char in rest:
        if runs and ord(char) == ord(runs[-1][-1]) + 1:
            runs[-1].append(char)
        else:
            runs.append([char])
    for run in runs:
        if len(run) >= 3:
            parts.append(f"{run[0]} to {run[-1]}")
            sample.append(run[0])
        else:
            parts.extend("space" if c == " " else c for c in run)
            sample.extend(run)
    words = parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"
    return words, "".join(sample)


def _characters(node) -> list[str] | None:
    """The characters one regex atom (``re._parser`` item) allows; None if not a plain class."""
    op, arg = node
    name = str(op)
    if name == "LITERAL":
        return [chr(arg)]
    if name == "ANY":
        return [c for c in string.printable if c not in "\n\r\t\x0b\x0c"]
    if name != "IN" or (arg and str(arg[0][0]) == "NEGATE"):
        return None
    out: list[str] = []
    for kind, value in arg:
        if str(kind) == "LITERAL":
            out.append(chr(value))
        elif str(kind) == "RANGE":
            out.extend(chr(c) for c in range(value[0], value[1] + 1))
        elif str(kind) == "CATEGORY" and str(value) == "CATEGORY_DIGIT":
            out.extend(string.digits)
        elif str(kind) == "CATEGORY" and str(value) == "CATEGORY_WORD":
            out.extend(string.ascii_letters + string.digits + "_")
        else:
            return None
    return list(dict.fromkeys(out))


def _count_words(low: int, high: int) -> tuple[str, int]:
    """How many, in words, and the count an example uses."""
    if low == high:
        return f"{low}", low
    if high >= 4096:  # MAXREPEAT: no upper bound
        return ("any number of" if low == 0 else "one or more" if low == 1
                else f"{low} or more"), max(low, 3)
    return (f"up to {high}" if low <= 1 else f"{low} to {high}"), min(max(low, 3), high)


_PLAIN = {"letters", "capital letters", "small letters", "digits"}


def _sequence(items, forbidden: str) -> list[tuple[str, str]] | None:
    """(words, example) per part of a pattern, or None where it is not a plain sequence."""
    parts: list[tuple[str, str]] = []
    for op, arg in items:
        if str(op) == "AT":  # ^ and $: the id is checked in full anyway
            continue
        if str(op) == "SUBPATTERN":
            inner = _sequence(arg[-1], forbidden)
            if inner is None:
                return None
            parts.extend(inner)
            continue
        if str(op) in ("MAX_REPEAT", "MIN_REPEAT"):
            low, high, [atom] = arg[0], arg[1], list(arg[2])
            chars = _characters(atom)
            if chars is None:
                return None
            chars = [c for c in chars if c not in forbidden]
            words, sample = _class_words(chars)
            count, n = _count_words(low, high)
            example = (sample * n)[:n]
            if len(chars) == 1:
                parts.append((f'{count} times "{chars[0]}"', example))
            elif words in _PLAIN:
                parts.append((f"{count} {words}", example))
            else:
                parts.append((f"{words}, {count} characters", example))
            continue
        chars = _characters((op, arg))
        if chars is None:
            return None
        chars = [c for c in chars if c not in forbidden]
        if len(chars) == 1:
            parts.append((chars[0], chars[0]))
        else:
            words, sample = _class_words(chars)
            parts.append((f"one of {words}" if words not in _PLAIN else f"a {words[:-1]}",
                          sample[0]))
    return parts


def describe_id_pattern(pattern: str, forbidden: str = "") -> IdFormat:
    """``pattern`` in words with an example (``forbidden`` characters left out), e.g.
    ``P[0-9]{2}``: "P, then exactly 2 digits", e.g. "P01"; a pattern beyond plain character
    classes, repeats and literals is quoted as it is, with no example."""
    try:
        parts = _sequence(re._parser.parse(pattern), forbidden)  # type: ignore[attr-defined]
    except (re.error, ValueError, TypeError, AttributeError):
        parts = None
    if not parts:
        return IdFormat(f"the study's id pattern {pattern}", None)
    merged: list[tuple[str, str]] = []  # literal characters in a row read as one word
    for words, example in parts:
        if merged and len(words) == 1 and len(merged[-1][0]) >= 1 and merged[-1][0] == \
                merged[-1][1] and words == example:
            merged[-1] = (merged[-1][0] + words, merged[-1][1] + example)
        else:
            merged.append((words, example))
    texts = [f'"{w}"' if w == e else w for w, e in merged]
    example = "".join(e for _, e in merged)
    if re.fullmatch(pattern, example) is None or any(c in example for c in forbidden):
        return IdFormat(", then ".join(texts), None)
    return IdFormat(", then ".join(texts), example)


def id_format(rules) -> IdFormat:
    """The lab's id rules in words: the spec's ``id_pattern``, without ``:`` (the session
    separator)."""
    return describe_id_pattern(rules.id_pattern, forbidden=":")


def _form(loaded, rules, error: str | None = None, status: int = 200, typed: str = "",
          session: str = ""):
    return render_template("lab_entry.html", spec=loaded.spec, rules=rules, error=error,
                           typed=typed, session=session, id_format=id_format(rules)), status


def lab_entry(typed: str, session: str, rules) -> Entry:
    """The entry of a typed id and session number, checked against the spec's rules (ValueError
    says what is wrong, in words for the experimenter)."""
    typed = typed.strip()
    if not typed:
        raise ValueError("Type the participant id.")
    if not ID_PATTERN.match(typed) or ":" in typed or not re.fullmatch(rules.id_pattern, typed):
        expected = id_format(rules)
        example = f' (e.g. "{expected.example}")' if expected.example else ""
        raise ValueError(f"The id {typed!r} does not have this study's format: "
                         f"{expected.words}{example}.")
    session = session.strip() or "1"
    if not session.isdigit() or not 1 <= int(session) <= rules.sessions:
        raise ValueError(f"The session number must be a whole number from 1 to {rules.sessions}.")
    number = int(session)
    platform_id = typed if rules.sessions == 1 else f"{typed}:{number}"
    return Entry(Platform.LAB, platform_id, session_id=str(number))


@bp.route("/lab/<slug>", methods=["GET", "POST"])
def entry(slug: str):
    """GET: the experimenter's form. POST (CSRF-checked): start or resume that participant."""
    found, page = live_experiment(slug)
    if found is None:
        return page
    loaded, exp = found
    rules = resolve(exp.spec.get("platform"))
    if rules.platform != Platform.LAB:
        return _message("Study not found", "This study does not run lab sessions.", 404)
    if request.method == "GET":
        return _form(loaded, rules)
    typed, session = request.form.get("participant_id", ""), request.form.get("session", "")
    try:
        lab = lab_entry(typed, session, rules)
    except ValueError as exc:
        return _form(loaded, rules, str(exc), 400, typed[:128], session[:8])
    return admit(loaded, exp, lab)

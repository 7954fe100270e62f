"""A psiTurk project folder: its ``config.txt`` (the keys that matter, psiTurk's defaults for the
rest), its templates and static folders, and its optional ``custom.py``. A bad project is refused at
start with a message naming the file and the key."""

from __future__ import annotations

import configparser
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

#: templates psiTurk's participant routes render (``thanks-mturksubmit``/``closepopup`` are checked
#: by psiTurk 3 at start too)
REQUIRED_TEMPLATES = ("ad.html", "consent.html", "exp.html", "complete.html", "error.html",
                      "thanks-mturksubmit.html", "closepopup.html")

#: (section, key) -> default, psiTurk 3.3.1's ``local_config_defaults.txt`` for the keys we read
DEFAULTS: dict[tuple[str, str], str] = {
    ("Task Parameters", "experiment_code_version"): "0.0.1",
    ("Task Parameters", "num_conds"): "1",
    ("Task Parameters", "num_counters"): "1",
    ("Task Parameters", "contact_email_on_error"): "youremail@gmail.com",
    ("Task Parameters", "browser_exclude_rule"): "MSIE, mobile, tablet",
    ("Task Parameters", "allow_repeats"): "false",
    ("Task Parameters", "cutoff_time"): "30",
    ("HIT Configuration", "title"): "",
    ("HIT Configuration", "description"): "",
    ("Prolific", "completion_code"): "",
}
KNOWN_SECTIONS = ("HIT Configuration", "Database Parameters", "Server Parameters",
                  "Task Parameters", "Shell Parameters", "Prolific")


class PsiturkProjectError(ValueError):
    """The psiTurk project cannot be served (the message names the file and the key)."""


@dataclass(frozen=True)
class PsiturkProject:
    """What humanlike reads from a psiTurk project folder."""

    root: Path
    code_version: str
    num_conds: int
    num_counters: int
    cutoff_minutes: float
    browser_exclude_rule: tuple[str, ...]
    allow_repeats: bool
    contact_email: str
    title: str
    description: str
    prolific_completion_code: str
    warnings: tuple[str, ...] = field(default=())

    @property
    def templates(self) -> Path:
        return self.root / "templates"

    @property
    def static(self) -> Path:
        return self.root / "static"

    @property
    def custom_py(self) -> Path:
        return self.root / "custom.py"

    @property
    def slug(self) -> str:
        """The experiment slug: ``psiturk-`` and the folder name, lower-case, URL-safe."""
        name = re.sub(r"[^a-z0-9]+", "-", self.root.name.lower()).strip("-") or "project"
        return ("psiturk-" + name)[:64]


def _read_config(path: Path) -> tuple[configparser.ConfigParser, list[str]]:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        with path.open(encoding="utf-8") as handle:
            parser.read_file(handle)
    except configparser.MissingSectionHeaderError as exc:
        raise PsiturkProjectError(
            f"{path}: line {exc.lineno}: a key before any [section] header ({exc.line.strip()!r})"
        ) from exc
    except configparser.ParsingError as exc:
        where = "; ".join(f"line {n}: {line.strip()!r}" for n, line in exc.errors)
        raise PsiturkProjectError(f"{path}: not a config file ({where})") from exc
    except UnicodeDecodeError as exc:
        raise PsiturkProjectError(f"{path}: not UTF-8 text ({exc})") from exc
    warnings = [f"{path}: section [{s}] is not one psiTurk 3 reads; ignored"
                for s in parser.sections() if s not in KNOWN_SECTIONS]
    return parser, warnings


def _lookup(parser: configparser.ConfigParser, path: Path, section: str, key: str,
            warnings: list[str]) -> str:
    """The key's value in its section; a key misplaced in another section is used with a warning."""
    if parser.has_option(section, key):
        return parser.get(section, key).strip()
    for other in parser.sections():
        if parser.has_option(other, key):
            warnings.append(f"{path}: key '{key}' belongs in [{section}], found in [{other}]; used")
            return parser.get(other, key).strip()
    return DEFAULTS[(section, key)]


def _int(value: str, path: Path, section: str, key: str, minimum: int) -> int:
    try:
        number = int(value)
    except ValueError:
        raise PsiturkProjectError(
            f"{path}: [{section}] {key} = {value!r} is not a whole number") from None
    if number < minimum:
        raise PsiturkProjectError(f"{path}: [{section}] {key} = {number} must be >= {minimum}")
    return number


def _bool(value: str, path: Path, section: str, key: str) -> bool:
    states = configparser.ConfigParser.BOOLEAN_STATES
    if value.lower() not in states:
        raise PsiturkProjectError(
            f"{path}: [{section}] {key} = {value!r} is not true/false")
    return states[value.lower()]


def load_project(root: str | Path) -> PsiturkProject:
    """Read and check a psiTurk project folder; raises PsiturkProjectError naming file and key."""
    root = Path(root).resolve()
    if not root.is_dir():
        raise PsiturkProjectError(f"{root}: not a folder (a psiTurk project folder was expected)")
    config_path = root / "config.txt"
    if not config_path.is_file():
        raise PsiturkProjectError(
            f"{config_path}: missing (psiTurk's config; copy config.txt.sample if the project "
            "has one)")
    parser, warnings = _read_config(config_path)

    def get(section: str, key: str) -> str:
        return _lookup(parser, config_path, section, key, warnings)

    task = "Task Parameters"
    cutoff = get(task, "cutoff_time")
    try:
        cutoff_minutes = float(cutoff)
    except ValueError:
        raise PsiturkProjectError(
            f"{config_path}: [{task}] cutoff_time = {cutoff!r} is not a number of minutes") from None
    if cutoff_minutes < 0:
        raise PsiturkProjectError(f"{config_path}: [{task}] cutoff_time must be >= 0")
    templates = root / "templates"
    for name in REQUIRED_TEMPLATES:
        if not (templates / name).is_file():
            raise PsiturkProjectError(
                f"{templates / name}: missing (a psiTurk project needs templates/{name})")
    consent = (templates / "consent.html").read_text(encoding="utf-8", errors="replace")
    if "workerId={{ workerid }}" not in consent:
        raise PsiturkProjectError(
            f"{templates / 'consent.html'}: no link with 'workerId={{{{ workerid }}}}' to insert "
            "'&mode=' after (psiTurk error 1020, insert_mode_failed)")
    if not (root / "static").is_dir():
        raise PsiturkProjectError(f"{root / 'static'}: missing (a psiTurk project has static/)")
    project = PsiturkProject(
        root=root,
        code_version=get(task, "experiment_code_version"),
        num_conds=_int(get(task, "num_conds"), config_path, task, "num_conds", 1),
        num_counters=_int(get(task, "num_counters"), config_path, task, "num_counters", 1),
        cutoff_minutes=cutoff_minutes,
        browser_exclude_rule=tuple(
            r.strip() for r in get(task, "browser_exclude_rule").split(",") if r.strip()),
        allow_repeats=_bool(get(task, "allow_repeats"), config_path, task, "allow_repeats"),
        contact_email=get(task, "contact_email_on_error"),
        title=get("HIT Configuration", "title"),
        description=get("HIT Configuration", "description"),
        prolific_completion_code=get("Prolific", "completion_code"),
        warnings=tuple(warnings),
    )
    for warning in warnings:
        log.warning(warning)
    return project

"""``humanlike --server URL --token-file F ...``: the CLI as a client of the researcher API
(``/api/research/v1``, docs/lab.md). The commands in ``REMOTE`` call the API with httpx instead of
opening the database; every other command refuses ``--server`` by name. Answers are read into the
API's own pydantic models; an error answer is one CLI line and exit code 1 (the server changed
nothing). Actions send an ``Idempotency-Key`` derived from the command's arguments, so re-running
the same command is answered, not done (or paid) again."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click
import httpx
from pydantic import BaseModel

from humanlike.server.research_api.models import (
    ActionOut,
    BonusIn,
    ExperimentOut,
    ParticipantOut,
    ParticipantPage,
    RejectIn,
)

PREFIX = "/api/research/v1"
META = "humanlike.remote"
REMOTE = frozenset({
    ("export",),
    *(("recruit", p, a) for p in ("prolific", "mturk") for a in ("approve", "reject", "bonus")),
})
"""The commands that work with ``--server`` (their path under ``humanlike``)."""

MAX_ATTEMPTS = 20
"""How many failed answers in a row a re-run of one action walks past (each was a real try)."""

Model = TypeVar("Model", bound=BaseModel)


def read_token(path: Path) -> str:
    """The token in ``path``; refused, as ssh refuses a private key, when the group or others
    may read or write the file."""
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
        secret = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise click.ClickException(f"--token-file {path}: cannot read it ({exc.strerror})") from exc
    if mode & 0o077:
        raise click.ClickException(
            f"--token-file {path}: permissions {mode:04o} are too open (others may read the "
            f"token): run `chmod 600 {path}`; nothing was sent")
    if not secret:
        raise click.ClickException(f"--token-file {path}: the file is empty")
    return secret


def idempotency_key(*parts: object) -> str:
    """A key fixed by the command's arguments: the same command sends the same key."""
    text = json.dumps([str(p) for p in parts], separators=(",", ":"))
    return "cli-" + hashlib.sha256(text.encode()).hexdigest()[:40]


def _problem(detail: Any) -> str:
    """The API's ``detail`` as one line (a list of field problems, or a field and problem)."""
    if isinstance(detail, list):
        return "; ".join(_problem(d) for d in detail)
    if isinstance(detail, dict) and "problem" in detail:
        field = detail.get("field")
        return f"{field}: {detail['problem']}" if field else str(detail["problem"])
    return str(detail)


class Remote:
    """One server and one token; ``call`` sends a request and turns an error into a CLI line."""

    def __init__(self, server: str, token_file: Path, transport: httpx.BaseTransport | None = None):
        self.server, self.token_file = server.rstrip("/"), token_file
        self.client = httpx.Client(
            base_url=self.server + PREFIX, transport=transport, timeout=httpx.Timeout(60.0),
            headers={"Authorization": f"Bearer {read_token(token_file)}"})

    def close(self) -> None:
        self.client.close()

    def fail(self, response: httpx.Response) -> click.ClickException:
        """An error answer as one line naming what is wrong (the server changed nothing)."""
        try:
            body = response.json()
        except ValueError:
            body = {}
        error = body.get("error", "") if isinstance(body, dict) else ""
        detail = _problem(body.get("detail", "") if isinstance(body, dict) else "") or error
        status = response.status_code
        what = {
            400: f"refused: {detail}",
            401: f"the token in {self.token_file} was refused (unknown, revoked or expired): "
                 "make a new one with `humanlike token create` or on the dashboard",
            403: f"forbidden: {detail}",
            404: f"not found: {detail}",
            409: f"the same request is still running on the server: {detail}",
            422: f"refused: {detail}",
            429: f"rate limited: {detail}",
        }.get(status, f"{error or 'error'}: {detail}")
        return click.ClickException(f"{self.server} answered {status}: {what}")

    @contextmanager
    def request(self, method: str, path: str, *, body: BaseModel | None = None,
                key: str | None = None, params: dict[str, Any] | None = None,
                stream: bool = False) -> Iterator[httpx.Response]:
        """The answer to one request (streamed when ``stream``); an error answer or an
        unreachable server is a ``ClickException``, but for an action's 502 (its ``ActionOut``
        says what the platform did)."""
        headers = {"Idempotency-Key": key} if key else {}
        content = body.model_dump_json().encode() if body is not None else None
        if content is not None:
            headers["Content-Type"] = "application/json"
        try:
            with self.client.stream(method, path, content=content, headers=headers,
                                    params=params) as response:
                if response.status_code >= 400 and not (key and response.status_code == 502):
                    response.read()
                    raise self.fail(response)
                if not stream:
                    response.read()
                yield response
        except httpx.HTTPError as exc:
            raise click.ClickException(f"cannot reach {self.server}: {exc}") from exc

    def get(self, path: str, model: type[Model], **params: Any) -> Model:
        with self.request("GET", path, params=params) as response:
            return model.model_validate_json(response.content)

    def experiment(self, slug: str, platform: str | None = None) -> ExperimentOut:
        """The experiment (and, for a recruit command, a check that it recruits on ``platform``)."""
        exp = self.get(f"/experiments/{slug}", ExperimentOut)
        if platform is not None and exp.platform != platform:
            raise click.ClickException(f"experiment {slug!r} recruits on {exp.platform!r} (its "
                                       f"spec's platform), not {platform!r}")
        return exp

    def participants(self, slug: str, **filters: str) -> list[ParticipantOut]:
        """Every participant matching ``filters``, a page at a time."""
        out: list[ParticipantOut] = []
        page = 1
        while True:
            got = self.get(f"/experiments/{slug}/participants", ParticipantPage, page=page,
                           per_page=1000, **filters)
            out += got.participants
            if len(out) >= got.total or not got.participants:
                return out
            page += 1

    def act(self, slug: str, public_id: str, action: str, body: BaseModel | None,
            *args: object) -> ActionOut:
        """One action (approve, reject, exclude, bonus), keyed by the command's ``args``. When
        the server replays a failure for the key (a bonus whose state was unknown, a platform
        that was down), the next key of the chain (``args`` + attempt n) asks again: the
        server's own rules (a bonus once per reason, an unknown one checked on the platform
        first) keep that safe, and a re-run walks the same chain to the same answer."""
        path = f"/experiments/{slug}/participants/{public_id}/{action}"
        for attempt in range(MAX_ATTEMPTS):
            key = idempotency_key(action, slug, public_id, *args, *([attempt] if attempt else []))
            with self.request("POST", path, body=body, key=key) as response:
                try:
                    out = ActionOut.model_validate_json(response.content)
                except ValueError:
                    raise self.fail(response) from None
                replayed = response.headers.get("Idempotent-Replayed") == "true"
            if replayed:
                out.detail = {**out.detail, "replayed": True}
            if out.ok or not replayed:
                break
        return out

    def download(self, path: str, out: Path, params: dict[str, Any]) -> tuple[Path, int]:
        """Stream ``path``'s answer into ``out`` (a ``.zip`` file, or a folder that gets the
        server's file name); the file and its size."""
        with self.request("POST", path, params=params, stream=True) as response:
            if out.suffix != ".zip":
                disposition = response.headers.get("Content-Disposition", "")
                name = disposition.partition('filename="')[2].rstrip('"') or "export.zip"
                out.mkdir(parents=True, exist_ok=True)
                out = out / Path(name).name
            out.parent.mkdir(parents=True, exist_ok=True)
            partial = out.with_name(out.name + ".part")
            size = 0
            try:
                with partial.open("wb") as fh:
                    for chunk in response.iter_bytes():
                        fh.write(chunk)
                        size += len(chunk)
            except BaseException:
                partial.unlink(missing_ok=True)  # no half zip left behind
                raise
            partial.replace(out)
        return out, size


def current() -> Remote | None:
    """The ``--server`` client of this command line, if one was given."""
    ctx = click.get_current_context(silent=True)
    return ctx.meta.get(META) if ctx is not None else None


def refuse_local_options(command: str, **given: Any) -> None:
    """With ``--server``, options that only mean something next to the database are refused."""
    named = [name for name, value in given.items() if value]
    if named:
        options = ", ".join("--" + n.replace("_", "-") for n in named)
        raise click.ClickException(f"`humanlike {command}` with --server: {options} cannot be "
                                   "used (the server's own configuration decides); nothing was sent")


def check_command(path: Sequence[str]) -> None:
    """Refuse ``--server`` for a command that is not a client of the API, naming it."""
    if tuple(path) not in REMOTE:
        raise click.ClickException(
            f"`humanlike {' '.join(path)}` does not work with --server (it needs the database): "
            "run it on the server; with --server: "
            + ", ".join(sorted(" ".join(p) for p in REMOTE)))


def echo_actions(results: list[ActionOut]) -> None:
    """One JSON line per action, as the local commands print; a failed one fails the command."""
    for r in results:
        click.echo(json.dumps({"participant": r.participant, "action": r.action, "ok": r.ok,
                               "message": r.message, **r.detail}, default=str))
    failed = [r for r in results if not r.ok]
    if failed:
        raise click.ClickException(f"{len(failed)} of {len(results)} not done")


def approve(platform: str, slug: str, participants: tuple[str, ...], all_submitted: bool,
            include_qc_failures: bool) -> None:
    """``recruit PLATFORM approve`` through the API (``--all-submitted``: the submitted
    participants the API lists as not excluded)."""
    api = _need()
    api.experiment(slug, platform)
    ids = list(participants)
    if all_submitted:
        submitted = api.participants(slug, status="submitted")
        ids += [p.public_id for p in submitted if include_qc_failures or not p.excluded]
        skipped = [p.public_id for p in submitted if p.excluded and not include_qc_failures]
        if skipped:
            click.echo(f"not approving {len(skipped)} submitted participant(s) excluded from the "
                       f"analysis: {', '.join(skipped)}; --include-qc-failures approves them too",
                       err=True)
    if not ids:
        raise click.ClickException("name participants or give --all-submitted")
    echo_actions([api.act(slug, pid, "approve", None) for pid in ids])


def reject(platform: str, slug: str, participant: str, message: str,
           category: str | None) -> None:
    """``recruit PLATFORM reject`` through the API."""
    api = _need()
    api.experiment(slug, platform)
    body = RejectIn(message=message, category=category)
    echo_actions([api.act(slug, participant, "reject", body, message, category)])


def bonus(platform: str, slug: str, wanted: list[tuple[str, str]], reason: str) -> None:
    """``recruit PLATFORM bonus`` through the API: each (participant, amount) once per key."""
    api = _need()
    api.experiment(slug, platform)
    results = []
    for pid, amount in wanted:
        try:
            body = BonusIn(amount=amount, reason=reason)
        except ValueError as exc:
            raise click.ClickException(f"--amount {amount!r} for {pid}: give the amount in the "
                                       "study's currency, e.g. 0.50; nothing was sent") from exc
        results.append(api.act(slug, pid, "bonus", body, amount, reason))
    echo_actions(results)


def export(slug: str, out: Path, pseudonymise: bool) -> None:
    """``export`` through the API: the zip streamed to ``out``."""
    api = _need()
    path, size = api.download(f"/experiments/{slug}/export.zip", out,
                              {"pseudonymise": "1"} if pseudonymise else {})
    click.echo(f"export zip       {size:8d} bytes -> {path}")
    if pseudonymise:
        click.echo("platform, study and session ids are pseudonymised")


def _need() -> Remote:
    api = current()
    if api is None:  # pragma: no cover - the callers branch on current()
        raise click.ClickException("--server is not given")
    return api

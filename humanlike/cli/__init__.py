"""The ``humanlike`` command line: serve, demo, db, create-admin, reset-lock, export,
delete-participant, sweep-timeouts, retention, withdrawals, recruit, analyze, stimuli, simulate,
report, import. With ``--server URL --token-file F`` the commands that make sense remotely go
through the researcher API (``cli/remote.py``).

One module per command next to this one, imported only when the command runs (``--help`` stays
fast and never imports torch or matplotlib)."""

from __future__ import annotations

import importlib
from pathlib import Path

import click


class LazyGroup(click.Group):
    """A click group whose subcommands are imported only when used (keeps ``--help`` fast)."""

    def __init__(self, *args, lazy_commands: dict[str, str] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy_commands = lazy_commands or {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self.lazy_commands))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.lazy_commands:
            module_name, attr = self.lazy_commands[name].split(":")
            return getattr(importlib.import_module(module_name), attr)
        return super().get_command(ctx, name)

    def resolve_command(self, ctx: click.Context, args: list[str]):
        """The subcommand; with ``--server``, only one of the API's clients (``cli/remote.py``)."""
        name, cmd, rest = super().resolve_command(ctx, args)
        if ctx.parent is None and ctx.params.get("server") and "--help" not in rest:
            from humanlike.cli.remote import check_command

            path, leaf, left = [name or ""], cmd, rest
            while isinstance(leaf, click.Group):
                words = [a for a in left if not a.startswith("-")]
                sub = leaf.get_command(ctx, words[0]) if words else None
                if sub is None:
                    break
                path.append(words[0])
                leaf, left = sub, left[left.index(words[0]) + 1:]
            if not isinstance(leaf, click.Group):
                check_command(path)
        return name, cmd, rest

    def invoke(self, ctx: click.Context):
        """Run the subcommand; a database without humanlike's tables is a one-line error."""
        try:
            return super().invoke(ctx)
        except Exception as exc:
            if not _is_missing_table(exc):
                raise
            raise click.ClickException(
                "database not initialised (it has no humanlike tables): run `humanlike db upgrade` "
                "with the same --database-url / DATABASE_URL first") from exc


def _is_missing_table(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLAlchemy's error for a table that does not exist (SQLite, PostgreSQL)."""
    if type(exc).__module__ != "sqlalchemy.exc":
        return False
    text = str(getattr(exc, "orig", exc))
    return "no such table" in text or ("relation" in text and "does not exist" in text)


@click.group(
    cls=LazyGroup,
    lazy_commands={
        "serve": "humanlike.cli.serve:command",
        "check": "humanlike.cli.check:command",
        "demo": "humanlike.cli.demo:command",
        "db": "humanlike.cli.db:command",
        "create-admin": "humanlike.cli.create_admin:command",
        "token": "humanlike.cli.token:command",
        "reset-lock": "humanlike.cli.reset_lock:command",
        "export": "humanlike.cli.export:command",
        "delete-participant": "humanlike.cli.delete_participant:command",
        "sweep-timeouts": "humanlike.cli.sweep_timeouts:command",
        "retention": "humanlike.cli.retention:command",
        "withdrawals": "humanlike.cli.withdrawals:command",
        "recruit": "humanlike.cli.recruit:command",
        "simulate": "humanlike.cli.simulate:command",
        "report": "humanlike.cli.report:command",
        "panel-worker": "humanlike.cli.panel_worker:command",
        "sona": "humanlike.cli.sona:command",
        "plan": "humanlike.cli.plan:command",
        "publish": "humanlike.cli.publish:command",
        "score": "humanlike.cli.score:command",
        "replicate": "humanlike.cli.replicate:command",
    },
)
@click.version_option(package_name="humanlike")
@click.option("--as", "as_user", default=None, metavar="LOGIN",
              help="Act as this dashboard login: commands that act on a study check its "
                   "permissions first and name it in the audit log (env HUMANLIKE_USER; "
                   "docs/lab.md).")
@click.option("--server", default=None, metavar="URL",
              help="Act through this server's researcher API instead of the database (export, "
                   "recruit approve/reject/bonus; docs/lab.md, The command line).")
@click.option("--token-file", default=None, metavar="FILE", envvar="HUMANLIKE_TOKEN_FILE",
              type=click.Path(dir_okay=False, path_type=Path),
              help="With --server: the file holding a personal token (mode 600, as ssh asks of "
                   "a key; env HUMANLIKE_TOKEN_FILE).")
@click.pass_context
def main(ctx: click.Context, as_user: str | None, server: str | None,
         token_file: Path | None) -> None:
    """humanlike: run online psychophysics experiments and score how humanlike models are."""
    if server:
        from humanlike.cli.remote import META, Remote

        if token_file is None:
            raise click.UsageError("--server needs --token-file (a file holding a personal "
                                   "token made with `humanlike token create`)")
        if as_user:
            raise click.UsageError("--as names a login for commands run on the database; with "
                                   "--server the token's own login acts")
        remote = Remote(server, token_file)
        ctx.meta[META] = remote
        ctx.call_on_close(remote.close)
    if as_user:
        import os

        from humanlike.server.audit import CLI_USER_ENV

        before = os.environ.get(CLI_USER_ENV)
        os.environ[CLI_USER_ENV] = as_user
        ctx.call_on_close(lambda: os.environ.pop(CLI_USER_ENV, None) if before is None
                          else os.environ.__setitem__(CLI_USER_ENV, before))


@main.group(
    cls=LazyGroup,
    lazy_commands={
        "ec": "humanlike.cli.analyze_ec:command",
        "ratings": "humanlike.cli.analyze_ratings:command",
        "mlds": "humanlike.cli.analyze_mlds:command",
        "ka": "humanlike.cli.analyze_ka:command",
    },
)
def analyze() -> None:
    """Analyse exported data: error consistency, ratings, MLDS, kernel analysis."""


@main.group(
    cls=LazyGroup,
    lazy_commands={
        "mlds": "humanlike.cli.stimuli_mlds:command",
        "controversial": "humanlike.cli.stimuli_controversial:command",
        "responses": "humanlike.cli.stimuli_responses:command",
        "calibrate": "humanlike.cli.stimuli_calibrate:command",
    },
)
def stimuli() -> None:
    """Make stimuli: MLDS blend sequences, controversial images."""


@main.group(
    "import",
    cls=LazyGroup,
    lazy_commands={
        "psiturk": "humanlike.cli.import_psiturk:command",
    },
)
def import_() -> None:
    """Bring data from other platforms in: psiTurk."""

"""``humanlike recruit {prolific,mturk} {create,publish,status,sync,approve,reject,bonus,pause,stop}``
(Prolific also ``resume``, ``places``, ``hooks``, ``message``, ``test``, ``groups``).

One workflow for both platforms. ``approve``, ``reject`` and ``bonus`` call ``server.actions`` (the
dashboard's functions: state checks, audit, bonuses paid at most once); ``--dry-run`` prints the
exact requests (token redacted) and sends and changes nothing; ``sync`` is idempotent and safe to run
on a schedule (cron / systemd timer)."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import click
from flask import Flask

from humanlike.cli import person, remote
from humanlike.cli.app_context import database_option, make_app

PLATFORMS = ("prolific", "mturk")


class Context:
    """What every recruit command needs: the app, the experiment row, the platform, the client."""

    def __init__(self, platform: str, slug: str, spec_path: str | None, database_url: str | None,
                 dry_run: bool):
        self.platform, self.slug, self.dry_run = platform, slug, dry_run
        self.app: Flask = make_app([spec_path] if spec_path else (), database_url)
        from humanlike.server.audit import cli_actor

        self.actor = cli_actor()
        if spec_path:  # a fresh database is created; the experiment named is recorded
            import sqlalchemy as sa

            from humanlike.server import database
            from humanlike.server.extensions import db
            from humanlike.server.study import experiments

            with self.app.app_context():
                fresh = not sa.inspect(db.engine).has_table("experiment")
            if fresh:
                database.upgrade(self.app)
            experiments.sync_all(self.app)

    def experiment(self, need: str) -> Any:
        """The experiment row, once the ``--as`` login may ``need`` there (``cli/person.py``)."""
        import sqlalchemy as sa

        from humanlike.server.extensions import db
        from humanlike.server.tables.core import Experiment

        exp = db.session.execute(sa.select(Experiment).where(Experiment.slug == self.slug)
                                 ).scalar_one_or_none()
        if exp is None:
            raise click.ClickException(f"no experiment {self.slug!r} in the database (give "
                                       "--experiment path/to/experiment.toml)")
        if exp.platform != self.platform:
            raise click.ClickException(f"experiment {self.slug!r} recruits on {exp.platform!r} "
                                       f"(its spec's platform), not {self.platform!r}")
        person.require(need, exp)
        return exp

    def spec(self) -> Any:
        from humanlike.server.study import experiments

        loaded = experiments.registry().get(self.slug)
        if loaded is None:
            raise click.ClickException(f"experiment {self.slug!r} is not loaded: give "
                                       "--experiment path/to/experiment.toml")
        return loaded.spec

    def spec_file(self) -> str:
        """The experiment.toml errors about the spec name."""
        from humanlike.server.study import experiments

        loaded = experiments.registry().get(self.slug)
        return str(loaded.spec_path) if loaded is not None else f"{self.slug}'s experiment.toml"

    def client(self, sandbox: bool | None = None) -> Any:
        from humanlike.server.participants.actions import PlatformError

        try:
            if self.platform == "prolific":
                from humanlike.server.sources.prolific import ProlificClient

                return ProlificClient(dry_run=self.dry_run, echo=click.echo)
            from humanlike.server.sources.mturk import MTurkClient
            from humanlike.server.sources.recruiters import mturk_sandbox

            if sandbox is None:
                sandbox = mturk_sandbox(self.experiment("view"))
            return MTurkClient(sandbox=sandbox, dry_run=self.dry_run, echo=click.echo)
        except PlatformError as exc:
            raise click.ClickException(str(exc)) from exc

    def listing(self, exp: Any) -> str:
        if self.dry_run and not exp.recruitment_ref:
            return "<study-id>" if self.platform == "prolific" else "<hit-id>"
        if not exp.recruitment_ref:
            raise click.ClickException(f"experiment {self.slug!r} has no {self.platform} listing "
                                       f"yet: run `humanlike recruit {self.platform} create "
                                       f"{self.slug}` first")
        return str(exp.recruitment_ref)


def _run(ctx: Context, body: Callable[[], Any]) -> Any:
    """Run ``body`` in the app context; platform and action errors become CLI errors."""
    from humanlike.server.participants.actions import ActionError, PlatformError

    with ctx.app.app_context():
        try:
            return body()
        except ActionError as exc:
            raise click.ClickException(f"{exc} (field: {exc.field})") from exc
        except PlatformError as exc:
            raise click.ClickException(str(exc)) from exc


def _participants(exp: Any, ids: tuple[str, ...]) -> list[Any]:
    """Participants by public id or platform id (refusing unknown ones by name)."""
    import sqlalchemy as sa

    from humanlike.server.extensions import db
    from humanlike.server.tables.core import Participant

    out = []
    for ident in ids:
        row = db.session.execute(sa.select(Participant).where(
            Participant.experiment_id == exp.id,
            sa.or_(Participant.public_id == ident, Participant.platform_id == ident))
        ).scalar_one_or_none()
        if row is None:
            raise click.ClickException(f"no participant {ident!r} in experiment {exp.slug!r}")
        out.append(row)
    return out


def _echo_results(results: list[Any]) -> None:
    for r in results:
        click.echo(json.dumps(r.as_dict(), default=str))
    failed = [r for r in results if not r.ok]
    if failed:
        raise click.ClickException(f"{len(failed)} of {len(results)} not done")


def _bonus_list(participant: str | None, amount: str | None,
                csv_path: Path | None) -> list[tuple[str, str]]:
    """The (participant, amount) pairs of ``bonus``: the --csv file's lines, then PARTICIPANT."""
    wanted: list[tuple[str, str]] = []
    if csv_path is not None:
        with csv_path.open(newline="") as fh:
            wanted = [(r[0].strip(), r[1].strip()) for r in csv.reader(fh)
                      if r and r[0].strip() and not r[0].startswith("#")]
    if participant is not None:
        if amount is None:
            raise click.ClickException("--amount is required with a participant")
        wanted.append((participant, amount))
    if not wanted:
        raise click.ClickException("name a participant (with --amount) or give --csv")
    return wanted


def _recruiter(ctx: Context, exp: Any) -> Any:
    """The platform's Recruiter with a dry-run client (``--dry-run`` of approve/reject/bonus)."""
    if ctx.platform == "prolific":
        from humanlike.server.sources.prolific import ProlificRecruiter

        return ProlificRecruiter(ctx.client(), exp)
    from humanlike.server.sources.mturk import MTurkRecruiter

    return MTurkRecruiter(ctx.client(), exp)


def _store(exp: Any, ref: str | None = None, **meta: Any) -> None:
    from humanlike.server import audit
    from humanlike.server.extensions import db

    if ref is not None:
        exp.recruitment_ref = ref
    exp.recruitment_meta = {**(exp.recruitment_meta or {}), **meta}
    audit.record("cli", "recruit", experiment=exp.slug, target=exp.recruitment_ref,
                 detail={k: v for k, v in meta.items() if k != "draft"})
    db.session.commit()


def _prolific_transition(ctx: Context, exp: Any, ref: str, action: str) -> dict[str, Any] | None:
    """PUBLISH / PAUSE / START / STOP through the listing service the dashboard and the breaker
    use (stored, audited); with --dry-run only printed (None)."""
    from humanlike.server.extensions import db
    from humanlike.server.sources import listing

    if ctx.dry_run:
        ctx.client().transition_study(ref, action)
        return None
    try:
        return listing.transition(exp, action, ctx.client(), ctx.actor)
    finally:
        db.session.commit()  # the change, or the audited failure


def server_estimate(slug: str, spec: Any) -> int:
    """The minutes the server tells participants the task takes (``timeline.estimated_minutes``,
    the task page's own estimate), the longest over the conditions."""
    from humanlike.server.study import experiments
    from humanlike.server.study.timeline import estimated_minutes, generate_timeline

    loaded = experiments.registry().get(slug)
    stimuli = list(loaded.stimuli) if loaded is not None else []
    names = [c.name for c in spec.conditions] or ["default"]
    return max(estimated_minutes(generate_timeline(spec, stimuli, name, 0)["trials"],
                                 spec.presentation_for(name), spec.break_every)
               for name in names)


def _warn_estimate(slug: str, spec: Any) -> None:
    """Warn when the listing promises fewer minutes than the server's own estimate (participants
    paid by the hour would be underpaid, and Prolific flags slow studies)."""
    table = spec.recruitment.prolific if spec.recruitment else None
    if table is None:
        return
    ours = server_estimate(slug, spec)
    if table.estimated_minutes < ours:
        click.echo(f"warning: recruitment.prolific.estimated_minutes is {table.estimated_minutes}, "
                   f"below the {ours} minutes the server estimates for this task (and shows "
                   "participants); raise it, or the reward per hour is lower than it looks",
                   err=True)


def _common(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option("--dry-run", is_flag=True,
                     help="Print the exact request(s) (token redacted); send and change nothing.")(f)
    f = database_option(f)
    f = click.option("--experiment", "spec_path", type=click.Path(exists=True, dir_okay=False),
                     default=None, help="The experiment's experiment.toml (when the server config "
                                        "does not list it).")(f)
    return click.argument("slug")(f)


def _platform_group(platform: str) -> click.Group:
    group = click.Group(platform, help=f"Recruit on {'Prolific' if platform == 'prolific' else 'MTurk'}.")

    def make(slug: str, spec_path: str | None, database_url: str | None, dry_run: bool) -> Context:
        if platform == "mturk" and not dry_run:  # MTurk closed: stop unless an endpoint is given
            from humanlike.server.sources.mturk import MTurkClosed, requester_endpoint
            try:
                requester_endpoint()
            except MTurkClosed as exc:
                raise click.ClickException(str(exc)) from exc
        return Context(platform, slug, spec_path, database_url, dry_run)

    @group.command("create")
    @_common
    @click.option("--public-url", default=None,
                  help="The server's https:// address (default: recruitment.public_url).")
    @click.option("--force", is_flag=True, help="Create another listing although one exists.")
    @click.option("--workspace", envvar="PROLIFIC_WORKSPACE_ID", default=None,
                  help="Prolific: the workspace the completers_group lives in "
                       "(env PROLIFIC_WORKSPACE_ID).")
    def create(slug: str, spec_path: str | None, database_url: str | None, dry_run: bool,
               public_url: str | None, force: bool, workspace: str | None) -> None:
        """Prolific: create the draft study (blocklisting exclude_previous's participants; its
        completion code adding completers to completers_group). MTurk (no drafts there): record
        the HIT to list."""
        ctx = make(slug, spec_path, database_url, dry_run)

        def body() -> None:
            exp = ctx.experiment("spend")
            if exp.recruitment_ref and not force:
                raise click.ClickException(f"{slug} already has {platform} listing "
                                           f"{exp.recruitment_ref} (--force for another)")
            if platform == "prolific":
                from humanlike.server.extensions import db
                from humanlike.server.sources.prolific import (
                    completers_group,
                    exclusion_filters,
                    study_body,
                )

                spec = ctx.spec()
                _warn_estimate(slug, spec)
                exclude = exclusion_filters(spec, ctx.spec_file())
                study_body(spec, public_url, exclude=exclude)  # refused here before any request
                client = ctx.client()
                name = spec.recruitment.prolific.completers_group
                group = None if name is None else completers_group(
                    client, exp, name, workspace, ctx.spec_file(), db.session.commit)
                study = client.create_study(study_body(spec, public_url, exclude=exclude,
                                                       completers_group=group))
                if not dry_run:
                    meta = exp.recruitment_meta or {}
                    earlier = meta.get("studies") or ([exp.recruitment_ref]
                                                      if exp.recruitment_ref else [])
                    _store(exp, study["id"], platform_status=study.get("status", "UNPUBLISHED"),
                           studies=[*earlier, study["id"]], excluded=exclude,
                           wave=spec.recruitment.prolific.wave or 1,
                           previous_wave=spec.recruitment.prolific.previous_wave,
                           **({"completers_group": meta["completers_group"]} if group else {}))
                    click.echo(f"draft study {study['id']} created; publish with "
                               f"`humanlike recruit prolific publish {slug}`")
                return
            from humanlike.server.sources.mturk import hit_params

            params = hit_params(ctx.spec(), public_url)
            sandbox = ctx.spec().recruitment.mturk.sandbox
            client = ctx.client(sandbox)
            client.dry_run = True
            client.call("CreateHIT", **params)  # validated against the service model, printed
            if not dry_run:
                _store(exp, None, draft=params, sandbox=sandbox, status="draft")
                click.echo(f"HIT recorded ({'sandbox' if sandbox else 'LIVE'}); list it with "
                           f"`humanlike recruit mturk publish {slug}`")

        _run(ctx, body)

    @group.command("publish")
    @_common
    def publish(slug: str, spec_path: str | None, database_url: str | None,
                dry_run: bool) -> None:
        """Open the study to participants (MTurk: create the HIT)."""
        ctx = make(slug, spec_path, database_url, dry_run)

        def body() -> None:
            exp = ctx.experiment("spend")
            if platform == "prolific":
                ref = ctx.listing(exp)
                if _prolific_transition(ctx, exp, ref, "PUBLISH") is not None:
                    click.echo(f"study {ref} published")
                return
            draft = (exp.recruitment_meta or {}).get("draft")
            if not draft:
                raise click.ClickException(f"run `humanlike recruit mturk create {slug}` first")
            if exp.recruitment_ref and not dry_run:
                raise click.ClickException(f"HIT {exp.recruitment_ref} is already listed")
            hit = ctx.client().create_hit(draft)
            if not dry_run:
                _store(exp, hit["HITId"], status=hit.get("HITStatus", "Assignable"),
                       hit_type=hit.get("HITTypeId"))
                click.echo(f"HIT {hit['HITId']} listed")

        _run(ctx, body)

    @group.command("status")
    @_common
    def status(slug: str, spec_path: str | None, database_url: str | None,
               dry_run: bool) -> None:
        """The listing's status on the platform and the participants' local statuses."""
        ctx = make(slug, spec_path, database_url, dry_run)

        def body() -> None:
            import sqlalchemy as sa

            from humanlike.server.extensions import db
            from humanlike.server.tables.core import Participant

            exp = ctx.experiment("view")
            ref = ctx.listing(exp)
            client = ctx.client()
            remote = client.get_study(ref) if platform == "prolific" else client.get_hit(ref)
            counts = dict(db.session.execute(
                sa.select(Participant.status, sa.func.count()).where(
                    Participant.experiment_id == exp.id).group_by(Participant.status)).all())
            keys = ("status", "total_available_places", "places_taken", "HITStatus",
                    "NumberOfAssignmentsPending", "NumberOfAssignmentsAvailable",
                    "NumberOfAssignmentsCompleted", "Expiration")
            click.echo(json.dumps({"listing": ref, "platform": {k: remote.get(k) for k in keys
                                                                 if k in (remote or {})},
                                   "local": counts, "meta": exp.recruitment_meta}, default=str,
                                  indent=2))

        _run(ctx, body)

    @group.command("sync")
    @_common
    def sync(slug: str, spec_path: str | None, database_url: str | None, dry_run: bool) -> None:
        """Mark participants as the platform says (submitted, returned, timed out, approved ...)."""
        ctx = make(slug, spec_path, database_url, dry_run)

        def body() -> None:
            from humanlike.server.live.sync import platform_records, sync_listing

            exp = ctx.experiment("act")
            if dry_run:
                list(platform_records(platform, ctx.client(), ctx.listing(exp)))
                return
            ctx.listing(exp)
            click.echo(json.dumps(sync_listing(exp, ctx.client()).as_dict(), indent=2))

        _run(ctx, body)

    @group.command("approve")
    @_common
    @click.argument("participants", nargs=-1)
    @click.option("--all-submitted", is_flag=True,
                  help="Approve every participant whose status is submitted and who is not "
                       "excluded from the analysis (QC failures and researcher exclusions, "
                       "QC brought up to date first).")
    @click.option("--include-qc-failures", is_flag=True,
                  help="With --all-submitted: approve the excluded ones too.")
    @click.option("--override-rejection", is_flag=True, hidden=platform != "mturk",
                  help="MTurk: approve rejected assignments (OverrideRejection, within 30 days).")
    def approve(slug: str, spec_path: str | None, database_url: str | None, dry_run: bool,
                participants: tuple[str, ...], all_submitted: bool, include_qc_failures: bool,
                override_rejection: bool) -> None:
        """Approve PARTICIPANTS (public or platform ids; with --server, public ids)."""
        if remote.current() is not None:
            remote.refuse_local_options(f"recruit {platform} approve", experiment=spec_path,
                                        database_url=database_url, dry_run=dry_run,
                                        override_rejection=override_rejection)
            remote.approve(platform, slug, participants, all_submitted, include_qc_failures)
            return
        ctx = make(slug, spec_path, database_url, dry_run)

        def body() -> None:
            import sqlalchemy as sa

            from humanlike.server.extensions import db
            from humanlike.server.live.qc import refresh_qc
            from humanlike.server.participants import actions
            from humanlike.server.participants.overrides import excluded_clause
            from humanlike.server.tables.core import Participant, ParticipantQC

            exp = ctx.experiment("act")
            rows = _participants(exp, participants)
            if all_submitted:
                refresh_qc(exp)  # the stored QC of everyone whose trials changed
                excluded = excluded_clause(Participant.analysis_override,
                                           ParticipantQC.qc_failed)
                submitted = (sa.select(Participant, excluded).outerjoin(
                    ParticipantQC, ParticipantQC.participant_id == Participant.id).where(
                    Participant.experiment_id == exp.id, Participant.status == "submitted")
                    .order_by(Participant.id))
                found = db.session.execute(submitted).all()
                rows += [p for p, out in found if include_qc_failures or not out]
                skipped = [p.public_id for p, out in found if out and not include_qc_failures]
                if skipped:
                    click.echo(f"not approving {len(skipped)} submitted participant(s) excluded "
                               f"from the analysis (failed QC or excluded by a researcher): "
                               f"{', '.join(skipped)}; --include-qc-failures approves them too",
                               err=True)
            if not rows:
                raise click.ClickException("name participants or give --all-submitted")
            if override_rejection:
                if platform != "mturk":
                    raise click.ClickException("--override-rejection is MTurk's (Prolific cannot "
                                               "overturn a rejection)")
                from humanlike.server.sources.mturk import unreject

                if dry_run:
                    for row in rows:
                        _recruiter(ctx, exp).unreject(row)
                    return
                _echo_results(actions.bulk(rows, lambda p: unreject(p, ctx.actor)))
                return
            if dry_run:
                recruiter = _recruiter(ctx, exp)
                for row in rows:
                    recruiter.approve(row)
                return
            _echo_results(actions.bulk(rows, lambda p: actions.approve(p, ctx.actor)))

        _run(ctx, body)

    @group.command("reject")
    @_common
    @click.argument("participant")
    @click.option("--message", required=True,
                  help="What was wrong, as the participant will read it (>= 100 characters).")
    @click.option("--category", default=None,
                  help="Prolific's rejection category (e.g. FAILED_CHECK, LOW_EFFORT).")
    def reject(slug: str, spec_path: str | None, database_url: str | None, dry_run: bool,
               participant: str, message: str, category: str | None) -> None:
        """Reject PARTICIPANT's submission (refused before any request if the message is short)."""
        if remote.current() is not None:
            remote.refuse_local_options(f"recruit {platform} reject", experiment=spec_path,
                                        database_url=database_url, dry_run=dry_run)
            remote.reject(platform, slug, participant, message, category)
            return
        ctx = make(slug, spec_path, database_url, dry_run)

        def body() -> None:
            from humanlike.server.participants import actions

            exp = ctx.experiment("act")
            [row] = _participants(exp, (participant,))
            actions.validate_rejection(message, category, platform)
            if dry_run:
                _recruiter(ctx, exp).reject(row, message.strip(), category)
                return
            _echo_results([actions.reject(row, ctx.actor, message, category)])

        _run(ctx, body)

    @group.command("bonus")
    @_common
    @click.argument("participant", required=False)
    @click.option("--amount", default=None, help="In the study's currency, e.g. 0.50.")
    @click.option("--reason", required=True,
                  help="What the bonus is for; one bonus per participant and reason.")
    @click.option("--csv", "csv_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                  default=None, help="Many at once: a file of 'participant,amount' lines.")
    @click.option("--mark-paid", is_flag=True,
                  help="Record a bonus whose state is unknown as paid, after checking the "
                       "submission on the platform (audited; nothing is sent).")
    def bonus(slug: str, spec_path: str | None, database_url: str | None, dry_run: bool,
              participant: str | None, amount: str | None, reason: str,
              csv_path: Path | None, mark_paid: bool) -> None:
        """Pay PARTICIPANT a bonus, at most once per reason. Safe to re-run after a failure: a
        bonus whose state is unknown is checked on the platform first and never paid twice."""
        if remote.current() is not None:
            remote.refuse_local_options(f"recruit {platform} bonus", experiment=spec_path,
                                        database_url=database_url, dry_run=dry_run,
                                        mark_paid=mark_paid)
            remote.bonus(platform, slug, _bonus_list(participant, amount, csv_path), reason)
            return
        ctx = make(slug, spec_path, database_url, dry_run)

        def body() -> None:
            from humanlike.server.participants import actions

            exp = ctx.experiment("spend")
            if mark_paid:
                if participant is None:
                    raise click.ClickException("--mark-paid needs the participant")
                _echo_results(actions.bulk(_participants(exp, (participant,)),
                                           lambda p: actions.mark_bonus_paid(p, ctx.actor, reason)))
                return
            wanted = _bonus_list(participant, amount, csv_path)
            rows = _participants(exp, tuple(w[0] for w in wanted))
            amounts = {row.id: a for row, (_, a) in zip(rows, wanted)}
            if dry_run:
                from types import SimpleNamespace

                recruiter = _recruiter(ctx, exp)
                for row in rows:
                    payment = SimpleNamespace(amount=Decimal(amounts[row.id]), reason=reason,
                                              platform_ref=None, idempotency_key="<payment-key>")
                    recruiter.pay_bonus(row, payment, lambda: None)
                return
            by_amount: dict[str, list[Any]] = {}
            for row in rows:  # one bulk bonus per batch of participants owed the same amount
                by_amount.setdefault(amounts[row.id], []).append(row)
            results = []
            for owed, group in by_amount.items():
                try:
                    results += actions.pay_bonuses(group, ctx.actor, owed, reason)
                except actions.ActionError as exc:
                    results += [actions.ActionResult(p.public_id, "refused", False, str(exc),
                                                     p.status, detail={"field": exc.field})
                                for p in group]
            _echo_results(results)

        _run(ctx, body)

    def _stop_like(name: str, prolific_action: str, doc: str) -> None:
        @group.command(name, help=doc)
        @_common
        def cmd(slug: str, spec_path: str | None, database_url: str | None,
                dry_run: bool) -> None:
            ctx = make(slug, spec_path, database_url, dry_run)

            def body() -> None:
                exp = ctx.experiment("spend" if prolific_action == "START" else "act")
                ref = ctx.listing(exp)
                if platform == "prolific":
                    reply = _prolific_transition(ctx, exp, ref, prolific_action)
                    if reply is not None:
                        click.echo(f"{ref}: {reply.get('status', prolific_action)}")
                    return
                ctx.client().expire(ref)
                if not dry_run:
                    _store(exp, status="expired")
                    click.echo(f"{ref}: expired")

            _run(ctx, body)

    _stop_like("pause", "PAUSE", "Pause recruiting (MTurk has no pause: the HIT is expired; "
                                 "`extend` lists it again).")
    _stop_like("stop", "STOP", "Stop the study for good (MTurk: expire the HIT).")
    if platform == "prolific":
        _stop_like("resume", "START", "Resume a paused Prolific study.")
        _places_command(group, make)
        _hooks_command(group, make)
        _message_command(group, make)
        _test_command(group, make)
        _groups_command(group, make)
    else:
        _mturk_commands(group, make)
    return group


def _groups_command(group: click.Group, make: Callable[..., Context]) -> None:
    @group.command("groups")
    @_common
    @click.option("--workspace", envvar="PROLIFIC_WORKSPACE_ID", required=True,
                  help="Prolific workspace id (env PROLIFIC_WORKSPACE_ID).")
    @click.option("--create", "make_group", is_flag=True,
                  help="Find or create the spec's completers_group and store it for this "
                       "experiment.")
    @click.option("--add-completers", is_flag=True,
                  help="Also add this experiment's participants who finished (completed, "
                       "submitted, approved; simulated ones left out) to that group: for an "
                       "experiment that ran before it had one. Safe to repeat.")
    def groups(slug: str, spec_path: str | None, database_url: str | None, dry_run: bool,
               workspace: str, make_group: bool, add_completers: bool) -> None:
        """List the workspace's participant groups (the one this experiment's completers join
        marked); --create / --add-completers make and fill the spec's completers_group."""
        ctx = make(slug, spec_path, database_url, dry_run)

        def run() -> None:
            import sqlalchemy as sa

            from humanlike.server.admin.participants import simulated_ids
            from humanlike.server.extensions import db
            from humanlike.server.sources.prolific import completers_group
            from humanlike.server.tables.core import Participant
            from humanlike.vocabulary import FINISHED_STATUSES

            exp = ctx.experiment("act")
            client = ctx.client()
            if make_group or add_completers:
                table = ctx.spec().recruitment.prolific if ctx.spec().recruitment else None
                name = table.completers_group if table is not None else None
                if not name:
                    raise click.ClickException(f"{ctx.spec_file()}: "
                                               "recruitment.prolific.completers_group is not set: "
                                               "name the group there first")
                gid = completers_group(client, exp, name, workspace, ctx.spec_file(),
                                       db.session.commit)
                if not dry_run:
                    _store(exp, completers_group=exp.recruitment_meta["completers_group"])
            if add_completers:
                rows = db.session.execute(sa.select(Participant.id, Participant.platform_id).where(
                    Participant.experiment_id == exp.id,
                    Participant.status.in_(sorted(FINISHED_STATUSES)))).all()
                fake = simulated_ids([r.id for r in rows])
                ids = sorted({r.platform_id for r in rows if r.id not in fake and r.platform_id})
                if ids:
                    client.add_to_participant_group(gid, ids)
                if not dry_run:
                    click.echo(f"added {len(ids)} completer(s) to group {gid} ({name})")
            if dry_run:
                return
            ours = ((exp.recruitment_meta or {}).get("completers_group") or {}).get("id")
            found = client.participant_groups(workspace)
            if not found:
                click.echo(f"no participant groups in workspace {workspace}")
            for g in found:
                mark = "  (this experiment's completers)" if g.get("id") == ours else ""
                click.echo(f"{g.get('id')}  {g.get('name')}  {g.get('participant_count', 0)} "
                           f"participant(s){mark}")

        _run(ctx, run)


def _test_command(group: click.Group, make: Callable[..., Context]) -> None:
    @group.command("test")
    @_common
    @click.option("--email", default=None,
                  help="Create a test participant with this (unregistered) email first.")
    def test(slug: str, spec_path: str | None, database_url: str | None, dry_run: bool,
             email: str | None) -> None:
        """Try the draft study as a participant: Prolific's test-participant flow publishes a copy
        of the draft to the workspace's test participants (the feature is enabled per
        workspace); take it from the printed link, then `sync` as usual."""
        ctx = make(slug, spec_path, database_url, dry_run)

        def run() -> None:
            exp = ctx.experiment("act")
            ref = ctx.listing(exp)
            client = ctx.client()
            if email:
                made = client.create_test_participant(email)
                if not dry_run:
                    click.echo(f"test participant {made.get('participant_id')} created for {email}")
            copy = client.create_test_study(ref)
            if not dry_run:
                _store(exp, test_study={"id": copy.get("study_id"), "url": copy.get("study_url")})
                click.echo(f"test study {copy.get('study_id')}: {copy.get('study_url')}")

        _run(ctx, run)


def _message_command(group: click.Group, make: Callable[..., Context]) -> None:
    @group.command("message")
    @_common
    @click.argument("participants", nargs=-1, required=True)
    @click.option("--body", required=True, help="The message text (audited with it).")
    def message(slug: str, spec_path: str | None, database_url: str | None, dry_run: bool,
                participants: tuple[str, ...], body: str) -> None:
        """Send one message to PARTICIPANTS (public or Prolific ids) through Prolific."""
        ctx = make(slug, spec_path, database_url, dry_run)

        def run() -> None:
            from humanlike.server.participants import actions

            exp = ctx.experiment("act")
            rows = _participants(exp, participants)
            if dry_run:
                _recruiter(ctx, exp).message(rows, body)
                return
            _echo_results(actions.send_message(rows, ctx.actor, body))

        _run(ctx, run)


    @group.command("remind")
    @_common
    @click.option("--body", required=True, help="The message text (audited with it).")
    def remind(slug: str, spec_path: str | None, database_url: str | None, dry_run: bool,
               body: str) -> None:
        """Tell the previous wave's completers who have not started this wave (SLUG, wave k of a
        study) that it is open: one Prolific bulk message to them, audited per participant."""
        ctx = make(slug, spec_path, database_url, dry_run)

        def run() -> None:
            from humanlike.server.participants import actions
            from humanlike.server.sources.prolific import wave_recipients

            exp = ctx.experiment("act")
            try:
                rows = wave_recipients(exp, ctx.spec())
            except actions.ActionError as exc:
                raise click.ClickException(f"{ctx.spec_file()}: {exc}") from exc
            if not rows:
                click.echo("nobody to remind: every completer of the previous wave has started")
                return
            if dry_run:
                _recruiter(ctx, rows[0].experiment).message(rows, body)
                return
            _echo_results(actions.send_message(rows, ctx.actor, body))

        _run(ctx, run)


def _hooks_command(group: click.Group, make: Callable[..., Context]) -> None:
    @group.command("hooks")
    @_common
    @click.option("--workspace", envvar="PROLIFIC_WORKSPACE_ID", required=True,
                  help="Prolific workspace id (env PROLIFIC_WORKSPACE_ID).")
    @click.option("--public-url", default=None,
                  help="The server's https:// address (default: recruitment.public_url).")
    def hooks(slug: str, spec_path: str | None, database_url: str | None, dry_run: bool,
              workspace: str, public_url: str | None) -> None:
        """Subscribe this server to Prolific's webhooks (submission and study status changes, a
        high return rate): creates the workspace's secret when this server has none (kept in the
        instance folder, never printed) and confirms one subscription per event type. Safe to
        re-run: a subscription this server confirmed is kept, one it cannot know to be confirmed
        (a lost reply) is deleted and made anew, and each is read back from Prolific before it is
        reported; `sync` stays the fallback."""
        ctx = make(slug, spec_path, database_url, dry_run)

        def body() -> None:
            import os

            from humanlike.server.sources import prolific_events as prolific_hooks
            from humanlike.server.sources.prolific import ProlificError

            exp = ctx.experiment("act")
            spec = ctx.spec()
            base = public_url or (spec.recruitment.public_url if spec.recruitment else None)
            if not base or not base.startswith("https://"):
                raise click.ClickException("webhooks need the server's public https:// address "
                                           f"(recruitment.public_url or --public-url; got {base!r})")
            target = base.rstrip("/") + "/hooks/prolific"
            client = ctx.client()
            have_secret = bool(os.environ.get("PROLIFIC_WEBHOOK_SECRET")) or \
                prolific_hooks.secret_path(ctx.app.instance_path).exists()
            if not have_secret:
                made = client.create_hook_secret(workspace)
                if not dry_run:
                    path = prolific_hooks.store_secret(ctx.app.instance_path, str(made["value"]))
                    click.echo(f"webhook secret created for workspace {workspace}; kept in {path}")
            if dry_run:
                for kind in prolific_hooks.EVENT_TYPES:
                    client.subscribe(workspace, kind, target)
                return
            confirmed = prolific_hooks.confirmed_subscriptions(ctx.app.instance_path)
            kept: dict[str, str] = {}
            for sub in client.hook_subscriptions(workspace):
                kind = sub.get("event_type")
                if sub.get("target_url") != target or kind not in prolific_hooks.EVENT_TYPES:
                    continue
                if sub.get("id") in confirmed and sub.get("is_enabled") and kind not in kept:
                    kept[kind] = sub["id"]
                else:  # never confirmed here (its reply was lost), or a second one: replace it
                    client.delete_subscription(sub["id"])
                    confirmed.pop(sub["id"], None)
            for kind in prolific_hooks.EVENT_TYPES:
                if kind in kept:
                    continue
                try:
                    made = client.subscribe(workspace, kind, target)
                except ProlificError as exc:
                    if exc.unknown:
                        raise click.ClickException(
                            f"subscribing {kind}: {exc}. Prolific may or may not have created "
                            "(or confirmed) the subscription, so it is not counted as working. "
                            "Run this command again: it replaces a subscription it did not "
                            "see confirmed.") from exc
                    raise
                kept[kind] = made["id"]
                confirmed[made["id"]] = kind
                prolific_hooks.store_confirmed(ctx.app.instance_path, confirmed)
            held = {kind: client.hook_subscription(sid) for kind, sid in kept.items()}
            wrong = [f"{kind} (subscription {kept[kind]})" for kind, sub in held.items()
                     if not sub.get("is_enabled") or sub.get("event_type") != kind
                     or sub.get("target_url") != target]
            if wrong:
                raise click.ClickException(
                    "Prolific does not show these subscriptions enabled for " + target + ": "
                    + ", ".join(wrong) + ". Enable them on Prolific (or run this command again).")
            _store(exp, hooks={"workspace": workspace, "target_url": target,
                               "subscriptions": kept})
            for kind in prolific_hooks.EVENT_TYPES:
                click.echo(f"{kind} -> {target} (subscription {kept[kind]})")

        _run(ctx, body)


def _places_command(group: click.Group, make: Callable[..., Context]) -> None:
    @group.command("places")
    @_common
    @click.option("--total", type=click.IntRange(1), required=True,
                  help="The new total number of places (Prolific only allows increasing it).")
    def places(slug: str, spec_path: str | None, database_url: str | None, dry_run: bool,
               total: int) -> None:
        """Add places to the study (set its new total; fewer places are refused here, before any
        change is sent, since Prolific only allows more)."""
        ctx = make(slug, spec_path, database_url, dry_run)

        def body() -> None:
            from humanlike.server.extensions import db
            from humanlike.server.sources import listing

            exp = ctx.experiment("spend")
            ref = ctx.listing(exp)
            client = ctx.client()
            if dry_run:
                client.set_places(ref, total)  # printed, not sent
                return
            current = (client.get_study(ref) or {}).get("total_available_places")
            try:
                listing.set_places(exp, total, client, ctx.actor, current)
            except listing.PlacesRefused as exc:
                raise click.ClickException(f"{ref}: {exc}; --total {total}") from exc
            finally:
                db.session.commit()  # the change, or the audited failure
            click.echo(f"{ref}: {total} places")

        _run(ctx, body)


def _mturk_commands(group: click.Group, make: Callable[..., Context]) -> None:
    @group.command("extend")
    @_common
    @click.option("--hours", type=click.IntRange(1), default=None, help="Expire this long from now.")
    @click.option("--assignments", type=click.IntRange(1), default=None,
                  help="Add this many assignments.")
    def extend(slug: str, spec_path: str | None, database_url: str | None, dry_run: bool,
               hours: int | None, assignments: int | None) -> None:
        """Extend the HIT's lifetime and/or add assignments."""
        ctx = make(slug, spec_path, database_url, dry_run)

        def body() -> None:
            import uuid

            exp = ctx.experiment("spend")
            ref = ctx.listing(exp)
            if not hours and not assignments:
                raise click.ClickException("give --hours and/or --assignments")
            ctx.client().extend(ref, hours, assignments, uuid.uuid4().hex)
            if not dry_run:
                _store(exp, status="Assignable")
                click.echo(f"{ref} extended")

        _run(ctx, body)

    @group.command("notify")
    @_common
    @click.argument("participants", nargs=-1, required=True)
    @click.option("--subject", required=True)
    @click.option("--message", required=True)
    def notify(slug: str, spec_path: str | None, database_url: str | None, dry_run: bool,
               participants: tuple[str, ...], subject: str, message: str) -> None:
        """E-mail workers through MTurk."""
        ctx = make(slug, spec_path, database_url, dry_run)

        def body() -> None:
            exp = ctx.experiment("act")
            rows = _participants(exp, participants)
            ctx.client().notify([r.platform_id for r in rows], subject, message)

        _run(ctx, body)


def fetch_records(platform: str, client: Any, ref: str) -> Any:
    """The platform's submissions / assignments (``deploy.sync.platform_records``)."""
    from humanlike.server.live.sync import platform_records

    return platform_records(platform, client, ref)


@click.group("recruit")
def command() -> None:
    """Recruit on Prolific or MTurk: create, publish, status, sync, approve, reject, bonus, pause,
    stop (sync is idempotent: schedule it)."""


for _platform in PLATFORMS:
    command.add_command(_platform_group(_platform))

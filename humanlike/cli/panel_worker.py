"""``humanlike panel-worker``: compute the dashboard's live analysis panels in the background."""

from __future__ import annotations

import contextlib
import os
import time

import click

from humanlike.cli.app_context import database_option, make_app


def yield_cpu() -> None:
    """Participants' requests first: nice 10, and on Linux the SCHED_IDLE policy (inherited by the
    threads started later), so the panel only takes the CPU time nothing else wants."""
    os.nice(10)
    if hasattr(os, "sched_setscheduler"):
        with contextlib.suppress(OSError):  # refused by the platform: nice alone
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))


@click.command("panel-worker")
@database_option
@click.option("--interval", default=5.0, show_default=True, type=click.FloatRange(min=0.5),
              help="Seconds between passes over the experiments.")
@click.option("--once", is_flag=True, help="One pass, then exit (e.g. from cron).")
def command(database_url: str | None, interval: float, once: bool) -> None:
    """Recompute each experiment's per-participant QC and live panel when its data changed (any
    number of workers and server threads may run: a lease in the database lets one compute)."""
    from humanlike.server.extensions import db
    from humanlike.server.live.panel import refresh_all

    yield_cpu()
    app = make_app(database_url=database_url)
    if not once:  # the bulk-action jobs whose server's runner died are resumed here too
        from humanlike.server.participants.jobs import wake

        wake(app)
    while True:
        with app.app_context():
            started = time.perf_counter()
            done = refresh_all()
            db.session.remove()
        computed = [slug for slug, ok in done.items() if ok]
        if computed:
            click.echo(f"computed {', '.join(computed)} in {time.perf_counter() - started:.1f} s")
        if once:
            return
        time.sleep(interval)

"""Downloads: an experiment's export (CSV + Parquet + codebook, the same ``write_export`` as
``humanlike export``) zipped and streamed to the browser as it is written.

The export is written to a temporary folder by streaming reads (server-side cursor, bounded memory)
in this request's own worker thread, then the zip is produced chunk by chunk (``zipfile`` writes to
an unseekable stream with data descriptors), so no participant request waits on it."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

from flask import Response, current_app, request, stream_with_context

from humanlike.server import audit
from humanlike.server.admin.auth import actor
from humanlike.server.admin.blueprint import bp
from humanlike.server.admin.experiments import experiment_or_404
from humanlike.server.admin.permissions import requires
from humanlike.server.export.writer import write_export
from humanlike.server.export.zipped import zip_stream
from humanlike.server.extensions import db
from humanlike.server.lab.access import Permission
from humanlike.server.rights.pseudonyms import key_from_secret
from humanlike.server.tables.core import utcnow


def _export_permission() -> Permission:
    """A pseudonymised export shows no platform ids (``view``); the plain one does (``reveal``)."""
    return Permission.VIEW if request.form.get("pseudonymise") == "1" else Permission.REVEAL


@bp.post("/experiments/<slug>/export.zip")
@requires(_export_permission)
def download_export(slug: str):
    """The experiment's export as a zip (``pseudonymise=1`` replaces platform ids by pseudonyms). A
    POST with CSRF: it writes an audit row, so no other site can make the admin's browser fetch it."""
    exp = experiment_or_404(slug)
    key = (key_from_secret(current_app.config["SECRET_KEY"])
           if request.form.get("pseudonymise") == "1" else None)
    audit.record(actor(), "download_export", experiment=exp.slug, target=exp.slug,
                 detail={"pseudonymised": key is not None})
    db.session.commit()
    name = f"{exp.slug}-{utcnow():%Y%m%dT%H%M%SZ}"

    def generate() -> Iterator[bytes]:
        with tempfile.TemporaryDirectory(prefix="humanlike-export-") as tmp:
            write_export(slug, Path(tmp), pseudonym_key=key)
            db.session.rollback()  # end the read transaction before the long write-out
            yield from zip_stream(Path(tmp), name)

    return Response(stream_with_context(generate()), mimetype="application/zip",
                    headers={"Content-Disposition": f'attachment; filename="{name}.zip"'})

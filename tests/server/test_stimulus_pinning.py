"""Stimulus files are pinned to the spec version they were validated with: the version stores each
file's sha256 (its manifest rows), a file whose bytes no longer match is never served (overwritten
while the server runs, or before a restart that keeps the stored version), and a spec change that
would give a file new content under the same name is refused at start-up while participants of the
older version are still in progress (a new name versions it)."""

from __future__ import annotations

import logging

import sqlalchemy as sa
from PIL import Image

from humanlike.server.extensions import db
from humanlike.server.study import experiments
from humanlike.server.tables.core import Participant, SpecVersion
from tests.server.test_spec_versions import (  # noqa: F401  (fixtures)
    first_worker_with_a_participant_in_b,
    make,
    rows,
    spec_path,
)


def overwrite(path) -> None:
    """New pixels under the same file name (a different image)."""
    Image.new("L", (28, 28), color=200).save(path)


def first_key(app) -> str:
    return rows(app, SpecVersion)[0].stimuli[0]["key"]


def test_a_file_overwritten_while_the_server_runs_is_not_served(make, spec_path):  # noqa: F811
    app1, client, _, _ = first_worker_with_a_participant_in_b(make, spec_path)
    key = first_key(app1)
    file = spec_path.parent / "stimuli" / key
    original = file.read_bytes()
    assert client.get(f"/stimuli/small/{key}").data == original
    overwrite(file)
    seen: list[logging.LogRecord] = []
    handler = logging.Handler(logging.ERROR)  # the migrations' logging config replaced caplog's
    handler.emit = seen.append  # type: ignore[method-assign]
    logging.getLogger("humanlike.server.study.experiments").addHandler(handler)
    try:
        for _ in range(3):
            assert client.get(f"/stimuli/small/{key}").status_code == 404
    finally:
        logging.getLogger("humanlike.server.study.experiments").removeHandler(handler)
    warned = [r for r in seen if key in r.getMessage()]
    assert len(warned) == 1 and "changed on disk" in warned[0].getMessage()
    file.write_bytes(original)  # restored: served again
    assert client.get(f"/stimuli/small/{key}").data == original


def test_a_restart_that_keeps_the_stored_version_does_not_serve_the_changed_file(
        make, spec_path):  # noqa: F811
    app1, _, _, _ = first_worker_with_a_participant_in_b(make, spec_path)
    key = first_key(app1)
    overwrite(spec_path.parent / "stimuli" / key)
    app2 = make(spec_path)  # the changed file changes the version: refused, the stored one stays
    problems = experiments.sync_all(app2)
    assert len(problems) == 1 and "--allow-spec-change" in problems[0]
    assert app2.test_client().get(f"/stimuli/small/{key}").status_code == 404
    other = rows(app2, SpecVersion)[0].stimuli[1]["key"]
    assert app2.test_client().get(f"/stimuli/small/{other}").status_code == 200


def test_new_content_under_an_old_name_is_refused_while_that_versions_participants_are_active(
        make, spec_path):  # noqa: F811
    app1, _, _, _ = first_worker_with_a_participant_in_b(make, spec_path)
    key = first_key(app1)
    overwrite(spec_path.parent / "stimuli" / key)
    app2 = make(spec_path, ALLOW_SPEC_CHANGE=True)
    problems = experiments.sync_all(app2)
    assert len(problems) == 1, problems
    assert key in problems[0] and "new name" in problems[0] and str(spec_path) in problems[0]
    assert len(rows(app2, SpecVersion)) == 1  # nothing stored
    # once that version's participants are done, the change is allowed
    with app2.app_context():
        db.session.execute(sa.update(Participant).values(status="completed"))
        db.session.commit()
    app3 = make(spec_path, ALLOW_SPEC_CHANGE=True)
    assert experiments.sync_all(app3) == []
    versions = rows(app3, SpecVersion)
    assert len(versions) == 2
    new_hash = next(s["sha256"] for s in versions[1].stimuli if s["key"] == key)
    old_hash = next(s["sha256"] for s in versions[0].stimuli if s["key"] == key)
    assert new_hash != old_hash
    assert app3.test_client().get(f"/stimuli/small/{key}").status_code == 200


def test_new_content_under_a_new_name_is_a_new_version_and_both_are_served(
        make, spec_path):  # noqa: F811
    app1, _, _, _ = first_worker_with_a_participant_in_b(make, spec_path)
    key = first_key(app1)
    folder = spec_path.parent / "stimuli"
    renamed = key.replace(".png", "_v2.png")
    overwrite(folder / renamed)
    manifest = folder / "manifest.csv"
    manifest.write_text(manifest.read_text().replace(key + ",", renamed + ",", 1))
    app2 = make(spec_path, ALLOW_SPEC_CHANGE=True)
    assert experiments.sync_all(app2) == []
    client = app2.test_client()
    assert client.get(f"/stimuli/small/{key}").status_code == 200  # the older version's
    assert client.get(f"/stimuli/small/{renamed}").status_code == 200

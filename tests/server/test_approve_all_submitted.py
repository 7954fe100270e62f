"""``recruit prolific approve --all-submitted`` approves the submitted participants who pass QC
(the stored QC brought up to date first); the ones excluded from the analysis are named and left
submitted unless ``--include-qc-failures`` is given."""

from __future__ import annotations

import sqlalchemy as sa

from humanlike.server.extensions import db
from humanlike.server.live.qc import refresh_qc
from humanlike.server.tables.core import Experiment, Participant, ParticipantQC
from tests.server import test_recruit_prolific as prolific
from tests.server.test_recruit_prolific import recruit, take_part

fake, rapp, recruit_spec = prolific.fake, prolific.rapp, prolific.recruit_spec  # its fixtures


def statuses(app) -> dict[str, str]:
    with app.app_context():
        return dict(db.session.execute(sa.select(Participant.platform_id, Participant.status)
                                       ).all())


def test_all_submitted_leaves_qc_failures_unless_asked(rapp, fake, database_url, recruit_spec):
    assert recruit(database_url, recruit_spec, "create").exit_code == 0
    assert recruit(database_url, recruit_spec, "publish").exit_code == 0
    [study] = fake.studies.values()
    for who in ("PASS0001", "FAIL0001"):
        take_part(rapp, fake, study["id"], who)
    assert recruit(database_url, recruit_spec, "sync").exit_code == 0
    with rapp.app_context():
        exp = db.session.execute(sa.select(Experiment)).scalar_one()
        refresh_qc(exp)
        failing = db.session.execute(sa.select(Participant).where(
            Participant.platform_id == "FAIL0001")).scalar_one()
        db.session.execute(sa.update(ParticipantQC).where(
            ParticipantQC.participant_id == failing.id).values(
            qc_failed=True, qc_reasons="catch accuracy below 0.8"))
        db.session.commit()
        failing_id = failing.public_id
    assert statuses(rapp) == {"PASS0001": "submitted", "FAIL0001": "submitted"}

    out = recruit(database_url, recruit_spec, "approve", "--all-submitted")
    assert out.exit_code == 0, out.output
    assert statuses(rapp) == {"PASS0001": "approved", "FAIL0001": "submitted"}
    assert "not approving 1 submitted participant(s) excluded" in out.output
    assert failing_id in out.output and "--include-qc-failures" in out.output

    out = recruit(database_url, recruit_spec, "approve", "--all-submitted",
                  "--include-qc-failures")
    assert out.exit_code == 0, out.output
    assert statuses(rapp) == {"PASS0001": "approved", "FAIL0001": "approved"}
    approved = [s for s in fake.submissions.values() if s["status"] == "APPROVED"]
    assert len(approved) == 2  # each approved once on Prolific

"""The experiment page as a researcher with many participants uses it: one kind of id (the public
id; platform ids only after the audited reveal), bonus and cost columns, simulated participants
marked, confirm pages that open clean and ask for a rejection category, a rejection that also
excludes from the analysis unless unticked (audited), and a paged, filterable audit log."""

from __future__ import annotations

import re

import sqlalchemy as sa

from humanlike.server import audit
from humanlike.server.extensions import db
from humanlike.server.participants import actions
from humanlike.server.tables.core import AuditEntry, Participant
from tests.server.admin.dashboard_helpers import csrf_from, login

GOOD_MESSAGE = ("Your submission could not be approved because the attention checks embedded in "
                "the task were answered incorrectly on most occasions.")


def completed(app, client, who: str, simulated: bool = False) -> str:
    from humanlike.server.participants.rehearsal import REHEARSAL_HEADER, rehearsal_key

    # a simulated participant arrives as `humanlike simulate` does: with the study's rehearsal key
    headers = {REHEARSAL_HEADER: rehearsal_key(app.config["SECRET_KEY"], "small")} if simulated \
        else {}
    resp = client.get(f"/start/small?PROLIFIC_PID={who}&STUDY_ID=s&SESSION_ID=x-{who}",
                      headers=headers)
    assert resp.status_code == 302, resp.get_data(as_text=True)
    pid = resp.headers["Location"].split("#")[0].rstrip("/").split("/")[-1]
    with app.app_context():
        row = db.session.execute(sa.select(Participant).where(Participant.public_id == pid)
                                 ).scalar_one()
        row.status = "completed"
        db.session.commit()
    return pid


def row_html(html: str, pid: str) -> str:
    match = re.search(rf'<tr data-participant="{pid}".*?</tr>', html, re.S)
    assert match, f"no row for {pid}"
    return match.group(0)


def test_the_table_shows_public_ids_bonus_and_marks_simulated_participants(app, client):
    real = completed(app, client, "REAL0001")
    sim = completed(app, client, "SIM0001", simulated=True)
    with app.app_context():
        load = db.session.execute(sa.select(Participant).where(Participant.public_id == real))
        assert actions.pay_bonus(load.scalar_one(), "admin:alice", "0.50", "accuracy").ok
    login(app, client)
    html = client.get("/admin/experiments/small").get_data(as_text=True)
    first, second = row_html(html, real), row_html(html, sim)
    assert f"<code>{real}</code>" in first and "REAL0001" not in html and "pn-" not in first
    assert re.search(r'data-col="bonus">0\.50<', first) and re.search(r'data-col="cost">0\.50<',
                                                                        first)
    assert "badge sim" in second and "badge sim" not in first
    assert "simulated" in second.split(">")[0]
    # the analysis sits below the table, folded
    assert html.index('id="participant-rows"') < html.index('id="analysis"')
    assert '<details id="analysis"' in html and '<details id="analysis" open' not in html
    # the platform id is shown only after the audited reveal
    token = csrf_from(html)
    client.post("/admin/experiments/small/reveal", data={"csrf_token": token})
    assert "REAL0001" in row_html(client.get("/admin/experiments/small").get_data(as_text=True),
                                  real)


def test_confirm_pages_open_clean_and_reject_asks_for_a_category(app, client):
    pids = [completed(app, client, f"REJ000{i}") for i in range(3)]
    login(app, client)
    token = csrf_from(client.get("/admin/experiments/small").get_data(as_text=True))
    for action in ("reject", "bonus", "exclude"):
        page = client.post("/admin/experiments/small/actions/confirm",
                           data={"csrf_token": token, "action": action, "participant": pids[0]})
        html = page.get_data(as_text=True)
        assert page.status_code == 200 and 'class="error"' not in html, action
    html = client.post("/admin/experiments/small/actions/confirm", data={
        "csrf_token": token, "action": "reject", "participant": pids[0]}).get_data(as_text=True)
    assert re.search(r'<select name="category" required>\s*<option value="" selected disabled>',
                     html)
    assert "not paid the reward" in html and 'name="exclude_too" value="1" checked' in html
    no_category = client.post("/admin/experiments/small/actions/apply", data={
        "csrf_token": token, "action": "reject", "confirmed": "yes", "participant": pids[0],
        "message": GOOD_MESSAGE})
    assert no_category.status_code == 400 and "category" in no_category.get_data(as_text=True)
    base = {"csrf_token": token, "action": "reject", "confirmed": "yes", "message": GOOD_MESSAGE,
            "category": "FAILED_CHECK"}
    assert client.post("/admin/experiments/small/actions/apply", data={
        **base, "participant": pids[0], "exclude_too": ["0", "1"]}).status_code == 200
    assert client.post("/admin/experiments/small/actions/apply", data={
        **base, "participant": pids[1], "exclude_too": "0"}).status_code == 200
    with app.app_context():
        rows = {p.public_id: (p.status, p.analysis_override) for p in db.session.execute(
            sa.select(Participant).where(Participant.public_id.in_(pids))).scalars()}
        assert rows == {pids[0]: ("rejected", "exclude"), pids[1]: ("rejected", None),
                        pids[2]: ("completed", None)}
        [excluded] = db.session.execute(sa.select(AuditEntry).where(
            AuditEntry.action == "exclude")).scalars()
        assert excluded.target == pids[0] and excluded.actor == "admin:alice"
        assert excluded.detail["reason"].startswith("rejected (FAILED_CHECK)")


def test_the_audit_log_is_paged_and_filtered(app, client):
    with app.app_context():
        for i in range(230):
            audit.record("admin:bob" if i % 2 else "cli:carol", "approve" if i % 3 else "bonus",
                         experiment="small", target=f"p{i:04d}")
        db.session.commit()
    login(app, client)
    first = client.get("/admin/audit").get_data(as_text=True)
    assert first.count("<tr data-action=") == 100 and "p0229" in first and "p0129" not in first
    last = client.get("/admin/audit?page=3").get_data(as_text=True)
    assert last.count("<tr data-action=") == 30 and "p0000" in last
    bonuses = client.get("/admin/audit?action=bonus&actor=cli:").get_data(as_text=True)
    expected = sum(1 for i in range(230) if i % 3 == 0 and i % 2 == 0)
    assert bonuses.count('<tr data-action="bonus">') == expected
    assert "admin:bob" not in bonuses.split("<tbody>")[1]
    one = client.get("/admin/audit?target=p0007").get_data(as_text=True)
    assert one.count("<tr data-action=") == 1


def test_amounts_carry_the_declared_currency_or_say_they_are_in_the_accounts(
        database_url, tmp_path):
    """Issue 36.7: a bonus of 0.50 shows as "£0.50" under [recruitment.prolific] currency = "GBP"
    (table, participant page, confirm form), and as "0.50" with "account currency" when undeclared."""
    from humanlike.server import create_app, database
    from humanlike.server.study import experiments
    from tests.server.conftest import write_small_experiment

    spec = write_small_experiment(tmp_path / "gbp")
    spec.write_text(spec.read_text() + (
        '\n[recruitment.prolific]\nname = "Digits"\ndescription = "Rate digits."\nreward = 150\n'
        'places = 10\nestimated_minutes = 5\ncurrency = "GBP"\n'))
    for declared in (True, False):
        if not declared:
            spec.write_text(spec.read_text().replace('currency = "GBP"\n', ""))
        app = create_app({"TESTING": True, "SECRET_KEY": "test-secret",
                          "SQLALCHEMY_DATABASE_URI": database_url,
                          "EXPERIMENT_PATHS": [str(spec)]})
        database.upgrade(app)
        experiments.sync_all(app)
        client = app.test_client()
        pid = completed(app, client, f"CUR{int(declared)}")
        with app.app_context():
            row = db.session.execute(sa.select(Participant).where(Participant.public_id == pid))
            assert actions.pay_bonus(row.scalar_one(), "admin:alice", "0.50", "accuracy").ok
        login(app, client, name=f"alice{int(declared)}")
        html = client.get("/admin/experiments/small").get_data(as_text=True)
        person = client.get(f"/admin/participants/{pid}").get_data(as_text=True)
        shown = "£0.50" if declared else "0.50"
        assert re.search(rf'data-col="bonus">{shown}<', row_html(html, pid))
        assert f"{shown} for “accuracy”" in person
        unit = "GBP" if declared else "account currency"
        assert f"bonuses paid (or recorded), {unit}" in html and f"({unit})" in person
        database.dispose(app)

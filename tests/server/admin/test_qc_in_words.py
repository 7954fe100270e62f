"""The participant page states each QC metric against its rule of the spec's [exclusion] block in
words ("natural-image accuracy 0.00, below the 0.50 the spec requires: excluded"), and each
sentence's verdict agrees with the QC's own exclusion reasons. SQLite only: the QC is the same
code on both backends (tests/server/admin/test_panel_ratings.py compares them)."""

from __future__ import annotations

import html
import re
import tomllib
from pathlib import Path

import pytest

from humanlike.analysis.exclusions import ExclusionRules
from humanlike.server import create_app, database
from humanlike.server.demo.build import demo_text
from humanlike.server.extensions import db
from humanlike.server.live.panel import refresh_all
from humanlike.server.live.qc import qc_in_words
from humanlike.server.study import experiments
from humanlike.server.tables.core import Participant, ParticipantQC
from tests.server.admin.dashboard_helpers import login, run_participant
from tests.server.conftest import write_small_experiment

DEMO_RULES = tomllib.loads(
    "[exclusion]" + demo_text("experiment.toml").split("[exclusion]", 1)[1])["exclusion"]
"""The demo spec's recommended rules, read from its template."""


def test_each_rule_is_stated_with_its_threshold_and_the_qcs_verdict():
    rules = {"min_natural_accuracy": 0.5, "max_identical_run_share": 0.25,
             "min_median_rt_ms": 500, "min_repeat_reliability": 0.2, "min_catch_accuracy": 0.66}
    metrics = {"natural_accuracy": 0.42, "identical_run_share": 0.3, "median_rt_ms": 500.0,
               "repeat_reliability": 0.19999, "too_fast_share": 0.03}  # no catch trials yet
    rows = {row["rule"]: row for row in qc_in_words(rules, metrics)}
    assert list(rows) == list(ExclusionRules.from_mapping(rules).active())
    assert rows["min_natural_accuracy"]["text"] == (
        "natural-image accuracy 0.42, below the 0.50 the spec requires: excluded")
    assert rows["max_identical_run_share"]["text"] == (
        "longest identical-response run (share of trials) 0.30, above the 0.25 the spec allows: "
        "excluded")
    # a value at the threshold passes: the QC excludes below a minimum, not at it
    assert rows["min_median_rt_ms"]["text"] == (
        "median RT 500 ms, at or above the 500 ms the spec requires: passes")
    # rounding never prints a failing value as its threshold
    assert rows["min_repeat_reliability"]["text"] == (
        "repeat reliability r 0.19999, below the 0.20000 the spec requires: excluded")
    assert rows["min_catch_accuracy"]["verdict"] == "not measured"
    assert "does not apply" in rows["min_catch_accuracy"]["text"]
    assert rows["min_trial_rt_ms"]["text"] == (
        "trials faster than 100 ms count as missing: 3% of this participant's trials")


def _demo_rules_study(tmp_path: Path):
    spec = write_small_experiment(tmp_path)
    text = spec.read_text()
    rules = "".join(f"{k} = {str(v).lower() if isinstance(v, bool) else v}\n"
                    for k, v in DEMO_RULES.items())  # TOML's true, as analyse_simulated is
    spec.write_text(text.replace("[exclusion]\nmin_catch_accuracy = 0.5\n", f"[exclusion]\n{rules}"))
    app = create_app({"TESTING": True, "SECRET_KEY": "test-secret",
                      "SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path / 'qc.sqlite'}",
                      "EXPERIMENT_PATHS": [str(spec)]})
    database.upgrade(app)
    experiments.sync_all(app)
    return app


@pytest.mark.parametrize("careful", [False, True])
def test_the_participant_page_states_every_demo_rule_in_words(tmp_path, careful):
    app = _demo_rules_study(tmp_path)
    try:
        pid = run_participant(app.test_client(), f"PROLIFIC_PID=w{int(careful)}&STUDY_ID=s&SESSION_ID=x",
                              careful=careful)
        with app.app_context():
            refresh_all()
            p = db.session.query(Participant).filter_by(public_id=pid).one()
            qc = db.session.get(ParticipantQC, p.id)
            stored_reasons = qc.qc_reasons
        client = app.test_client()
        login(app, client)
        page = client.get(f"/admin/participants/{pid}").get_data(as_text=True)
    finally:
        database.dispose(app)
    items = re.findall(r'<li class="[^"]*" data-rule="([a-z_]+)" data-verdict="([a-z ]+)">(.*?)</li>',
                       page)
    assert [rule for rule, _, _ in items] == list(ExclusionRules.from_mapping(DEMO_RULES).active())
    verdicts = {rule: verdict for rule, verdict, _ in items}
    texts = {rule: html.unescape(text) for rule, _, text in items}
    # each verdict is the QC's own: a rule says "excluded" exactly when its metric is in the reasons
    from humanlike.analysis.ratings.data import RULE_CHECKS

    for rule, verdict in verdicts.items():
        if rule == "min_trial_rt_ms":
            assert verdict == "trial cleaning"
            continue
        column = RULE_CHECKS[rule][0]
        in_reasons = any(r.startswith(f"{column} ") and (r.split()[2] == RULE_CHECKS[rule][1])
                         for r in stored_reasons.split(";") if r)
        assert (verdict == "excluded") == in_reasons, (rule, verdict, stored_reasons)
    # the numbers the participant produced: the careless one rates the next digit on every image
    # (accuracy 0), the careful one the digit shown (accuracy 1); every trial takes 1234.5 ms
    if careful:
        assert texts["min_natural_accuracy"] == (
            "natural-image accuracy 1.00, at or above the 0.50 the spec requires: passes")
        assert "Passes every QC rule" in page
    else:
        assert texts["min_natural_accuracy"] == (
            "natural-image accuracy 0.00, below the 0.50 the spec requires: excluded")
        assert texts["min_catch_accuracy"] == (
            "catch-trial accuracy 0.00, below the 0.66 the spec requires: excluded")
    # both rate each repeated image exactly as the first time (r = 1 over stimuli x categories)
    assert texts["min_repeat_reliability"] == (
        "repeat reliability r 1.00, at or above the 0.20 the spec requires: passes")
    assert re.fullmatch(r"median RT 123[45] ms, at or above the 500 ms the spec requires: passes",
                        texts["min_median_rt_ms"]), texts["min_median_rt_ms"]
    assert texts["min_trial_rt_ms"] == "trials faster than 100 ms count as missing: 0% of this participant's trials"

"""`humanlike simulate` -> `humanlike export` -> `humanlike report` on the demo: every section is
there, the MLDS scales recovered from simulated triads cover the observer's psi, the participants
made to fail catch trials are excluded for it, and the page renders in Chromium offline."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from humanlike.analysis.report import SECTION_KEYS
from humanlike.cli import main
from tests.e2e.conftest import simulated_demo_export

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"


@pytest.fixture(scope="module")
def simulated_report(demo_spec, tmp_path_factory):
    """12 simulated participants (2 fail the catch trials) through the CLI, exported, reported."""
    root = tmp_path_factory.mktemp("report")
    simulated_demo_export(demo_spec, root)
    runner = CliRunner()
    out = root / "report.html"
    # the spec as run, with the stopping rule `humanlike demo` declares (a monitored study)
    spec = root / "experiment.toml"
    spec.write_text(demo_spec.read_text() + '\n[stopping]\nmeasure = "comparisons_decided"\n')
    result = runner.invoke(main, [
        "report", str(root / "export"), "--models",
        str(demo_spec.parent / "stimuli" / "model_responses.csv"), "--spec", str(spec),
        "--truth", str(root / "truth"), "--out", str(out), "--n-resamples", "400",
        "--n-sim", "200", "--pdf", "--figures", str(root / "figures"), "--figure-format", "pdf"])
    assert result.exit_code == 0, result.output
    return root, out


def test_the_report_holds_every_section(simulated_report):
    _, out = simulated_report
    html = out.read_text()
    for key in SECTION_KEYS:
        assert f'<section id="{key}">' in html, key
    assert "Not available" not in html
    assert html.count("<svg") >= 8  # sample, timing, reliability, 3 score panels, kappa, MLDS
    assert "<script" not in html
    assert not re.search(r'(src|href)="(https?:)?//', html)  # nothing to fetch: opens offline


def test_the_report_prints_to_pdf_and_writes_its_figures_as_vector_files(simulated_report):
    root, out = simulated_report
    assert out.with_suffix(".pdf").read_bytes()[:5] == b"%PDF-"
    files = sorted((root / "figures").glob("*.pdf"))
    assert len(files) == out.read_text().count("<figure>")
    assert all(f.read_bytes()[:5] == b"%PDF-" for f in files)
    assert (root / "figures" / "mlds_1.pdf") in files


def test_participants_made_to_fail_catch_trials_are_excluded_for_it(simulated_report):
    root, out = simulated_report
    truth = pd.read_csv(root / "truth" / "truth_participants.csv")
    people = pd.read_csv(root / "export" / "participants.csv", dtype={"participant": str})
    people = people.set_index("participant")
    failing = truth.loc[truth["fails_catch"], "participant"].astype(str)
    assert len(failing) == 2
    assert people.loc[failing, "excluded"].all()
    assert people.loc[failing, "exclusion_reasons"].str.contains("catch_accuracy").all()
    assert not people.drop(index=failing)["excluded"].any()
    html = out.read_text()
    for pid in failing:
        assert pid in html.split('id="sample"')[1].split("</section>")[0]


def test_recovered_mlds_scales_cover_the_observers_psi(simulated_report):
    """3 sequences x 5 interior levels; with 95% CIs, 12 or more inside has probability 0.995
    if the intervals are right, and fails if they are much too narrow or the scales are off."""
    root, out = simulated_report
    html = out.read_text()
    text = html.split('id="mlds"')[1]
    inside, levels = (int(v) for v in
                      text.split("simulation: ")[1].split(" interior levels")[0].split(" of "))
    assert levels == 15
    assert inside >= 12, (inside, levels)
    truth = json.loads((root / "truth" / "truth.json").read_text())
    assert set(truth["psi"]) and truth["mlds_sigma"] == 0.15


def test_the_mlds_bootstrap_covers_the_generating_scale_in_about_95_percent_of_levels():
    """The simulator's observer (psi = ((k-1)/(N-1))**gamma, sigma 0.15) on 20 sequences of 7
    levels, 6 repetitions of all 35 triads each: 100 interior levels. If the CIs hold 95%, fewer
    than 85 inside has probability < 1e-5 (binomial); 50% intervals would fail."""
    from humanlike.analysis.mlds.batch import fit_many
    from humanlike.analysis.mlds.simulate import simulate_responses
    from humanlike.analysis.report import coverage
    from humanlike.server.demo.simulate import observer_psi
    from humanlike.stimuli.mlds_design import all_triads

    rng = np.random.default_rng(7)
    gammas = rng.uniform(0.5, 2.0, 20)
    psi = np.stack([observer_psi(7, g) for g in gammas])
    levels = np.tile(all_triads(7), (6 * 20, 1))
    sequence = np.repeat(np.arange(20), 6 * 35)
    response = simulate_responses(levels, psi, 0.15, group=sequence, random_state=rng)
    frame = pd.DataFrame({"sequence": sequence.astype(str), "s1": levels[:, 0],
                          "s2": levels[:, 1], "s3": levels[:, 2], "response": response})
    fits = fit_many(frame, by="sequence", n_resamples=400, random_state=0)
    cover = coverage(fits, {str(i): psi[i] for i in range(20)})
    assert cover["levels"] == 100
    assert cover["inside"] >= 85, cover


@pytest.mark.browser
def test_the_report_opens_offline_without_console_errors(simulated_report, chromium):
    _, out = simulated_report
    context = chromium.new_context(viewport={"width": 1200, "height": 900}, offline=True)
    page = context.new_page()
    problems: list[str] = []
    requests: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on("request", lambda r: requests.append(r.url) if not r.url.startswith("file:") else None)
    page.goto(out.as_uri())
    page.wait_for_load_state("load")
    assert problems == []
    assert requests == []
    # every figure is drawn inside the page's width (nothing cut at the right edge)
    widths = page.eval_on_selector_all(
        "figure svg", "els => els.map(e => [e.getBoundingClientRect().right, "
        "document.documentElement.clientWidth])")
    assert widths and all(right <= width + 1 for right, width in widths)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "report.png"), full_page=True)
    page.locator("#alignment").screenshot(path=str(ARTIFACTS / "report_alignment.png"))
    shutil.copy(out, ARTIFACTS / "report.html")
    context.close()


def test_simulate_speaks_http_to_a_running_server(demo_server, demo_spec, tmp_path):
    """The same simulator over a real socket: two participants complete, their trials stored,
    recorded as simulated with the server's rehearsal key (this machine's own key is another)."""
    import sqlalchemy as sa

    from humanlike.server.extensions import db
    from humanlike.server.participants.rehearsal import rehearsal_key
    from humanlike.server.tables.core import Participant, Trial

    result = CliRunner().invoke(main, ["simulate", str(demo_spec), "--participants", "2",
                                       "--fail-catch", "0", "--url", demo_server.url,
                                       "--truth", str(tmp_path / "truth"), "--rehearsal-key",
                                       rehearsal_key(demo_server.app.config["SECRET_KEY"], "demo")])
    assert result.exit_code == 0, result.output
    truth = pd.read_csv(tmp_path / "truth" / "truth_participants.csv")
    with demo_server.app.app_context():
        people = db.session.execute(sa.select(Participant)).scalars().all()
        assert sorted(p.status for p in people) == ["completed", "completed"]
        assert [p.simulated for p in people] == [True, True]
        assert {p.refresh_hz for p in people} <= {60.0, 75.0, 120.0, 144.0}
        stored = db.session.execute(sa.select(sa.func.count(Trial.id))).scalar_one()
    assert stored == truth["n_trials"].sum()  # every timeline entry, the debrief page too


def test_simulate_names_a_bad_observer_and_changes_nothing(demo_spec, tmp_path):
    db = f"sqlite:///{tmp_path}/d.sqlite"
    result = CliRunner().invoke(main, ["simulate", str(demo_spec), "--observer", "nosuch",
                                       "--database-url", db])
    assert result.exit_code != 0
    assert "no responses of model 'nosuch'" in result.output
    assert "cnn" in result.output
    assert not (tmp_path / "d.sqlite").exists()


def _section_text(html: str, key: str) -> str:
    """The visible text of one report section (figures and tags dropped, entities unescaped)."""
    import html as html_lib

    part = html.split(f'<section id="{key}">')[1].split("</section>")[0]
    part = re.sub(r"<svg.*?</svg>", " ", part, flags=re.S)
    return re.sub(r"\s+", " ", html_lib.unescape(re.sub(r"<[^>]+>", " ", part)))


def _tables(html: str, key: str) -> list[pd.DataFrame]:
    """The tables of one report section as frames of text cells (no HTML parser is installed)."""
    import html as html_lib

    part = html.split(f'<section id="{key}">')[1].split("</section>")[0]
    frames = []
    for table in re.findall(r"<table.*?</table>", part, flags=re.S):
        head = [html_lib.unescape(h) for h in re.findall(r"<th>(.*?)</th>", table, flags=re.S)]
        rows = [[html_lib.unescape(c) for c in re.findall(r"<td>(.*?)</td>", row, flags=re.S)]
                for row in re.findall(r"<tr>(.*?)</tr>", table, flags=re.S)]
        frames.append(pd.DataFrame([r for r in rows if r], columns=head))
    return frames


def test_the_report_and_the_analyze_commands_count_one_analysed_set(simulated_report, demo_spec):
    """Issue 36 item 6: 10 of the 12 simulated participants are analysed (2 fail the catch
    trials); the report and `humanlike analyze mlds|ec|ratings` on the same export state the same
    counts: 30 participant scales (10 analysed x 3 sequences), 14 kappa observers (10 participants
    and the 4 models given with --models) and their uninformative pairs, 10 rating participants."""
    root, out = simulated_report
    html = out.read_text()
    export = root / "export"
    responses = demo_spec.parent / "stimuli" / "model_responses.csv"
    runner = CliRunner()

    mlds = runner.invoke(main, ["analyze", "mlds", str(export / "triads.csv"), "--out",
                                str(root / "cli-mlds"), "--n-resamples", "0"])
    assert mlds.exit_code == 0, mlds.output
    total, informative = (int(v) for v in re.search(
        r"(\d+) participant scale\(s\); \d+ converged.*?; (\d+) informative", mlds.output,
        re.S).groups())
    assert total == 30
    text = _section_text(html, "mlds")
    shown = re.search(r"(\d+) of (\d+) participant scales", text)
    assert shown is not None and (int(shown[1]), int(shown[2])) == (informative, total), text
    sentence = re.search(r"\d+ of \d+ participant scales .*? every level\.", mlds.output)[0]
    assert "of 10 analysed participants" in sentence and sentence in text

    ec = runner.invoke(main, ["analyze", "ec", str(export), "--models", str(responses), "--out",
                              str(root / "cli-ec"), "--n-resamples", "20", "--n-sim", "20",
                              "--no-figures"])
    assert ec.exit_code == 0, ec.output
    observers = int(re.search(r"read export data: (\d+) observers", ec.output)[1])
    flat, pairs = (int(v) for v in re.search(r"(\d+) of (\d+) pairs", ec.output).groups())
    assert observers == 14 and flat > 0
    text = _section_text(html, "kappa")
    assert f"{observers} observers (10 participants, 4 models)" in text, text
    assert f"{flat} of {pairs} pairs uninformative" in text, text
    sentence = re.search(r"\d+ observers \(.*? no errors to compare\)\.", ec.output)[0]
    assert sentence in text

    ratings = runner.invoke(main, ["analyze", "ratings", str(export), "--models", str(responses),
                                   "--out", str(root / "cli-ratings"), "--n-resamples", "400"])
    assert ratings.exit_code == 0, ratings.output
    counted = re.search(r"ratings: (\d+ of the \d+ participants with rating trials analysed)",
                        ratings.output)[1]
    assert counted.startswith("10 of the 12 ")
    assert counted in _section_text(html, "reliability")
    assert counted in _section_text(html, "scores")
    # the report's numeric table of model scores holds the command's scores and CIs
    cli = pd.read_csv(root / "cli-ratings" / "scores.csv").query("metric == 'pearson_r'")
    table = next(t for t in _tables(html, "scores") if "model" in t.columns)
    got = table.astype({"estimate": float, "ci_low": float, "ci_high": float})
    merged = cli.merge(got, on=["subset", "model"], suffixes=("_cli", "_report"),
                       validate="1:1")
    assert len(merged) == len(cli) == 12  # 4 models x 3 subsets
    for column in ("estimate", "ci_low", "ci_high"):
        # the page shows three decimals: equal up to that rounding
        assert np.allclose(merged[f"{column}_cli"], merged[f"{column}_report"], rtol=0,
                           atol=5.01e-4), column


def test_a_monitored_study_reports_its_pairs_decided_under_the_declared_scheme(simulated_report):
    """The demo's [stopping] is comparisons_decided with the default continuous monitoring: the
    scores section says how many of the 6 model pairs are decided, under which guarantee, and each
    decided pair's better model is the side its difference favours."""
    _, out = simulated_report
    html = out.read_text()
    said = re.search(r"Decisions under the declared monitoring \(continuous, \[stopping\] in the "
                     r"spec\): (\d+) of (\d+) model pairs decided on (\d+) participants", html)
    assert said is not None
    assert "Guarantee: family-wise error &lt;= 0.05 at any number of looks" in html
    assert said.group(2) == "6"
    tables = [[[re.sub(r"<[^>]+>", "", cell).strip()
                for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)]
               for row in re.findall(r"<tr[^>]*>(.*?)</tr>", table, re.S)]
              for table in re.findall(r"<table[^>]*>(.*?)</table>", html, re.S)]
    [rows] = [t for t in tables if t and {"decided", "better", "decided_at"} <= set(t[0])]
    verdicts = pd.DataFrame(rows[1:], columns=rows[0])
    verdicts["decided"] = verdicts["decided"] == "True"
    verdicts["difference"] = verdicts["difference"].astype(float)
    assert len(verdicts) == 6 and int(verdicts["decided"].sum()) == int(said.group(1))
    for _, row in verdicts[verdicts["decided"]].iterrows():
        assert row["better"] == (row["a"] if row["difference"] > 0 else row["b"])
        assert 1 <= float(row["decided_at"]) <= int(said.group(3))


def test_the_alignment_section_shows_every_metric_per_model_and_which_differences_are_decided(
        simulated_report, demo_spec):
    """Issue 42 item 5: per experiment (the classification block, and the rating decisions), a
    table of every metric per model with CIs; each model's accuracy on the classified digits is
    the share of images its most probable category names, per noise level, averaged (computed
    here from the responses file and the export); the pairs of models are each decided or not,
    Holm-corrected, and the metrics' rank agreement is given across the four models."""
    root, out = simulated_report
    html = out.read_text()
    text = _section_text(html, "alignment")
    assert "Holm-corrected over the 6 model pairs" in text
    assert re.search(r"demo: \d+ of 24 decided", text)  # 6 pairs x 4 metrics
    tables = _tables(html, "alignment")
    demo = next(t for t in tables if "metric" in t.columns and "humans" in t.columns)
    assert list(demo["metric"]) == ["accuracy", "accuracy_difference", "observed_consistency",
                                    "error_consistency", "accuracy_distance",
                                    "accuracy_distance_ceiled"]
    models = ["adv_cnn", "cnn", "kde", "logreg"]
    responses = pd.read_csv(demo_spec.parent / "stimuli" / "model_responses.csv",
                            dtype={"stimulus": str, "category": str})
    top = responses.loc[responses.groupby(["model", "stimulus"])["probability"].idxmax()]
    shown = pd.read_csv(root / "export" / "classifications.csv", dtype={"category": str})
    shown = shown[~shown["practice"] & ~shown["is_repeat"]
                  & (shown["stimulus_kind"] != "catch")].drop_duplicates("stimulus")
    merged = top.merge(shown[["stimulus", "category", "stimulus_condition"]], on="stimulus",
                       suffixes=("_model", ""))
    merged["right"] = merged["category_model"] == merged["category"]
    accuracy = merged.groupby(["model", "stimulus_condition"])["right"].mean().groupby(
        "model").mean()
    row = demo.set_index("metric").loc["accuracy"]
    for model in models:
        estimate, low, high = (float(v) for v in re.findall(r"-?[\d.]+", row[model]))
        assert estimate == pytest.approx(accuracy[model], abs=0.005)
        assert low <= estimate <= high
    decided = next(t for t in tables if "pair" in t.columns)
    assert len(decided) == 12  # 6 pairs in each of the two experiments
    cells = set(decided.drop(columns=["experiment", "pair"]).to_numpy().ravel())
    assert cells <= {"undecided", "n/a", *models}
    agreement = next(t for t in tables if "kendall" in t.columns)
    assert set(agreement["n_models"]) == {"4"}

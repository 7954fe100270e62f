"""`humanlike publish` on the simulated demo study, then `humanlike score` on the published folder
alone: the dataset passes the Psych-DS check and holds no platform id, user agent, completion code,
free-text answer or arrival second; the demo's four models get exactly the report's scores and
ceilings; a model added after publication (from a responses file, or declared in a model TOML and
run on the published stimuli) is scored with CIs, and neither the package nor the original export
changes."""

from __future__ import annotations

import hashlib
import json
import shutil
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from humanlike.analysis.psychds import validate_dataset
from humanlike.cli import main
from tests.e2e.conftest import simulated_demo_export

N_RESAMPLES, N_SIM = 200, 100
KEYS = {"scores": ["model", "subset", "metric"], "noise_ceiling": ["subset", "metric", "bound"]}


@pytest.fixture(scope="module")
def published(demo_spec, tmp_path_factory):
    """12 simulated participants exported, reported (Python API, as `humanlike report` runs it)
    and published with the demo's model responses."""
    from humanlike.analysis.io.export import read_export
    from humanlike.analysis.ratings.scores import load_model_responses
    from humanlike.analysis.report import ReportSettings, build_report

    root = tmp_path_factory.mktemp("publish")
    simulated_demo_export(demo_spec, root)
    runner = CliRunner()
    responses = demo_spec.parent / "stimuli" / "model_responses.csv"
    report = build_report(read_export(root / "export"), models=load_model_responses(responses),
                          spec=tomllib.loads(demo_spec.read_text()),
                          settings=ReportSettings(n_resamples=N_RESAMPLES, n_sim=N_SIM))
    out = root / "dataset"
    result = runner.invoke(main, ["publish", "demo", "--out", str(out), "--license", "CC-BY-4.0",
                                  "--author", "Ada Researcher", "--models", str(responses),
                                  "--n-resamples", str(N_RESAMPLES), "--n-sim", str(N_SIM),
                                  "--database-url", f"sqlite:///{root}/demo.sqlite"])
    assert result.exit_code == 0, result.output
    return root, out, report, result.output


def _digests(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_published_demo_passes_the_psych_ds_check(published):
    _, out, _, output = published
    result = validate_dataset(out)
    assert result.valid, result.summary()
    assert "appears to be Psych-DS compatible" in output
    names = {Path(p).name for p in result.datafiles}
    assert {"study-demo_description-ratings_data.csv", "study-demo_description-participants_data.csv",
            "study-demo_description-stimuli_data.csv"} <= names
    for required in ("README.md", "CITATION.cff", "LICENSE", "analysis/benchmark.json",
                     "materials/stimuli/SHA256SUMS"):
        assert (out / required).is_file(), required
    assert "creativecommons.org/licenses/by/4.0" in (out / "dataset_description.json").read_text()
    assert 'name: "Ada Researcher"' in (out / "CITATION.cff").read_text()


def test_every_stimulus_is_published_with_the_checksum_the_study_recorded(published):
    root, out, _, _ = published
    stimuli = pd.read_csv(root / "export" / "stimuli.csv")
    sums = dict(line.split("  ")[::-1] for line in
                (out / "materials" / "stimuli" / "SHA256SUMS").read_text().splitlines())
    assert sums == dict(zip(stimuli["stimulus"], stimuli["sha256"], strict=True))
    for key, digest in sums.items():
        assert hashlib.sha256((out / "materials" / "stimuli" / key).read_bytes()).hexdigest() == digest


def test_no_file_holds_a_platform_id_user_agent_completion_code_or_free_text(published):
    root, out, _, _ = published
    people = pd.read_csv(root / "export" / "participants.csv", dtype=str)
    secrets = set()
    for column in ("platform_id", "study_id", "session_id", "completion_code"):
        secrets |= set(people[column].dropna())
    answers = pd.read_csv(root / "export" / "debrief.csv", dtype=str)["answer"].dropna()
    secrets |= {a for a in answers if len(a) > 6}  # free-text answers ("simulated participant")
    assert people["platform_id"].nunique() == 12
    assert len(secrets) == 12 * 2 + 3  # ids and sessions, the study id, the code, one answer
    secrets |= {t[:19] for t in people["created_at"].dropna()}  # arrival seconds (by default
    assert len(secrets) > 12 * 2 + 3  # only their days are published: issue 45 item 17)
    for path in (p for p in out.rglob("*") if p.is_file()):
        content = path.read_bytes()
        found = [s for s in secrets if s.encode() in content]
        assert not found, (path, found[:3])
    for path in (out / "data").iterdir():
        header = path.read_text().splitlines()[0]
        assert "user_agent" not in header and "platform_id" not in header
    assert not list(out.rglob("*debrief*")) and not list(out.rglob("*events*"))


def _score(folder: Path, responses: Path, out: Path) -> dict[str, pd.DataFrame]:
    result = CliRunner().invoke(main, ["score", str(folder), "--models", str(responses),
                                       "--out", str(out)])
    assert result.exit_code == 0, result.output
    return {name: pd.read_csv(out / f"{name}.csv") for name in KEYS}


def _assert_same(report: pd.DataFrame, scored: pd.DataFrame, keys: list[str],
                 rtol: float = 0.0) -> None:
    merged = report.merge(scored, on=keys, suffixes=("_report", "_score"), validate="1:1")
    assert len(merged) == len(report)
    for column in ("estimate", "ci_low", "ci_high"):
        a, b = merged[f"{column}_report"], merged[f"{column}_score"]
        assert ((a - b).abs() <= rtol * b.abs()).all(), column


def test_score_from_the_package_alone_equals_the_reports_scores_and_ceilings(
        published, tmp_path, monkeypatch):
    root, out, report, _ = published
    fresh = tmp_path / "elsewhere" / "benchmark"
    shutil.copytree(out, fresh)
    monkeypatch.chdir(tmp_path)
    hidden = root / "export-away"
    (root / "export").rename(hidden)  # the scorer cannot read the original export
    try:
        scored = _score(fresh, fresh / "results" / "model_responses.csv", tmp_path / "scores")
    finally:
        hidden.rename(root / "export")
    tables = report.results.ratings.tables()
    assert set(scored["scores"]["model"]) == {"cnn", "logreg", "kde", "adv_cnn"}
    for name, keys in KEYS.items():
        _assert_same(tables[name], scored[name], keys)
    # error consistency: the report's observer pairs keep their kappa and CI beside the models'
    pairs = pd.read_csv(tmp_path / "scores" / "kappa_pairs.csv",
                        dtype={"observer_a": str, "observer_b": str, "condition": str})
    humans = report.results.error_consistency.pairs
    keys = ["experiment", "condition", "observer_a", "observer_b"]
    merged = humans.merge(pairs, on=keys, suffixes=("_report", "_score"), validate="1:1")
    # the report scores the models' pairs too (--models, as `humanlike analyze ec`; issue 36)
    assert len(merged) == len(humans) == len(pairs)
    assert (humans["observer_b"].isin(["cnn", "logreg", "kde", "adv_cnn"])
            | humans["observer_a"].isin(["cnn", "logreg", "kde", "adv_cnn"])).any()
    for column in ("kappa", "ci_low", "ci_high"):
        a, b = merged[f"{column}_report"], merged[f"{column}_score"]
        assert ((a == b) | (a.isna() & b.isna())).all(), column
    # the alignment profile (issue 42 item 5): the report's every metric per model with its CI,
    # its decided differences, and the metrics' agreement, from the package alone
    comparison = report.results.alignment
    text = {"experiment": str, "observer": str, "regime": str, "a": str, "b": str}
    for name, table, keys in (
            ("alignment_profile", comparison.profile.table,
             ["experiment", "regime", "metric", "observer"]),
            ("alignment_decided", comparison.decided, ["experiment", "metric", "a", "b"]),
            ("alignment_agreement", comparison.agreement,
             ["experiment", "metric_a", "metric_b"])):
        scored = pd.read_csv(tmp_path / "scores" / f"{name}.csv", dtype=text,
                             keep_default_na=False, na_values=[""])
        merged = table.merge(scored, on=keys, suffixes=("_report", "_score"), validate="1:1")
        assert len(merged) == len(table) == len(scored) > 0, name
        for column in {"estimate", "ci_low", "ci_high", "p_holm", "spearman"} & set(table):
            a, b = merged[f"{column}_report"], merged[f"{column}_score"]
            assert ((a == b) | (a.isna() & b.isna())).all(), (name, column)
    assert set(comparison.models) == {"cnn", "logreg", "kde", "adv_cnn"}
    assert (tmp_path / "scores" / "alignment_demo.svg").read_text().count("<svg") == 1
    definition = json.loads((fresh / "analysis" / "benchmark.json").read_text())
    assert set(comparison.profile.table["metric"]) <= set(definition["alignment"]["metrics"])
    assert "Holm" in definition["alignment"]["comparisons"]
    assert "alignment_decided" in definition["reference_results"]


def test_a_model_added_after_publication_is_scored_with_cis_and_nothing_changes(
        published, tmp_path):
    root, out, report, _ = published
    before = {"package": _digests(out), "export": _digests(root / "export")}
    demo = pd.read_csv(out / "results" / "model_responses.csv", dtype={"stimulus": str,
                                                                       "category": str})
    cnn = demo[demo["model"] == "cnn"]
    p = 0.5 * cnn["probability"] + 0.05
    blend = cnn.assign(model="blend", probability=p, logit=np.log(p / (1 - p)))
    pd.concat([demo, blend]).to_csv(tmp_path / "five.csv", index=False)
    scored = _score(out, tmp_path / "five.csv", tmp_path / "scores")
    new = scored["scores"].query("model == 'blend'")
    assert len(new) == 6  # 3 subsets x 2 metrics
    assert new[["estimate", "ci_low", "ci_high"]].notna().all().all()
    assert ((new["ci_low"] <= new["estimate"]) & (new["estimate"] <= new["ci_high"])).all()
    assert (new["ci_low"] < new["ci_high"]).all()
    comparisons = pd.read_csv(tmp_path / "scores" / "comparisons.csv")
    assert ((comparisons["a"] == "blend") | (comparisons["b"] == "blend")).any()
    # the four published models keep the report's numbers when a fifth is scored beside them (the
    # same resamples; sums over a larger stack of models may differ in the last bit)
    tables = report.results.ratings.tables()
    _assert_same(tables["scores"], scored["scores"].query("model != 'blend'"), KEYS["scores"],
                 rtol=1e-12)
    assert before == {"package": _digests(out), "export": _digests(root / "export")}


def test_a_model_declared_in_a_toml_is_run_on_the_published_stimuli_and_scored(
        published, tmp_path, demo_spec):
    import torch
    from safetensors.torch import save_file

    from humanlike.stimuli.demo_models import SmallCNN

    _, out, _, _ = published
    torch.manual_seed(0)
    save_file(SmallCNN().state_dict(), str(tmp_path / "mine.safetensors"))
    toml = tmp_path / "mine.toml"
    toml.write_text('name = "mine"\n[model]\nentry_point = "humanlike.stimuli.demo_models:SmallCNN"\n'
                    'weights = "mine.safetensors"\n[input]\nsize = 28\nchannels = 1\nmean = 0.0\n'
                    "std = 1.0\n[classes]\nnames = [" + ", ".join(f'"{d}"' for d in range(10))
                    + "]\n")
    runner = CliRunner()
    result = runner.invoke(main, ["score", str(out), "--declared", str(toml), "--device", "cpu",
                                  "--no-error-consistency", "--responses-out",
                                  str(tmp_path / "mine.csv"), "--out", str(tmp_path / "scores")])
    assert result.exit_code == 0, result.output
    scores = pd.read_csv(tmp_path / "scores" / "scores.csv")
    assert set(scores["model"]) == {"mine"}
    assert scores[["ci_low", "ci_high"]].notna().all().all()
    # the same model on the study's own stimulus files gives the same responses
    result = runner.invoke(main, ["stimuli", "responses", "--models", str(toml), "--manifest",
                                  str(demo_spec.parent / "stimuli" / "manifest.csv"), "--out",
                                  str(tmp_path / "original.csv"), "--device", "cpu"])
    assert result.exit_code == 0, result.output
    original = pd.read_csv(tmp_path / "original.csv", dtype={"stimulus": str, "category": str})
    mine = pd.read_csv(tmp_path / "mine.csv", dtype={"stimulus": str, "category": str})
    merged = mine.merge(original, on=["model", "stimulus", "category"], validate="1:1")
    assert len(merged) == len(mine) > 0
    # equal up to float32 accumulation order (the two runs batch the images differently)
    np.testing.assert_allclose(merged["probability_x"], merged["probability_y"], rtol=1e-5,
                               atol=1e-6)


def test_free_text_is_published_only_when_asked(published, tmp_path):
    root, _, _, _ = published
    out = tmp_path / "with-text"
    result = CliRunner().invoke(main, ["publish", "demo", "--out", str(out), "--license",
                                       "CC0-1.0", "--include-free-text", "--n-resamples", "20",
                                       "--database-url", f"sqlite:///{root}/demo.sqlite"])
    assert result.exit_code == 0, result.output
    debrief = pd.read_csv(out / "data" / "study-demo_description-debrief_data.csv", dtype=str)
    assert set(debrief.columns) == {"participant", "question", "answer"}
    assert (debrief["answer"] == "simulated participant").any()
    assert validate_dataset(out).valid
    assert not (out / "results").exists()  # no --models: nothing scored


def test_bad_input_is_refused_and_changes_nothing(published, tmp_path):
    root, out, _, _ = published
    before = _digests(out)
    runner = CliRunner()
    db = f"sqlite:///{root}/demo.sqlite"
    result = runner.invoke(main, ["publish", "demo", "--out", str(out), "--license", "CC0-1.0",
                                  "--database-url", db])
    assert result.exit_code != 0 and "not empty" in result.output
    result = runner.invoke(main, ["publish", "nosuch", "--out", str(tmp_path / "x"), "--license",
                                  "CC0-1.0", "--database-url", db])
    assert result.exit_code != 0 and "nosuch" in result.output
    assert not (tmp_path / "x").exists()
    (tmp_path / "bad.csv").write_text("model,stimulus\nm,s\n")
    result = runner.invoke(main, ["score", str(out), "--models", str(tmp_path / "bad.csv")])
    assert result.exit_code != 0 and "bad.csv" in result.output
    result = runner.invoke(main, ["score", str(tmp_path), "--models", str(tmp_path / "bad.csv")])
    assert result.exit_code != 0 and "benchmark.json" in result.output
    result = runner.invoke(main, ["score", str(out), "--models", str(out / "results" /
                                  "model_responses.csv"), "--out", str(out / "scores")])
    assert result.exit_code != 0 and "outside" in result.output
    assert _digests(out) == before


def test_publish_deposits_the_folder_on_a_zenodo_fake_resumes_after_a_503_and_releases(
        published, tmp_path, monkeypatch):
    """`--deposit zenodo` on the published demo: a draft holding the folder as one archive beside
    README.md, dataset_description.json, CITATION.cff and LICENSE (Zenodo's file names hold no
    folders), a 503 halfway, a rerun that resumes the same draft, then `--release`; the archive
    unpacks to the folder byte for byte; the folder's bytes never change (the state lives
    beside it)."""
    import io
    import tarfile

    from humanlike.analysis.psychds.deposit import FOLDER_ARCHIVE, flat_files, zenodo
    from tests.fakes.zenodo import FakeZenodo

    _, out, _, _ = published
    folder = tmp_path / "dataset"
    shutil.copytree(out, folder)
    before = _digests(folder)
    fake = FakeZenodo()
    fake.fail[("put_object", 3)] = 503
    monkeypatch.setenv("ZENODO_TOKEN", fake.token)
    monkeypatch.setattr(zenodo, "TRANSPORT", fake.transport())
    args = ["publish", "demo", "--out", str(folder), "--license", "CC-BY-4.0", "--deposit",
            "zenodo", "--deposit-url", fake.base_url]
    runner = CliRunner()
    result = runner.invoke(main, args)
    assert result.exit_code != 0 and "HTTP 503" in result.output and "resume" in result.output
    result = runner.invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "resuming draft" in result.output and "--release" in result.output
    result = runner.invoke(main, [*args, "--release"])
    assert result.exit_code == 0, result.output
    assert fake.violations == [] and len(fake.depositions) == 1 and fake.drafts() == []
    [record] = fake.depositions.values()
    assert len(before) > 100 >= len(record["files"])  # file by file it would not fit a record
    assert {n: f["data"] for n, f in record["files"].items()} == {
        f.name: f.data for f in flat_files(folder, 100, "Zenodo")}
    assert sorted(record["files"]) == ["CITATION.cff", "LICENSE", "README.md", "SHA256SUMS",
                                       "dataset_description.json", FOLDER_ARCHIVE]
    with tarfile.open(fileobj=io.BytesIO(record["files"][FOLDER_ARCHIVE]["data"])) as tar:
        unpacked = {m.name.removeprefix("psychds-dataset/"): tar.extractfile(m).read()
                    for m in tar.getmembers()}
    assert {k: hashlib.sha256(v).hexdigest() for k, v in unpacked.items()} == before
    assert record["metadata"]["creators"] == [{"name": "Ada Researcher"}]
    assert record["metadata"]["license"] == "cc-by-4.0"
    assert _digests(folder) == before
    result = runner.invoke(main, ["publish", "demo", "--out", str(tmp_path / "new"), "--license",
                                  "CC0-1.0", "--release"])
    assert result.exit_code != 0 and "--deposit" in result.output
    assert not (tmp_path / "new").exists()


def test_brainscore_plugins_have_brainscores_layout_and_reproduce_humanlike_score(
        published, tmp_path):
    """`--brainscore`: Brain-Score's data and benchmark plugin layout (checked against
    brain-score/vision's plugins: registries set in __init__.py, benchmark.py, metadata.yaml's
    schema, test.py); the plugin's own numpy formulas on its ratings.csv give `humanlike score`'s
    noise ceiling (lower bound, subset all) and the reference model's mean r to 1e-6."""
    import ast
    import importlib.util
    import json
    import zipfile

    import yaml

    _, out, report, _ = published
    plugins = tmp_path / "brainscore"
    result = CliRunner().invoke(main, ["publish", "demo", "--out", str(out), "--license",
                                       "CC-BY-4.0", "--brainscore", str(plugins)])
    assert result.exit_code == 0, result.output
    data, bench = plugins / "data" / "humanlike_demo", plugins / "benchmarks" / "humanlike_demo"
    for required in ("__init__.py", "test.py", "ratings.csv", "stimulus_set.csv", "stimuli.zip"):
        assert (data / required).is_file(), required
    for required in ("__init__.py", "benchmark.py", "metadata.yaml", "test.py", "formulas.py"):
        assert (bench / required).is_file(), required
    registered = {}
    for init in (data / "__init__.py", bench / "__init__.py"):
        for node in ast.walk(ast.parse(init.read_text())):
            target = node.targets[0] if isinstance(node, ast.Assign) else None
            if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) \
                    and target.value.id.endswith("_registry"):
                registered[target.value.id] = ast.unparse(target.slice)
    # Brain-Score's plugin finder greps __init__.py for "<registry>['<identifier>']" literally
    # (brainscore_core.plugin_management.import_plugin)
    assert registered == {"stimulus_set_registry": "'humanlike.demo'",
                          "data_registry": "'humanlike.demo'",
                          "benchmark_registry": "'humanlike.demo-pearson_r'"}
    for init, line in ((data / "__init__.py", "data_registry['humanlike.demo']"),
                       (bench / "__init__.py", "benchmark_registry['humanlike.demo-pearson_r']")):
        assert line in init.read_text()
    for path in (*data.glob("*.py"), *bench.glob("*.py")):
        ast.parse(path.read_text(), str(path))
    source = (bench / "benchmark.py").read_text()
    assert "class RatingCorrelationBenchmark(BenchmarkBase)" in source and "ceiling_func" in source
    meta = yaml.safe_load((bench / "metadata.yaml").read_text())
    [(identifier, entry)] = meta["benchmarks"].items()
    assert identifier == "humanlike.demo-pearson_r"
    assert set(entry) == {"stimulus_set", "data", "metric"}
    assert {"num_stimuli", "datatype", "total_size_mb", "brainscore_link"} <= set(entry["stimulus_set"])
    assert {"benchmark_type", "num_subjects", "species"} <= set(entry["data"])
    stimulus_set = pd.read_csv(data / "stimulus_set.csv", dtype=str)
    assert entry["stimulus_set"]["num_stimuli"] == len(stimulus_set)
    with zipfile.ZipFile(data / "stimuli.zip") as archive:
        for name, sha in zip(stimulus_set["filename"], stimulus_set["sha256"], strict=True):
            assert hashlib.sha256(archive.read(name)).hexdigest() == sha
    # the plugin's formulas (numpy only) against `humanlike score` on the published folder
    spec = importlib.util.spec_from_file_location("plugin_formulas", bench / "formulas.py")
    formulas = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(formulas)
    ratings = pd.read_csv(data / "ratings.csv", dtype={"subject": str, "stimulus_id": str,
                                                       "category": str})
    matrix, stimulus_ids, categories = formulas.rating_matrix(ratings)
    reference = pd.read_csv(bench / "reference_model.csv", dtype={"stimulus": str, "category": str})
    table = reference.pivot(index="stimulus", columns="category", values="probability")
    prediction = table.loc[list(stimulus_ids), list(categories)].to_numpy().reshape(-1)
    # `humanlike score`'s tables are the report's number for number (held by
    # test_score_from_the_package_alone_equals_the_reports_scores_and_ceilings), so the report's
    # stand in for a second scoring run here
    tables = report.results.ratings.tables()
    ceiling = tables["noise_ceiling"].query(
        "subset == 'all' and metric == 'pearson_r' and bound == 'lower'")["estimate"].item()
    score = tables["scores"].query(
        "model == 'cnn' and subset == 'all' and metric == 'pearson_r'")["estimate"].item()
    assert set(reference["model"]) == {"cnn"}
    assert formulas.leave_one_out_ceiling(matrix) == pytest.approx(ceiling, abs=1e-6)
    assert formulas.mean_subject_r(matrix, prediction) == pytest.approx(score, abs=1e-6)
    published_numbers = json.loads((bench / "published.json").read_text())
    assert published_numbers["ceiling"] == pytest.approx(ceiling, abs=1e-6)
    assert published_numbers["reference"]["pearson_r"] == pytest.approx(score, abs=1e-6)
    assert 0 < ceiling < 1 and 0 < score < 1  # simulated observers: a model may pass the lower bound


# --- issue 44 item 3: `humanlike replicate PACKAGE` ----------------------------------------------

REPLICATION_BOUNDS = {"pearson_r": 0.1, "mse": 0.02}


@pytest.fixture(scope="module")
def replicated(published, tmp_path_factory):
    """The published demo imported as experiment 'demo-rep' on a fresh server database, with
    bounds declared on the command line."""
    _, out, _, _ = published
    base = tmp_path_factory.mktemp("replicate")
    db = f"sqlite:///{base}/replication.sqlite"
    bounds = [a for m, v in REPLICATION_BOUNDS.items() for a in ("--bound", f"{m}={v}")]
    result = CliRunner().invoke(main, ["replicate", str(out), "--slug", "demo-rep", "--out",
                                       str(base / "rep"), *bounds, "--database-url", db])
    assert result.exit_code == 0, result.output
    return base, db, result.output


def test_a_replicated_package_keeps_the_design_hash_and_the_seeded_timelines(
        published, replicated, demo_spec):
    """The package records the original's own version hash; the replication, under a new slug and
    its own platform, has another version hash and the same design hash; every timeline the
    original stored is what the replication builds from the same seed, and back."""
    import sqlalchemy as sa

    from humanlike.analysis.psychds.replication import design_hash, read_version
    from humanlike.server import create_app
    from humanlike.server.extensions import db
    from humanlike.server.study.experiments import load_experiment
    from humanlike.server.study.timeline import design_of, generate_timeline
    from humanlike.server.tables.core import Experiment, Participant

    root, out, _, _ = published
    base, url, output = replicated
    original = load_experiment(demo_spec)
    replica = load_experiment(base / "rep" / "experiment.toml")
    [folder] = (out / "documentation").glob("spec-*")
    version = read_version(folder)
    assert version.version_hash == original.version_hash  # the package names what ran
    assert version.withheld == ("completion.prolific_code",)

    def design(loaded):
        return design_hash(loaded.spec.model_dump(mode="json"), loaded.texts,
                           loaded.stimulus_rows())

    assert design(original) == design(replica) == version.design_hash
    assert replica.version_hash != original.version_hash  # slug and platform are its own
    assert (replica.slug, replica.spec.platform_name.value) == ("demo-rep", "local")
    assert replica.texts == original.texts and replica.stimuli == original.stimuli
    assert f"design {version.design_hash[:12]} as the original's" in output
    spec = tomllib.loads((base / "rep" / "experiment.toml").read_text())
    assert spec["replication"] == {"package": "original", "version": original.version_hash,
                                   "design_hash": version.design_hash,
                                   "bounds": REPLICATION_BOUNDS}

    def stored(database_url, slug):
        app = create_app({"SECRET_KEY": "t", "SQLALCHEMY_DATABASE_URI": database_url})
        with app.app_context():
            exp = db.session.execute(sa.select(Experiment).where(Experiment.slug == slug)
                                     ).scalar_one()
            timelines = db.session.execute(sa.select(Participant.timeline).where(
                Participant.experiment_id == exp.id)).scalars().all()
            return exp.spec_hash, timelines

    spec_hash, none_yet = stored(url, "demo-rep")  # imported on this server, no one ran it yet
    assert spec_hash == replica.version_hash and none_yet == []
    _, timelines = stored(f"sqlite:///{root}/demo.sqlite", "demo")
    assert len(timelines) == 12
    for timeline in timelines:
        again = generate_timeline(replica.spec, list(replica.stimuli), timeline["condition"],
                                  timeline["seed"])
        assert [design_of(t) for t in timeline["trials"]] == again["trials"]
        assert timeline["categories"] == again["categories"]
    for seed in (1, 2**61 + 7):
        assert generate_timeline(original.spec, list(original.stimuli), "A", seed) == \
            generate_timeline(replica.spec, list(replica.stimuli), "A", seed)


def test_a_tampered_package_is_refused_naming_the_file_and_nothing_is_imported(
        published, replicated, tmp_path):
    _, out, _, _ = published
    _, url, _ = replicated
    runner = CliRunner()
    package = tmp_path / "package"
    shutil.copytree(out, package)
    [key] = [line.split("  ")[1] for line in
             (package / "materials" / "stimuli" / "SHA256SUMS").read_text().splitlines()][:1]
    target = package / "materials" / "stimuli" / key
    target.write_bytes(target.read_bytes() + b"\0")
    args = ["--slug", "demo-x", "--out", str(tmp_path / "x"), "--database-url", url]
    result = runner.invoke(main, ["replicate", str(package), *args])
    assert result.exit_code != 0
    assert f"{target}: its sha256 differs" in result.output
    shutil.copyfile(out / "materials" / "stimuli" / key, target)  # restored: the spec edited
    [spec] = package.glob("documentation/spec-*/spec.json")
    spec.write_text(spec.read_text().replace("Rate every digit", "Rate any digit"))
    result = runner.invoke(main, ["replicate", str(package), *args])
    assert result.exit_code != 0 and "not the recorded design_hash" in result.output
    assert str(spec.parent) in result.output
    result = runner.invoke(main, ["replicate", str(out), "--slug", "demo-rep", "--out",
                                  str(tmp_path / "x"), "--database-url", url])
    assert result.exit_code != 0 and "'demo-rep' exists on this server" in result.output
    result = runner.invoke(main, ["replicate", str(out), *args, "--bound", "pearson_r=-1"])
    assert result.exit_code != 0 and "pearson_r=-1" in result.output
    assert not (tmp_path / "x").exists()
    assert not any(p.name.startswith(".replicate-") for p in tmp_path.iterdir())


def test_the_simulated_replication_is_equivalent_to_the_original_within_its_bounds(
        published, replicated, demo_spec):
    """12 simulated participants (another seed than the original's, the same generating model)
    run the replication; its report's replication section finds every score and comparison
    equivalent within the declared bounds. The means are the package's published scores, a TOST
    p-value is Welch's two one-sided t-tests by hand, and a test that can fail does: the
    original's own CI half-widths bound the generating model's score too tightly."""
    from scipy import stats

    from humanlike.analysis.benchmark.package import read_package
    from humanlike.analysis.io.export import read_export
    from humanlike.analysis.report import ReportSettings
    from humanlike.analysis.report.replication import (
        equivalence_tests,
        original_half_widths,
        participant_values,
        replication_result,
        resolve_package,
    )

    _, out, _, _ = published
    base, url, _ = replicated
    rep = base / "rep"
    models = rep / "original" / "results" / "model_responses.csv"
    runner = CliRunner()
    result = runner.invoke(main, ["simulate", str(rep / "experiment.toml"), "--participants",
                                  "12", "--fail-catch", "2", "--seed", "4", "--models",
                                  str(models), "--database-url", url])
    assert result.exit_code == 0, result.output
    result = runner.invoke(main, ["export", "demo-rep", "--out", str(base / "export"),
                                  "--database-url", url])
    assert result.exit_code == 0, result.output
    report = base / "report.html"
    result = runner.invoke(main, ["report", str(base / "export"), "--spec",
                                  str(rep / "experiment.toml"), "--models", str(models),
                                  "--out", str(report), "--n-resamples", "20", "--n-sim", "20"])
    assert result.exit_code == 0, result.output
    assert "Replication of a published study" in result.output
    html = report.read_text()
    assert 'id="replication"' in html
    assert "pearson_r: 45 of 45 tests equivalent - the replication is equivalent on it" in html
    assert "mse: 45 of 45 tests equivalent - the replication is equivalent on it" in html
    spec = resolve_package(tomllib.loads((rep / "experiment.toml").read_text()), rep)
    export = read_export(base / "export")
    tests = replication_result(export, spec, ReportSettings()).tests
    assert len(tests) == 90 and tests["verdict"].isin(
        ["equivalent", "equivalent, differs"]).all()
    assert (tests["n_original"] == 10).all() and (tests["n_replication"] >= 9).all()
    # the original's means are the package's published scores and lower bounds
    published_scores = pd.read_csv(out / "results" / "scores.csv")
    merged = tests.query("kind == 'score'").merge(
        published_scores, left_on=["subset", "metric", "a"], right_on=["subset", "metric", "model"])
    assert len(merged) == 24
    np.testing.assert_allclose(merged["original"], merged["estimate"], rtol=1e-12)
    ceiling = pd.read_csv(out / "results" / "noise_ceiling.csv").query("bound == 'lower'")
    lower = tests.query("kind == 'score' and a == 'lower'").merge(ceiling, on=["subset", "metric"])
    np.testing.assert_allclose(lower["original"], lower["estimate"], rtol=1e-12)
    # Welch's two one-sided tests by hand (scipy) for one row
    package = read_package(out)
    theirs = participant_values(package.export, pd.read_csv(models), package.rules)
    ours = participant_values(export, pd.read_csv(models), spec["exclusion"])
    x1, x2 = ours["all", "pearson_r"]["kde"].dropna(), theirs["all", "pearson_r"]["kde"].dropna()
    v1, v2 = x1.var(ddof=1) / len(x1), x2.var(ddof=1) / len(x2)
    se, d = np.sqrt(v1 + v2), x1.mean() - x2.mean()
    df = (v1 + v2) ** 2 / (v1 ** 2 / (len(x1) - 1) + v2 ** 2 / (len(x2) - 1))
    p = max(stats.t.sf((d + 0.1) / se, df), stats.t.cdf((d - 0.1) / se, df))
    row = tests.query("kind == 'score' and subset == 'all' and metric == 'pearson_r' and "
                      "a == 'kde'").iloc[0]
    assert row["p_tost"] == pytest.approx(p, rel=1e-9) and row["difference"] == pytest.approx(d)
    # the default bounds (the original's CI half-widths) are tight enough to fail some tests
    strict = equivalence_tests(theirs, ours, original_half_widths(package), 0.05)
    assert len(strict) == 90 and not strict["verdict"].isin(
        ["equivalent", "equivalent, differs"]).all()

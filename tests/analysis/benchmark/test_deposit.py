"""Deposits of a published folder on fakes of Zenodo's and Dataverse's APIs (tests/fakes/, each
checking every request against the service's documentation): a draft with every file and the
metadata, published only when asked; a 503 halfway and a resume that reuses the draft and uploads
only what is missing; the 100-file limit of a Zenodo record respected; Zenodo, whose file names
hold no folders, gets the folder as one archive that unpacks and checks with the commands its
description gives."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
from pathlib import Path

import pytest

from humanlike.analysis.psychds.deposit import (
    FOLDER_ARCHIVE,
    STIMULI_ARCHIVE,
    DepositError,
    deposit,
    deposit_files,
    state_path,
)
from humanlike.analysis.psychds.deposit.dataverse import Dataverse
from humanlike.analysis.psychds.deposit.zenodo import Zenodo
from tests.fakes.dataverse import FakeDataverse
from tests.fakes.zenodo import FakeZenodo

N_STIMULI = 150  # more than a Zenodo record's 100 files: they go in one archive


def _package(root: Path, n_stimuli: int = N_STIMULI, n_docs: int = 1) -> Path:
    """A small `humanlike publish` folder written by hand."""
    (root / "data").mkdir(parents=True)
    (root / "data" / "study-demo_description-trials_data.csv").write_text("participant,rt\np1,512\n")
    (root / "README.md").write_text("# Demo study\n")
    (root / "dataset_description.json").write_text(json.dumps({
        "@context": "https://schema.org/", "@type": "Dataset", "name": "Demo study",
        "description": "Ratings of a demo study.", "license": "https://creativecommons.org/licenses/by/4.0/",
        "keywords": ["psychophysics", "demo"], "datePublished": "2026-11-28",
        "author": [{"@type": "Person", "name": "Ada Researcher"}]}))
    (root / "CITATION.cff").write_text(
        'cff-version: 1.2.0\nmessage: "cite"\ntype: dataset\ntitle: "Demo study"\nauthors:\n'
        '  - family-names: "Researcher"\n    given-names: "Ada"\n    email: "ada@lab.test"\n'
        '    orcid: "https://orcid.org/0000-0002-1694-233X"\n'
        'date-released: "2026-11-28"\nlicense: "CC-BY-4.0"\nkeywords:\n  - psychophysics\n'
        'preferred-citation:\n  type: article\n  title: "The paper"\n  doi: "10.1234/paper.5"\n'
        '  authors:\n    - name: "Ada Researcher"\n')
    stimuli = root / "materials" / "stimuli"
    (stimuli / "natural").mkdir(parents=True)
    sums = []
    for i in range(n_stimuli):
        data = f"image {i}".encode() * 20
        (stimuli / "natural" / f"s{i:03d}.png").write_bytes(data)
        sums.append(f"{hashlib.sha256(data).hexdigest()}  natural/s{i:03d}.png")
    (stimuli / "SHA256SUMS").write_text("\n".join(sums) + "\n")
    (stimuli / "manifest.csv").write_text("stimulus,file\n" + "".join(
        f"natural/s{i:03d}.png,natural/s{i:03d}.png\n" for i in range(n_stimuli)))
    for i in range(n_docs):
        folder = root / "documentation" / f"spec-abcdef12345{i % 10}{i // 10 or ''}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "spec.json").write_text('{"slug": "demo"}\n')
    return root


def _files(fake_files: dict[str, bytes], root: Path) -> None:
    """The deposit holds every file of the folder outside the stimuli, byte for byte, and one
    archive whose SHA256SUMS check every stimulus it holds."""
    expected = {f.name: f.data for f in deposit_files(root, 1000, "test")}
    assert fake_files == expected
    with tarfile.open(fileobj=io.BytesIO(fake_files[STIMULI_ARCHIVE]), mode="r:gz") as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
    sums = dict(line.split("  ")[::-1] for line in
                members["stimuli/SHA256SUMS"].decode().splitlines())
    assert len(sums) == N_STIMULI
    for key, digest in sums.items():
        assert hashlib.sha256(members[f"stimuli/{key}"]).hexdigest() == digest


def _flat(fake_files: dict[str, bytes], root: Path, tmp: Path) -> None:
    """A Zenodo record: names without folders; README.md, dataset_description.json and
    CITATION.cff as they are; and, downloaded into ``tmp``, ``tar -xzf psychds-dataset.tar.gz &&
    sha256sum -c SHA256SUMS`` succeeds and gives back every file of the folder byte for byte."""
    assert all("/" not in name for name in fake_files)
    assert sorted(fake_files) == ["CITATION.cff", "README.md", "SHA256SUMS",
                                  "dataset_description.json", FOLDER_ARCHIVE]
    for name in ("README.md", "dataset_description.json", "CITATION.cff"):
        assert fake_files[name] == (root / name).read_bytes()
    tmp.mkdir()
    for name, data in fake_files.items():
        (tmp / name).write_bytes(data)
    subprocess.run(["tar", "-xzf", FOLDER_ARCHIVE], cwd=tmp, check=True)
    checked = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=tmp, check=True,
                             capture_output=True, text=True).stdout.splitlines()
    unpacked = tmp / "psychds-dataset"
    originals = {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*")
                 if p.is_file()}
    assert {p.relative_to(unpacked).as_posix(): p.read_bytes() for p in unpacked.rglob("*")
            if p.is_file()} == originals
    assert len(checked) == len(originals) + 4  # every unpacked file and the four beside it
    assert all(line.endswith(": OK") for line in checked)


def _zenodo(fake: FakeZenodo) -> Zenodo:
    return Zenodo(fake.token, fake.base_url, transport=fake.transport())


def _dataverse(fake: FakeDataverse) -> Dataverse:
    return Dataverse(fake.token, fake.base_url, fake.collection, transport=fake.transport())


def test_zenodo_round_trip_drafts_first_and_publishes_only_when_asked(tmp_path):
    root = _package(tmp_path / "demo")
    fake = FakeZenodo()
    state = deposit(root, _zenodo(fake))
    assert fake.violations == []
    [draft] = fake.drafts()
    assert draft["id"] == state.draft["id"] and not state.released
    assert len(draft["files"]) == 5 <= 100  # 150 stimuli and the folders in one archive
    _flat({n: f["data"] for n, f in draft["files"].items()}, root, tmp_path / "download")
    meta = draft["metadata"]
    assert meta["description"].startswith("<p>Ratings of a demo study.</p>")
    assert "tar -xzf psychds-dataset.tar.gz &amp;&amp; sha256sum -c SHA256SUMS" in \
        meta["description"]
    assert meta["title"] == "Demo study" and meta["upload_type"] == "dataset"
    assert meta["creators"] == [{"name": "Researcher, Ada", "orcid": "0000-0002-1694-233X"}]
    assert meta["license"] == "cc-by-4.0" and meta["version"] == "spec-abcdef123450"
    assert {"identifier": "10.1234/paper.5", "relation": "isSupplementTo"} in \
        meta["related_identifiers"]
    assert state_path(root, "zenodo") == tmp_path / "demo.zenodo-deposit.json"
    state = deposit(root, _zenodo(fake), release=True)
    assert fake.violations == [] and fake.drafts() == []
    assert len(fake.depositions) == 1 and state.released["doi"] == f"10.5281/zenodo.{draft['id']}"
    puts = [r for r in fake.requests if r[0] == "PUT" and r[1].startswith("/api/files/")]
    assert len(puts) == 5  # the second run uploaded nothing again


def test_zenodo_503_mid_upload_then_resume_keeps_one_draft_and_uploads_the_rest(tmp_path):
    root = _package(tmp_path / "demo")
    fake = FakeZenodo()
    fake.fail[("put_object", 4)] = 503
    with pytest.raises(DepositError, match="(?s)HTTP 503.*run the same command again"):
        deposit(root, _zenodo(fake))
    saved = json.loads(state_path(root, "zenodo").read_text())
    assert len(saved["uploaded"]) == 3 and saved["draft"]["id"] in fake.depositions
    state = deposit(root, _zenodo(fake), release=True)
    assert fake.violations == []
    assert len(fake.depositions) == 1 and state.released["doi"]
    [record] = fake.depositions.values()
    _flat({n: f["data"] for n, f in record["files"].items()}, root, tmp_path / "download")
    puts = [r for r in fake.requests if r[0] == "PUT" and r[1].startswith("/api/files/")]
    assert len(puts) == 5 + 1  # the three before the failure were not sent again
    creates = [r for r in fake.requests if r == ("POST", "/api/deposit/depositions")]
    assert len(creates) == 1


def test_a_draft_deleted_on_the_service_is_replaced_and_a_refused_create_leaves_none(tmp_path):
    root = _package(tmp_path / "demo", n_stimuli=3)
    fake = FakeZenodo()
    fake.fail[("put_object", 1)] = 503
    with pytest.raises(DepositError):
        deposit(root, _zenodo(fake))
    fake.depositions.clear()  # the user deleted the draft on Zenodo
    deposit(root, _zenodo(fake))
    assert len(fake.drafts()) == 1 and fake.violations == []
    other = FakeZenodo()
    with pytest.raises(DepositError, match="HTTP 401"):
        deposit(_package(tmp_path / "other", n_stimuli=3), Zenodo("wrong", other.base_url,
                                                                    transport=other.transport()))
    assert other.depositions == {}
    assert json.loads(state_path(tmp_path / "other", "zenodo").read_text())["draft"] == {}


def test_more_files_than_a_record_takes_are_refused_before_any_request(tmp_path):
    root = _package(tmp_path / "demo", n_stimuli=2, n_docs=100)
    fake = FakeDataverse()
    with pytest.raises(ValueError, match=r"105 files to deposit .*Dataverse takes in one record "
                                         r"\(100\)"):
        deposit(root, Dataverse(fake.token, fake.base_url, fake.collection,
                                transport=fake.transport(), limit=100))
    assert fake.requests == [] and not state_path(root, "dataverse").exists()
    # Zenodo gets the folder as five files; a record limit set lower (--deposit-limit) is held
    fake = FakeZenodo()
    client = _zenodo(fake)
    client.limit = 4
    with pytest.raises(ValueError, match=r"5 files to deposit \(the folder packed into "
                                         r"psychds-dataset.tar.gz\), more than Zenodo takes in "
                                         r"one record \(4\)"):
        deposit(root, client)
    assert fake.requests == [] and not state_path(root, "zenodo").exists()
    # the fake holds a record's limit too (here 4): the fifth file is refused
    fake = FakeZenodo(file_limit=4)
    with pytest.raises(DepositError, match="at most 4 files"):
        deposit(_package(tmp_path / "small", n_stimuli=2), _zenodo(fake))


def test_zenodo_refuses_file_names_with_folders_so_the_folder_goes_as_one_archive(tmp_path):
    """Depositing every file under its path (the first client's way) fails on the fake, as the
    folder would be lost on Zenodo (zenodo/zenodo#1089, #2479)."""
    root = _package(tmp_path / "demo", n_stimuli=3)
    fake = FakeZenodo()
    client = _zenodo(fake)
    client.folders = True
    with pytest.raises(DepositError, match="holds no folders"):
        deposit(root, client)
    assert fake.violations == ["PUT 'data/study-demo_description-trials_data.csv': a Zenodo "
                               "file name holds no folders (zenodo/zenodo#1089, #2479)"]


def test_dataverse_round_trip_with_a_503_mid_upload_and_a_resume(tmp_path):
    root = _package(tmp_path / "demo")
    fake = FakeDataverse()
    fake.fail[("add", 5)] = 503
    with pytest.raises(DepositError, match="(?s)HTTP 503.*resume"):
        deposit(root, _dataverse(fake))
    assert len(fake.drafts()) == 1
    state = deposit(root, _dataverse(fake))
    assert fake.violations == [] and len(fake.datasets) == 1
    [dataset] = fake.drafts()
    files = {"/".join(p for p in (f["directoryLabel"], f["label"]) if p): f
             for f in dataset["files"]}
    _files({n: f["data"] for n, f in files.items()}, root)
    assert {f["tabIngest"] for f in files.values()} == {"false"}  # CSVs kept as published
    adds = [r for r in fake.requests if r[1] == "/api/datasets/:persistentId/add"]
    assert len(adds) == 6 + 1  # six files, the one refused with a 503 sent again
    fields = {f["typeName"]: f["value"] for f in
              dataset["version"]["metadataBlocks"]["citation"]["fields"]}
    assert fields["title"] == "Demo study"
    assert fields["author"][0]["authorName"]["value"] == "Researcher, Ada"
    assert fields["datasetContact"][0]["datasetContactEmail"]["value"] == "ada@lab.test"
    assert fields["publication"][0]["publicationIDNumber"]["value"] == "10.1234/paper.5"
    assert dataset["version"]["license"]["name"] == "CC BY 4.0"
    state = deposit(root, _dataverse(fake), release=True)
    assert fake.violations == [] and dataset["state"] == "RELEASED"
    assert state.released["doi"] == dataset["persistentId"]


def test_a_file_changed_before_the_resume_is_replaced_and_a_removed_one_deleted(tmp_path):
    root = _package(tmp_path / "demo", n_stimuli=3, n_docs=2)
    fake = FakeDataverse()
    deposit(root, _dataverse(fake))
    (root / "data" / "study-demo_description-trials_data.csv").write_text("participant,rt\np1,9\n")
    removed = next((root / "documentation").glob("spec-*1/spec.json"))
    removed.unlink()
    deposit(root, _dataverse(fake))
    assert fake.violations == [] and len(fake.datasets) == 1
    [dataset] = fake.drafts()
    files = {"/".join(p for p in (f["directoryLabel"], f["label"]) if p): f["data"]
             for f in dataset["files"]}
    assert files == {f.name: f.data for f in deposit_files(root, 1000, "test")}


def test_a_create_whose_answer_was_lost_is_never_followed_by_a_second_draft(tmp_path):
    root = _package(tmp_path / "demo", n_stimuli=3)
    fake = FakeZenodo()
    fake.fail[("create", 1)] = "lost"
    with pytest.raises(DepositError, match="ReadTimeout|no answer"):
        deposit(root, _zenodo(fake))
    assert len(fake.drafts()) == 1  # Zenodo made it; the client never heard
    with pytest.raises(DepositError, match="may exist: delete it on Zenodo"):
        deposit(root, _zenodo(fake))
    assert len(fake.drafts()) == 1 and fake.violations == []


def test_the_command_refuses_a_deposit_without_its_token_before_anything_is_written(
        tmp_path, monkeypatch):
    from click.testing import CliRunner

    from humanlike.cli import main

    monkeypatch.delenv("DATAVERSE_TOKEN", raising=False)
    result = CliRunner().invoke(main, ["publish", "demo", "--out", str(tmp_path / "x"),
                                       "--license", "CC0-1.0", "--deposit", "dataverse",
                                       "--database-url", f"sqlite:///{tmp_path}/none.sqlite"])
    assert result.exit_code != 0 and "DATAVERSE_TOKEN" in result.output
    monkeypatch.setenv("DATAVERSE_TOKEN", "t")
    result = CliRunner().invoke(main, ["publish", "demo", "--out", str(tmp_path / "x"),
                                       "--license", "CC0-1.0", "--deposit", "dataverse",
                                       "--database-url", f"sqlite:///{tmp_path}/none.sqlite"])
    assert result.exit_code != 0 and "DATAVERSE_COLLECTION" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == []

"""What a deposit uploads and records: the published folder as a service's files (for a service
that keeps folders, every file under its path with the stimuli packed into one reproducible
archive; for one that does not, the whole folder as one reproducible archive with its checksums
beside the files a reader opens first), its metadata (from ``dataset_description.json``,
``CITATION.cff`` and the spec versions in ``documentation/``), and the resumable state kept in a
file beside the folder."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]

STIMULI = "materials/stimuli"
"""The folder of stimulus files that is packed into :data:`STIMULI_ARCHIVE`."""
STIMULI_ARCHIVE = "materials/stimuli.tar.gz"
"""The one archive that holds every stimulus, ``manifest.csv`` and ``SHA256SUMS`` in a deposit."""


class DepositError(RuntimeError):
    """A deposit that cannot go on: the message names the service, the request and what to do."""


@dataclass(frozen=True)
class DepositFile:
    """One file of a deposit: its name in the deposit (a POSIX path), its bytes and checksums."""

    name: str
    data: bytes = field(repr=False)
    md5: str
    sha256: str

    @property
    def folder(self) -> str:
        """The folder part of :attr:`name` ('' at the root)."""
        return self.name.rpartition("/")[0]

    @property
    def filename(self) -> str:
        """The last part of :attr:`name`."""
        return self.name.rpartition("/")[2]


def _file(name: str, data: bytes) -> DepositFile:
    return DepositFile(name, data, hashlib.md5(data).hexdigest(), hashlib.sha256(data).hexdigest())


def _tar_gz(folder: Path, prefix: str, paths: list[Path]) -> bytes:
    """``paths`` (files under ``folder``) as a gzipped tar under ``prefix/``, with fixed times,
    owners and order, so the same files give the same bytes (and checksums) on every run, which a
    resumed deposit relies on."""
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as zipped, \
            tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(paths):
            info = tarfile.TarInfo(f"{prefix}/{path.relative_to(folder).as_posix()}")
            data = path.read_bytes()
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _every_file(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()]


def stimuli_archive(root: Path) -> bytes:
    """``materials/stimuli/`` as a reproducible gzipped tar (members under ``stimuli/``)."""
    return _tar_gz(root / STIMULI, "stimuli", _every_file(root / STIMULI))


def _check_folder(root: Path) -> None:
    if not (root / "dataset_description.json").is_file():
        raise ValueError(f"{root}: no dataset_description.json; not a `humanlike publish` folder")
    if not (root / STIMULI / "SHA256SUMS").is_file():
        raise ValueError(f"{root}: no {STIMULI}/SHA256SUMS; not a `humanlike publish` folder")


def _within(files: list[DepositFile], root: Path, limit: int, service: str, how: str) -> None:
    if len(files) > limit:
        raise ValueError(f"{root}: {len(files)} files to deposit ({how}), more than {service} "
                         f"takes in one record ({limit})")


def deposit_files(root: Path, limit: int, service: str) -> list[DepositFile]:
    """The published folder ``root`` as a deposit's files: every file outside
    ``materials/stimuli/`` under its path, and the stimuli as :data:`STIMULI_ARCHIVE`.
    ``ValueError`` naming the count and ``service``'s ``limit`` when there are more files."""
    _check_folder(root)
    files = [_file(p.relative_to(root).as_posix(), p.read_bytes())
             for p in sorted(root.rglob("*")) if p.is_file()
             and not p.relative_to(root).as_posix().startswith(STIMULI + "/")]
    files.append(_file(STIMULI_ARCHIVE, stimuli_archive(root)))
    files.sort(key=lambda f: f.name)
    _within(files, root, limit, service, "the stimuli packed into one archive")
    return files


FOLDER_ARCHIVE = "psychds-dataset.tar.gz"
"""For a service without folders: the whole Psych-DS folder, unpacking to ``psychds-dataset/``."""
CHECKSUMS = "SHA256SUMS"
"""Beside :data:`FOLDER_ARCHIVE`: the sha256 of every deposited file and of every unpacked one."""
READ_FIRST = ("README.md", "dataset_description.json", "CITATION.cff", "LICENSE")
"""Top-level files deposited beside the archive too, so a reader sees them without unpacking."""


def flat_files(root: Path, limit: int, service: str) -> list[DepositFile]:
    """The published folder ``root`` for a service whose file names hold no folders (Zenodo):
    :data:`READ_FIRST` as they are, the whole folder as :data:`FOLDER_ARCHIVE` and
    :data:`CHECKSUMS` over both, so that ``tar -xzf psychds-dataset.tar.gz && sha256sum -c
    SHA256SUMS`` in the download folder checks the archive and every file it unpacks to.
    ``ValueError`` naming the count and ``service``'s ``limit`` when there are more files."""
    _check_folder(root)
    prefix = FOLDER_ARCHIVE.removesuffix(".tar.gz")
    paths = _every_file(root)
    files = [_file(name, (root / name).read_bytes()) for name in READ_FIRST
             if (root / name).is_file()]
    files.append(_file(FOLDER_ARCHIVE, _tar_gz(root, prefix, paths)))
    sums = [f"{f.sha256}  {f.name}" for f in files] + sorted(
        f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {prefix}/{p.relative_to(root).as_posix()}"
        for p in paths)
    files.append(_file(CHECKSUMS, ("\n".join(sums) + "\n").encode()))
    files.sort(key=lambda f: f.name)
    _within(files, root, limit, service, f"the folder packed into {FOLDER_ARCHIVE}")
    return files


def unpack_note() -> str:
    """How a reader of a flat deposit gets the Psych-DS folder back (for the record's description)."""
    return (f"Zenodo keeps no folders, so the Psych-DS dataset is the archive {FOLDER_ARCHIVE}; "
            f"{', '.join(READ_FIRST)} are also deposited beside it. To unpack and check it, "
            f"download every file, then run: tar -xzf {FOLDER_ARCHIVE} && sha256sum -c "
            f"{CHECKSUMS} (the dataset is then in {FOLDER_ARCHIVE.removesuffix('.tar.gz')}/).")


@dataclass(frozen=True)
class DepositMetadata:
    """The metadata both services ask for, read from the published folder."""

    title: str
    description: str
    creators: list[dict[str, str]]
    license: str
    keywords: list[str]
    version: str
    date: str | None
    related: list[dict[str, str]]
    contact_email: str | None = None


def _cff(root: Path) -> Mapping[str, Any]:
    path = root / "CITATION.cff"
    try:
        record = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not YAML ({exc})") from None
    if not isinstance(record, dict):
        raise ValueError(f"{path}: not a mapping of CITATION.cff fields")
    return record


def _person(author: Mapping[str, Any]) -> dict[str, str]:
    """A CFF person as 'Family, Given' (Zenodo's and Dataverse's form) with ORCID and affiliation."""
    family, given = author.get("family-names"), author.get("given-names")
    name = f"{family}, {given}" if family and given else str(
        author.get("name") or family or given or "anonymous")
    person = {"name": name}
    if author.get("affiliation"):
        person["affiliation"] = str(author["affiliation"])
    if author.get("orcid"):
        person["orcid"] = str(author["orcid"]).rsplit("/", 1)[-1]
    if author.get("email"):
        person["email"] = str(author["email"])
    return person


def _related(cff: Mapping[str, Any]) -> list[dict[str, str]]:
    """Related identifiers (DataCite relation types) from CITATION.cff: the dataset's own
    ``identifiers`` and ``doi`` as alternates, the ``preferred-citation`` and ``references`` it
    supplements, ``repository-code`` and ``url`` as its documentation."""
    related: list[dict[str, str]] = []

    def add(identifier: Any, relation: str) -> None:
        if identifier and all(r["identifier"] != str(identifier) for r in related):
            related.append({"identifier": str(identifier), "relation": relation,
                            "scheme": "doi" if str(identifier).startswith("10.") else "url"})

    add(cff.get("doi"), "isIdenticalTo")
    for item in cff.get("identifiers") or []:
        if isinstance(item, dict):
            add(item.get("value"), "isIdenticalTo")
    for work in [cff.get("preferred-citation"), *(cff.get("references") or [])]:
        if isinstance(work, dict):
            add(work.get("doi") or work.get("url"), "isSupplementTo")
    add(cff.get("repository-code"), "isDocumentedBy")
    add(cff.get("url"), "isDocumentedBy")
    return related


def deposit_metadata(root: Path, contact_email: str | None = None) -> DepositMetadata:
    """Title, description, licence (SPDX), keywords and date from ``dataset_description.json``;
    creators, version and related identifiers from ``CITATION.cff``; the version defaults to the
    hash of the spec participants last ran under (``documentation/spec-<hash>``)."""
    path = root / "dataset_description.json"
    try:
        description = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: not readable JSON ({exc})") from None
    cff = _cff(root)
    for key in ("name", "description"):
        if not description.get(key):
            raise ValueError(f"{path}: field {key!r} is missing")
    authors = cff.get("authors") or [{"name": a.get("name")} for a in description.get("author", [])]
    creators = [_person(a) for a in authors if isinstance(a, dict)]
    specs = sorted(p.name.removeprefix("spec-") for p in (root / "documentation").glob("spec-*"))
    version = str(cff.get("version") or (f"spec-{specs[-1]}" if specs else "1"))
    email = contact_email or next((c["email"] for c in creators if c.get("email")), None)
    return DepositMetadata(
        title=str(cff.get("title") or description["name"]), description=description["description"],
        creators=creators or [{"name": "anonymous"}],
        license=str(cff.get("license") or description.get("license") or ""),
        keywords=[str(k) for k in (cff.get("keywords") or description.get("keywords") or [])],
        version=version, date=str(cff.get("date-released") or description.get("datePublished")
                                  or "") or None,
        related=_related(cff), contact_email=email)


@dataclass
class DepositState:
    """What a deposit has done so far, kept in :func:`state_path` after every step: the draft's
    id and links, the files uploaded (name -> md5) and whether the record was released."""

    service: str
    base_url: str
    package_sha256: str
    draft: dict[str, Any] = field(default_factory=dict)
    uploaded: dict[str, str] = field(default_factory=dict)
    released: dict[str, Any] = field(default_factory=dict)


def state_path(root: Path, service: str) -> Path:
    """``<folder>.<service>-deposit.json`` beside the published folder (never inside it: the
    folder's bytes stay those that were checked)."""
    return root.parent / f"{root.name}.{service}-deposit.json"


def package_digest(files: list[DepositFile]) -> str:
    """One sha256 over the deposit's file names and sha256s (which package a state belongs to)."""
    return hashlib.sha256("".join(f"{f.name}\0{f.sha256}\n" for f in files).encode()).hexdigest()


def load_state(root: Path, service: str, base_url: str, digest: str) -> DepositState:
    """The saved state, or a new one; ``ValueError`` when the saved one is for another server."""
    path = state_path(root, service)
    if not path.is_file():
        return DepositState(service, base_url, digest)
    try:
        state = DepositState(**json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{path}: not a deposit state ({exc}); move it away to start over") from None
    if state.base_url != base_url:
        raise ValueError(f"{path}: field 'base_url' is {state.base_url}, not {base_url}; this "
                         "folder's deposit is on another server")
    return state


def save_state(root: Path, state: DepositState) -> Path:
    """Write the state atomically (a half-written state would lose the draft's id)."""
    path = state_path(root, state.service)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(state), indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def changed(files: list[DepositFile], present: Mapping[str, str]) -> Iterator[DepositFile]:
    """The files whose name is not in ``present`` (name -> md5) or whose md5 differs."""
    return (f for f in files if present.get(f.name) != f.md5)

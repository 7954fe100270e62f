"""What a replication takes from a published package (``humanlike replicate``): the design hash
both studies share, the package's spec version checked hash by hash, and the new experiment's
folder (spec, texts, stimuli, manifest) written from it.

The *design hash* is the sha256 of the canonical JSON of a spec version without what names or
recruits the study: its published spec (:func:`~.disclosure.public_spec`) less
:data:`DESIGN_EXCLUDED` (the slug, the platform and completion tables, the replication table),
its rendered texts and its manifest rows in manifest order. The version hash of the server
(``server.study.spec.version_hash``) covers the slug and the platform too, so a replication under a
new slug on its own platform has another version hash and the same design hash."""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from humanlike.analysis.psychds.disclosure import public_spec

DESIGN_EXCLUDED = ("slug", "platform", "completion", "replication")
"""Top-level spec keys outside the design: the study's name on its server, its recruitment
source and what that source gets at the end, and the replication's own declaration."""
VERSION_RECORD = "version.json"
"""Per published spec version: its version hash, design hash and the spec keys withheld."""
STIMULI_RECORD = "stimuli.json"
"""Per published spec version: its manifest rows in manifest order (the timelines' order)."""
TEXT_FIELDS = ("consent", "instructions")
ORIGINAL = "original"
"""Where ``humanlike replicate`` keeps the package inside the new experiment's folder."""
METRICS = ("pearson_r", "mse")
_HASH = r"^[0-9a-f]{64}$"


class ReplicationSettings(BaseModel):
    """``[replication]``: the published study this one replicates and the equivalence bounds its
    report tests against (``bounds``: per metric, the largest difference between the studies
    still called equivalent; ``"original_ci"``: each score's and comparison's own half-width of
    the original's published confidence interval)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    package: str = Field(min_length=1, max_length=1000)
    """The published package's folder, relative to the spec (``humanlike replicate`` copies it)."""
    version: str = Field(pattern=_HASH)
    """The original's version hash (the server's, of the version replicated)."""
    design_hash: str = Field(pattern=_HASH)
    bounds: dict[Literal["pearson_r", "mse"], Annotated[float, Field(gt=0, le=10)]] | Literal[
        "original_ci"] = "original_ci"


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def design_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The published part of ``spec`` (a spec's JSON dump) less :data:`DESIGN_EXCLUDED`."""
    return {k: v for k, v in public_spec(spec).items() if k not in DESIGN_EXCLUDED}


def design_hash(spec: Mapping[str, Any], texts: Mapping[str, str],
                stimuli: Sequence[Mapping[str, Any]]) -> str:
    """sha256 of the canonical JSON of (design spec, rendered texts, manifest rows in order)."""
    snapshot = {"spec": design_spec(spec), "texts": dict(texts), "stimuli": list(stimuli)}
    return hashlib.sha256(_canonical(snapshot)).hexdigest()


def withheld_keys(spec: Any, public: Any, prefix: str = "") -> list[str]:
    """Dotted keys of ``spec`` that its published form ``public`` leaves out."""
    if not isinstance(spec, Mapping):
        return []
    out = []
    for key, value in spec.items():
        path = f"{prefix}{key}"
        if not isinstance(public, Mapping) or key not in public:
            if value is not None:
                out.append(path)
        elif isinstance(value, Mapping):
            out += withheld_keys(value, public[key], f"{path}.")
    return out


def version_record(spec: Mapping[str, Any], texts: Mapping[str, str],
                   stimuli: Sequence[Mapping[str, Any]], version_hash: str) -> dict[str, Any]:
    """What ``version.json`` holds for one published spec version."""
    return {"version_hash": version_hash, "design_hash": design_hash(spec, texts, stimuli),
            "withheld": withheld_keys(spec, public_spec(spec)),
            "design_excludes": list(DESIGN_EXCLUDED)}


@dataclass(frozen=True)
class PackageVersion:
    """One spec version of a published package: its folder, recorded hashes, published spec,
    rendered texts, their Markdown sources and its manifest rows."""

    folder: Path
    version_hash: str
    design_hash: str
    withheld: tuple[str, ...]
    spec: Mapping[str, Any]
    texts: Mapping[str, str]
    sources: Mapping[str, str]
    stimuli: tuple[Mapping[str, Any], ...]


def _sha256(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{path}: missing (a package published before `humanlike publish` "
                         "recorded spec versions for replication; publish it again)") from None
    except ValueError as exc:
        raise ValueError(f"{path}: not JSON ({exc})") from None


def read_version(folder: Path) -> PackageVersion:
    """The spec version published in ``folder`` (``documentation/spec-<hash12>``)."""
    record = _json(folder / VERSION_RECORD)
    stimuli = _json(folder / STIMULI_RECORD)
    for field in ("version_hash", "design_hash"):
        if not isinstance(record, dict) or not isinstance(record.get(field), str):
            raise ValueError(f"{folder / VERSION_RECORD}: field {field!r} missing")
    if not isinstance(stimuli, list) or not all(isinstance(r, dict) for r in stimuli):
        raise ValueError(f"{folder / STIMULI_RECORD}: not a list of manifest rows")
    texts = {f: (folder / f"{f}.html").read_text(encoding="utf-8") for f in TEXT_FIELDS
             if (folder / f"{f}.html").is_file()}
    sources = {f: (folder / f"{f}.md").read_text(encoding="utf-8") for f in TEXT_FIELDS
               if (folder / f"{f}.md").is_file()}
    return PackageVersion(folder, record["version_hash"], record["design_hash"],
                          tuple(record.get("withheld") or ()), _json(folder / "spec.json"),
                          texts, sources, tuple(stimuli))


def package_versions(root: Path) -> list[Path]:
    """The package's spec-version folders."""
    return sorted(p for p in (root / "documentation").glob("spec-*") if p.is_dir())


def check_stimuli(root: Path) -> dict[str, str]:
    """Every file of ``materials/stimuli/SHA256SUMS`` against its bytes, and the manifest's
    sha256 column against the sums; key -> sha256. ``ValueError`` names the file that differs."""
    folder = root / "materials" / "stimuli"
    sums_path = folder / "SHA256SUMS"
    if not sums_path.is_file():
        raise ValueError(f"{sums_path}: missing; not a `humanlike publish` folder")
    sums: dict[str, str] = {}
    for n, line in enumerate(sums_path.read_text().splitlines(), start=1):
        digest, sep, key = line.partition("  ")
        if not sep or len(digest) != 64:
            raise ValueError(f"{sums_path}: line {n} is not '<sha256>  <file>'")
        path = (folder / key).resolve()
        if not path.is_relative_to(folder.resolve()):
            raise ValueError(f"{sums_path}: line {n}: {key} lies outside materials/stimuli")
        if not path.is_file():
            raise ValueError(f"{folder / key}: missing (listed in {sums_path})")
        if _sha256(path) != digest:
            raise ValueError(f"{folder / key}: its sha256 differs from the one in {sums_path}: "
                             "not the file the study showed; refused")
        sums[key] = digest
    manifest = folder / "manifest.csv"
    with open(manifest, newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            key = row.get("file") or row.get("stimulus") or ""
            if sums.get(key) != row.get("sha256"):
                raise ValueError(f"{manifest}: stimulus {key}: sha256 {row.get('sha256')} is not "
                                 f"the one {sums_path} lists")
    return sums


def check_package(root: Path, version: str | None = None) -> PackageVersion:
    """The package's spec version ``version`` (a prefix of its hash; may be omitted when there is
    one), after checking every hash: each stimulus file against SHA256SUMS and the manifest, the
    version's manifest rows against them, and its design hash recomputed from the published spec,
    texts and rows. ``ValueError`` names the file that fails."""
    root = Path(root)
    sums = check_stimuli(root)
    folders = package_versions(root)
    if version is not None:
        folders = [f for f in folders if f.name.removeprefix("spec-").startswith(version[:12])]
    if not folders:
        raise ValueError(f"{root / 'documentation'}: no spec version "
                         + (f"{version!r}" if version else "published"))
    if len(folders) > 1:
        raise ValueError(f"{root / 'documentation'}: {len(folders)} spec versions; choose one "
                         f"with --version ({', '.join(f.name[5:] for f in folders)})")
    chosen = read_version(folders[0])
    if not chosen.version_hash.startswith(folders[0].name.removeprefix("spec-")):
        raise ValueError(f"{folders[0] / VERSION_RECORD}: version_hash {chosen.version_hash[:12]} "
                         f"is not the folder's {folders[0].name}")
    if version is not None and not chosen.version_hash.startswith(version):
        raise ValueError(f"{folders[0]}: version {chosen.version_hash} does not start {version}")
    for row in chosen.stimuli:
        key = str(row.get("key"))
        if sums.get(key) != row.get("sha256"):
            raise ValueError(f"{folders[0] / STIMULI_RECORD}: stimulus {key}: sha256 "
                             f"{row.get('sha256')} is not the one materials/stimuli/SHA256SUMS "
                             "lists")
    recomputed = design_hash(chosen.spec, chosen.texts, chosen.stimuli)
    if recomputed != chosen.design_hash:
        raise ValueError(f"{folders[0]}: the published spec, texts and manifest rows hash to "
                         f"{recomputed[:12]}, not the recorded design_hash "
                         f"{chosen.design_hash[:12]}; refused")
    return chosen


def _cell(value: Any) -> str:
    """A manifest cell the server's reader turns back into ``value`` (int, float, text, None)."""
    if value is None:
        return ""
    return repr(value) if isinstance(value, float) else str(value)


def _without_none(value: Any) -> Any:
    """``value`` without the null entries TOML cannot hold (a missing key reads as its default)."""
    if isinstance(value, Mapping):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(v) for v in value]
    return value


def _inside(root: Path, rel: str, what: str) -> Path:
    path = (root / rel).resolve()
    if not path.is_relative_to(root.resolve()):
        raise ValueError(f"{what} {rel!r} lies outside the experiment folder")
    return path


def write_replication(package: Path, version: PackageVersion, out: Path, *, slug: str,
                      platform: str | Mapping[str, Any], completion: Mapping[str, Any],
                      bounds: Mapping[str, float] | None) -> Path:
    """Write the replication's folder ``out`` (which must not exist): ``experiment.toml`` (the
    published spec under ``slug`` with ``platform``, ``completion`` and a ``[replication]``
    table), the texts' Markdown sources, the stimuli and manifest in the version's order, and
    the package itself under ``original/``. Returns the spec's path."""
    import tomli_w

    missing = [f for f in TEXT_FIELDS if f not in version.sources]
    if missing:
        raise ValueError(f"{version.folder}: no Markdown source of {', '.join(missing)} "
                         f"({missing[0]}.md); the package cannot give participants the same text")
    spec = dict(version.spec)
    out.mkdir(parents=True)
    for field in TEXT_FIELDS:
        path = _inside(out, str(spec[field]), field)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(version.sources[field], encoding="utf-8")
    manifest = _inside(out, str(spec["manifest"]), "manifest")
    manifest.parent.mkdir(parents=True, exist_ok=True)
    meta: dict[str, None] = {}
    for row in version.stimuli:
        meta.update(dict.fromkeys(row.get("meta") or {}))
    with open(manifest, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["file", "kind", "true_class", *meta])
        for row in version.stimuli:
            key = str(row["key"])
            target = _inside(manifest.parent, key, "stimulus")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(package / "materials" / "stimuli" / key, target)
            values = row.get("meta") or {}
            writer.writerow([key, row["kind"], _cell(row.get("true_class")),
                             *(_cell(values.get(k)) for k in meta)])
    shutil.copytree(package, out / ORIGINAL)
    replication = ReplicationSettings.model_validate({
        "package": ORIGINAL, "version": version.version_hash, "design_hash": version.design_hash,
        "bounds": dict(bounds) if bounds else "original_ci"})
    spec.update(slug=slug, platform=platform, completion=dict(completion),
                replication=replication.model_dump())
    path = out / "experiment.toml"
    header = (f"# A replication of version {version.version_hash[:12]} of the published study "
              f"{version.spec.get('slug')!r} (humanlike replicate).\n# Its design (everything "
              f"but {', '.join(DESIGN_EXCLUDED)}) is the original's: design hash "
              f"{version.design_hash}.\n# The platform is this study's own; withheld from the "
              f"package: {', '.join(version.withheld) or 'nothing'}.\n\n")
    path.write_text(header + tomli_w.dumps(_without_none(spec)), encoding="utf-8")
    return path

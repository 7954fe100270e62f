"""A Dataverse installation's native API (https://guides.dataverse.org/en/latest/api/native-api.html):
a draft dataset created in a collection (``POST /api/dataverses/$ALIAS/datasets`` with the citation
metadata block and a licence), its files added one at a time as ``multipart/form-data`` with a
``jsonData`` part (``POST /api/datasets/:persistentId/add?persistentId=$PID``: ``directoryLabel``
keeps the Psych-DS folders, ``tabIngest`` false keeps each CSV as published), read back
(``GET /api/datasets/:persistentId/?persistentId=$PID``), a stale file deleted
(``DELETE /api/files/$ID``) and the dataset published only when asked
(``POST /api/datasets/:persistentId/actions/:publish?persistentId=$PID&type=major``).
Authentication: the API token in the ``X-Dataverse-key`` header. A ``.zip`` upload would be
unpacked by Dataverse, so the stimuli travel as ``.tar.gz``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import httpx

from humanlike.analysis.psychds.deposit.package import DepositError, DepositFile, DepositMetadata

TOKEN_VARIABLE = "DATAVERSE_TOKEN"
FILE_LIMIT = 1000
"""Files added to one dataset in one go: the installations' default upload limit
(``:MultipleUploadFilesLimit``); an installation may set its own (``--deposit-limit``)."""
TRANSPORT: httpx.BaseTransport | None = None
"""The transport clients are built with (None: the network); tests put a fake here."""

LICENSES = {"CC0-1.0": "CC0 1.0", "CC-BY-4.0": "CC BY 4.0", "CC-BY-SA-4.0": "CC BY-SA 4.0",
            "CC-BY-NC-4.0": "CC BY-NC 4.0", "ODC-By-1.0": "ODC-By 1.0", "PDDL-1.0": "PDDL 1.0"}
"""SPDX identifier -> the licence's name as Dataverse installations list it (CC0 1.0 and CC BY 4.0
ship with Dataverse; an installation adds others through its licences API)."""


def _field(name: str, value: Any, kind: str = "primitive", multiple: bool = False) -> dict:
    return {"typeName": name, "typeClass": kind, "multiple": multiple, "value": value}


def citation_block(meta: DepositMetadata) -> dict[str, Any]:
    """The citation block's fields: title, author, datasetContact, dsDescription, subject,
    keyword, publication (related identifiers) and notesText (the package version)."""
    if not meta.contact_email:
        raise ValueError("Dataverse needs a contact e-mail for the dataset: give an author an "
                         "'email' in CITATION.cff or pass --contact-email")
    fields = [
        _field("title", meta.title),
        _field("author", [{"authorName": _field("authorName", c["name"]),
                           **({"authorAffiliation": _field("authorAffiliation", c["affiliation"])}
                              if c.get("affiliation") else {})}
                          for c in meta.creators], "compound", True),
        _field("datasetContact", [{"datasetContactEmail": _field("datasetContactEmail",
                                                                 meta.contact_email)}],
               "compound", True),
        _field("dsDescription", [{"dsDescriptionValue": _field("dsDescriptionValue",
                                                               meta.description)}],
               "compound", True),
        _field("subject", ["Social Sciences"], "controlledVocabulary", True),
        _field("notesText", f"Package version {meta.version} (humanlike publish)."),
    ]
    if meta.keywords:
        fields.append(_field("keyword", [{"keywordValue": _field("keywordValue", k)}
                                         for k in meta.keywords], "compound", True))
    if meta.related:
        fields.append(_field("publication", [
            {"publicationIDType": _field("publicationIDType", r["scheme"],
                                         "controlledVocabulary"),
             "publicationIDNumber": _field("publicationIDNumber", r["identifier"]),
             "publicationRelationType": _field("publicationRelationType",
                                               r["relation"][0].upper() + r["relation"][1:],
                                               "controlledVocabulary")}
            for r in meta.related], "compound", True))
    return {"displayName": "Citation Metadata", "fields": fields}


def dataset_version(meta: DepositMetadata) -> dict[str, Any]:
    """The ``datasetVersion`` object a dataset is created with."""
    from humanlike.analysis.psychds.dataset import LICENSES as URLS

    return {"datasetVersion": {
        "license": {"name": LICENSES.get(meta.license, meta.license),
                    "uri": URLS.get(meta.license, meta.license)},
        "metadataBlocks": {"citation": citation_block(meta)}}}


class Dataverse:
    """One deposit's requests to a Dataverse installation, into the collection ``collection``."""

    name = "dataverse"
    title = "Dataverse"
    folders = True
    """A file's folder travels as its ``directoryLabel`` (Native API guide, "Add a File")."""

    def __init__(self, token: str, base_url: str, collection: str,
                 transport: httpx.BaseTransport | None = None, timeout: float = 120.0,
                 limit: int = FILE_LIMIT):
        self.base_url = base_url.rstrip("/")
        self.collection = collection
        self.limit = limit
        self.client = httpx.Client(base_url=self.base_url, transport=transport or TRANSPORT,
                                   headers={"X-Dataverse-key": token}, timeout=timeout)

    def _call(self, method: str, url: str, expect: tuple[int, ...], **kwargs: Any) -> httpx.Response:
        try:
            response = self.client.request(method, url, **kwargs)
        except httpx.HTTPError as exc:
            raise DepositError(f"Dataverse {method} {url}: {exc}") from None
        if response.status_code not in expect:
            raise DepositError(f"Dataverse {method} {response.request.url.path}: HTTP "
                               f"{response.status_code} {response.text[:300]}")
        return response

    def draft_files(self, draft: Mapping[str, Any]) -> dict[str, dict[str, Any]] | None:
        """The draft's files (path -> md5 and file id); None when the dataset no longer exists."""
        response = self._call("GET", "/api/datasets/:persistentId/", (200, 404),
                              params={"persistentId": draft["persistentId"]})
        if response.status_code == 404:
            return None
        latest = response.json()["data"]["latestVersion"]
        if latest.get("versionState") != "DRAFT":
            raise DepositError(f"Dataverse dataset {draft['persistentId']} has no draft "
                               f"(its latest version is {latest.get('versionState')})")
        files = {}
        for item in latest.get("files", []):
            data = item["dataFile"]
            name = "/".join(p for p in (item.get("directoryLabel"), item["label"]) if p)
            md5 = data.get("md5") or (data.get("checksum") or {}).get("value")
            files[name] = {"md5": md5, "id": data["id"]}
        return files

    def create(self, meta: DepositMetadata) -> dict[str, Any]:
        """A new draft dataset in the collection: its id and persistent id."""
        body = self._call("POST", f"/api/dataverses/{self.collection}/datasets", (201,),
                          json=dataset_version(meta)).json()
        return {"id": body["data"]["id"], "persistentId": body["data"]["persistentId"]}

    def update_metadata(self, draft: Mapping[str, Any], meta: DepositMetadata) -> None:
        self._call("PUT", "/api/datasets/:persistentId/versions/:draft", (200,),
                   params={"persistentId": draft["persistentId"]},
                   json=dataset_version(meta)["datasetVersion"])

    def upload(self, draft: Mapping[str, Any], file: DepositFile) -> str:
        """Add ``file`` under its folder; the md5 Dataverse recorded."""
        data = {"directoryLabel": file.folder, "restrict": "false", "tabIngest": "false",
                "description": f"sha256 {file.sha256}"}
        body = self._call("POST", "/api/datasets/:persistentId/add", (200,),
                          params={"persistentId": draft["persistentId"]},
                          files={"file": (file.filename, file.data, "application/octet-stream")},
                          data={"jsonData": json.dumps(data)}).json()
        added = body["data"]["files"][0]["dataFile"]
        return str(added.get("md5") or (added.get("checksum") or {}).get("value"))

    def delete(self, draft: Mapping[str, Any], name: str, present: Mapping[str, Any]) -> None:
        self._call("DELETE", f"/api/files/{present['id']}", (200, 204))

    def publish(self, draft: Mapping[str, Any]) -> dict[str, Any]:
        """Publish the dataset as a major version: its persistent id."""
        self._call("POST", "/api/datasets/:persistentId/actions/:publish", (200, 202),
                   params={"persistentId": draft["persistentId"], "type": "major"})
        return {"doi": draft["persistentId"]}

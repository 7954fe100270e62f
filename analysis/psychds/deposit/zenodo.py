"""Zenodo's deposit REST API (https://developers.zenodo.org, "Deposit" and "Deposition files"):
a draft deposition (``POST /api/deposit/depositions``), its metadata
(``PUT /api/deposit/depositions/:id``), files streamed into the draft's bucket
(``PUT <links.bucket>/<name>``, the files API that takes up to 50 GB a file, where the form upload
took 100 MB), a stale file removed (``DELETE /api/deposit/depositions/:id/files/:file_id``) and the
draft published only when asked (``POST .../actions/publish``). Authentication: a personal access
token (scopes ``deposit:write`` and ``deposit:actions``) as ``Authorization: Bearer``. A record holds
at most 100 files (Zenodo's help, "Upload limits").

A record's files have no folders: the deposit API passes a file name through ``secure_filename``,
which strips any path (zenodo/zenodo#1089, open since 2017: "allow users to provide file
structure"), and since Zenodo moved to InvenioRDM a file whose key holds a ``/`` cannot be
downloaded (``/api/records/:id/files/<key>/content`` answers 404: zenodo/zenodo#2479). So the
Psych-DS folder goes to Zenodo as one archive beside the files a reader opens first
(:func:`~humanlike.analysis.psychds.deposit.package.flat_files`), and the record's description says
how to unpack it."""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import httpx

from humanlike.analysis.psychds.deposit.package import (
    DepositError,
    DepositFile,
    DepositMetadata,
    unpack_note,
)

BASE_URL = "https://zenodo.org"
"""The service; ``https://sandbox.zenodo.org`` is its test instance (another token)."""
FILE_LIMIT = 100
"""Files one Zenodo record takes."""
TOKEN_VARIABLE = "ZENODO_TOKEN"
TRANSPORT: httpx.BaseTransport | None = None
"""The transport clients are built with (None: the network); tests put a fake here."""


def zenodo_license(spdx: str) -> str:
    """Zenodo's licence id: the SPDX identifier in lower case ('CC-BY-4.0' -> 'cc-by-4.0')."""
    return spdx.lower()


def zenodo_metadata(meta: DepositMetadata) -> dict[str, Any]:
    """The deposition's ``metadata`` object (the documented fields: upload_type, title, creators,
    description, access_right, license, keywords, version, publication_date, related_identifiers);
    the description (HTML) ends with how to unpack the deposited folder."""
    record: dict[str, Any] = {
        "upload_type": "dataset",
        "title": meta.title,
        "creators": [{k: v for k, v in c.items() if k in ("name", "affiliation", "orcid")}
                     for c in meta.creators],
        "description": f"<p>{html.escape(meta.description)}</p>\n<p>{html.escape(unpack_note())}</p>",
        "access_right": "open",
        "license": zenodo_license(meta.license),
        "keywords": meta.keywords,
        "version": meta.version,
        "related_identifiers": [{"identifier": r["identifier"], "relation": r["relation"]}
                                for r in meta.related],
    }
    if meta.date:
        record["publication_date"] = meta.date
    return record


class Zenodo:
    """One deposit's requests to Zenodo; every answer is checked for its documented status."""

    name = "zenodo"
    title = "Zenodo"
    limit = FILE_LIMIT
    folders = False
    """File names hold no folders (see the module's docstring)."""

    def __init__(self, token: str, base_url: str = BASE_URL,
                 transport: httpx.BaseTransport | None = None, timeout: float = 120.0):
        self.base_url = base_url.rstrip("/")
        self.client = httpx.Client(base_url=self.base_url, transport=transport or TRANSPORT,
                                   headers={"Authorization": f"Bearer {token}"}, timeout=timeout)

    def _call(self, method: str, url: str, expect: tuple[int, ...], **kwargs: Any) -> httpx.Response:
        try:
            response = self.client.request(method, url, **kwargs)
        except httpx.HTTPError as exc:
            raise DepositError(f"Zenodo {method} {url}: {exc}") from None
        if response.status_code not in expect:
            raise DepositError(f"Zenodo {method} {response.request.url.path}: HTTP "
                               f"{response.status_code} {response.text[:300]}")
        return response

    def draft_files(self, draft: Mapping[str, Any]) -> dict[str, dict[str, str]] | None:
        """The draft's files (name -> md5 and file id); None when the draft no longer exists."""
        response = self._call("GET", f"/api/deposit/depositions/{draft['id']}", (200, 404, 410))
        if response.status_code != 200:
            return None
        if response.json().get("state") == "done":  # Zenodo: "done" = the deposition is published
            raise DepositError(f"Zenodo deposition {draft['id']} is already published")
        listing = self._call("GET", f"/api/deposit/depositions/{draft['id']}/files", (200,)).json()
        return {f["filename"]: {"md5": f["checksum"].removeprefix("md5:"), "id": f["id"]}
                for f in listing}

    def create(self, meta: DepositMetadata) -> dict[str, Any]:
        """A new draft with its metadata: its id and bucket link."""
        body = self._call("POST", "/api/deposit/depositions", (201,),
                          json={"metadata": zenodo_metadata(meta)}).json()
        return {"id": body["id"], "bucket": body["links"]["bucket"]}

    def update_metadata(self, draft: Mapping[str, Any], meta: DepositMetadata) -> None:
        self._call("PUT", f"/api/deposit/depositions/{draft['id']}", (200,),
                   json={"metadata": zenodo_metadata(meta)})

    def upload(self, draft: Mapping[str, Any], file: DepositFile) -> str:
        """Stream ``file`` into the bucket; the md5 Zenodo computed."""
        body = self._call("PUT", f"{draft['bucket']}/{quote(file.name)}", (200, 201),
                          content=file.data,
                          headers={"Content-Type": "application/octet-stream"}).json()
        return str(body["checksum"]).removeprefix("md5:")

    def delete(self, draft: Mapping[str, Any], name: str, present: Mapping[str, Any]) -> None:
        self._call("DELETE", f"/api/deposit/depositions/{draft['id']}/files/{present['id']}",
                   (204,))

    def publish(self, draft: Mapping[str, Any]) -> dict[str, Any]:
        """Publish the draft: its DOI and record link."""
        body = self._call("POST", f"/api/deposit/depositions/{draft['id']}/actions/publish",
                          (202,)).json()
        return {"doi": body.get("doi"), "record": body.get("links", {}).get("record_html")
                or body.get("links", {}).get("html")}

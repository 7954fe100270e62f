"""A fake of Zenodo's deposit REST API as an ``httpx.MockTransport`` handler, written from its
documentation (https://developers.zenodo.org: "Deposit" - create, retrieve, update, publish a
deposition; "Deposition files" - list, delete; the bucket files API "PUT <links.bucket>/<filename>"
of the Quickstart; "Authentication": ``Authorization: Bearer <ACCESS_TOKEN>``; the deposition
metadata table: upload_type, title, creators ("Family name, Given names"), description,
access_right, license, keywords, version, publication_date, related_identifiers with their
relation vocabulary) and Zenodo's help on upload limits (100 files in a record).

A file name holds no folder: Zenodo's deposit passes names through ``secure_filename``, which strips
any path (zenodo/zenodo#1089, "deposit: allow users to provide file structure for upload", open),
and on today's InvenioRDM-based Zenodo a key with ``/`` (sent as ``%2F``) is stored but its
content URL answers 404 (zenodo/zenodo#2479, "Failed to access file content with '/' in file
name", open). Either way the folder is lost; this fake refuses such a key (400, a violation) so
that a client relying on folders fails its test instead of publishing a record nobody can unpack.

Every request is checked; a request the documentation does not allow is answered as Zenodo would
(4xx) and recorded in :attr:`FakeZenodo.violations`, which a test asserts is empty. A planned 503
(:attr:`FakeZenodo.fail`) stands for a server that stops answering halfway, a 'lost' answer for a
connection that drops after the server acted."""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from typing import Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

RELATIONS = Literal[
    "isCitedBy", "cites", "isSupplementTo", "isSupplementedBy", "isContinuedBy", "continues",
    "isDescribedBy", "describes", "hasMetadata", "isMetadataFor", "isNewVersionOf",
    "isPreviousVersionOf", "isPartOf", "hasPart", "isReferencedBy", "references",
    "isDocumentedBy", "documents", "isCompiledBy", "compiles", "isVariantFormOf",
    "isOriginalFormOf", "isIdenticalTo", "isAlternateIdentifier", "isReviewedBy", "reviews",
    "isDerivedFrom", "isSourceOf", "requires", "isRequiredBy", "isObsoletedBy", "obsoletes"]


class Creator(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[^,]+, [^,]+$|^[^,]+$")
    affiliation: str | None = None
    orcid: str | None = Field(default=None, pattern=r"^\d{4}-\d{4}-\d{4}-\d{3}[\dX]$")
    gnd: str | None = None


class Related(BaseModel):
    model_config = ConfigDict(extra="forbid")
    identifier: str = Field(min_length=1)
    relation: RELATIONS
    resource_type: str | None = None


class Metadata(BaseModel):
    """The deposition metadata fields humanlike sends, with the documented constraints."""

    model_config = ConfigDict(extra="forbid")
    upload_type: Literal["publication", "poster", "presentation", "dataset", "image", "video",
                         "software", "lesson", "physicalobject", "other"]
    title: str = Field(min_length=1)
    creators: list[Creator] = Field(min_length=1)
    description: str = Field(min_length=1)
    access_right: Literal["open", "embargoed", "restricted", "closed"]
    license: str = Field(pattern=r"^[a-z0-9.\-]+$")
    keywords: list[str] = []
    version: str | None = None
    publication_date: str | None = Field(default=None, pattern=r"^\d{4}-\d{2}-\d{2}$")
    related_identifiers: list[Related] = []


class FakeZenodo:
    """Zenodo at ``base_url`` for one user with ``token``; depositions kept in memory."""

    def __init__(self, token: str = "zenodo-token", base_url: str = "https://zenodo.test",
                 file_limit: int = 100):
        self.token, self.base_url, self.file_limit = token, base_url, file_limit
        self.depositions: dict[int, dict[str, Any]] = {}
        self.buckets: dict[str, int] = {}
        self.violations: list[str] = []
        self.requests: list[tuple[str, str]] = []
        self.fail: dict[tuple[str, int], int | str] = {}
        """(route, n-th such request) -> status answered instead, or 'lost': served but the
        answer never arrives (once)."""
        self._ids = itertools.count(1001)
        self._counts: dict[str, int] = {}

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)

    def drafts(self) -> list[dict[str, Any]]:
        return [d for d in self.depositions.values() if not d["submitted"]]

    def _refuse(self, status: int, message: str) -> httpx.Response:
        self.violations.append(message)
        return httpx.Response(status, json={"status": status, "message": message})

    def __call__(self, request: httpx.Request) -> httpx.Response:
        method, path = request.method, request.url.path
        self.requests.append((method, path))
        if not str(request.url).startswith(self.base_url):
            return self._refuse(404, f"{request.url} is not on {self.base_url}")
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return self._refuse(401, f"{method} {path}: no 'Authorization: Bearer <token>'")
        for pattern, route in ROUTES:
            match = re.fullmatch(pattern, f"{method} {path}")
            if match:
                self._counts[route] = self._counts.get(route, 0) + 1
                planned = self.fail.pop((route, self._counts[route]), None)
                if planned == "lost":  # the request is served, its answer never arrives
                    getattr(self, route)(request, *match.groups())
                    raise httpx.ReadTimeout("no answer", request=request)
                if planned:
                    return httpx.Response(planned, text="Service Unavailable")
                return getattr(self, route)(request, *match.groups())
        return self._refuse(404, f"{method} {path}: not an endpoint of the deposit API")

    def _json(self, request: httpx.Request) -> Any:
        if request.headers.get("Content-Type", "").split(";")[0] != "application/json":
            raise ValueError(f"{request.method} {request.url.path}: Content-Type is not "
                             "application/json")
        return json.loads(request.content or b"{}")

    def _metadata(self, request: httpx.Request) -> dict[str, Any] | httpx.Response:
        try:
            body = self._json(request)
            if set(body) - {"metadata"}:
                raise ValueError(f"unknown keys {sorted(set(body) - {'metadata'})}")
            return Metadata(**body.get("metadata", {})).model_dump(exclude_none=True) \
                if "metadata" in body else {}
        except (ValueError, ValidationError) as exc:
            return self._refuse(400, f"{request.method} {request.url.path}: {exc}")

    def _view(self, dep: dict[str, Any]) -> dict[str, Any]:
        api = f"{self.base_url}/api/deposit/depositions/{dep['id']}"
        return {"id": dep["id"], "submitted": dep["submitted"], "metadata": dep["metadata"],
                "state": "done" if dep["submitted"] else "unsubmitted", "doi": dep.get("doi", ""),
                "links": {"self": api, "publish": f"{api}/actions/publish", "files": f"{api}/files",
                          "bucket": f"{self.base_url}/api/files/{dep['bucket']}",
                          "html": f"{self.base_url}/deposit/{dep['id']}",
                          "record_html": f"{self.base_url}/records/{dep['id']}"}}

    def _find(self, id_: str) -> dict[str, Any] | None:
        return self.depositions.get(int(id_))

    def create(self, request: httpx.Request) -> httpx.Response:
        metadata = self._metadata(request)
        if isinstance(metadata, httpx.Response):
            return metadata
        dep_id = next(self._ids)
        bucket = hashlib.sha1(str(dep_id).encode()).hexdigest()[:16]
        self.buckets[bucket] = dep_id
        self.depositions[dep_id] = {"id": dep_id, "submitted": False, "metadata": metadata,
                                    "bucket": bucket, "files": {}}
        return httpx.Response(201, json=self._view(self.depositions[dep_id]))

    def retrieve(self, request: httpx.Request, id_: str) -> httpx.Response:
        dep = self._find(id_)
        return httpx.Response(200, json=self._view(dep)) if dep else httpx.Response(404)

    def update(self, request: httpx.Request, id_: str) -> httpx.Response:
        dep = self._find(id_)
        if dep is None:
            return httpx.Response(404)
        metadata = self._metadata(request)
        if isinstance(metadata, httpx.Response):
            return metadata
        if dep["submitted"]:
            return self._refuse(400, "a published deposition is edited only after actions/edit")
        dep["metadata"] = metadata
        return httpx.Response(200, json=self._view(dep))

    def list_files(self, request: httpx.Request, id_: str) -> httpx.Response:
        dep = self._find(id_)
        if dep is None:
            return httpx.Response(404)
        return httpx.Response(200, json=[
            {"id": f["id"], "filename": name, "filesize": len(f["data"]),
             "checksum": hashlib.md5(f["data"]).hexdigest()} for name, f in dep["files"].items()])

    def delete_file(self, request: httpx.Request, id_: str, file_id: str) -> httpx.Response:
        dep = self._find(id_)
        name = next((n for n, f in (dep or {}).get("files", {}).items() if f["id"] == file_id),
                    None)
        if dep is None or name is None:
            return self._refuse(404, f"DELETE of file {file_id}, which deposition {id_} lacks")
        if dep["submitted"]:
            return self._refuse(403, "files of a published deposition cannot be deleted")
        del dep["files"][name]
        return httpx.Response(204)

    def put_object(self, request: httpx.Request, bucket: str, key: str) -> httpx.Response:
        dep = self.depositions.get(self.buckets.get(bucket, -1))
        if dep is None:
            return self._refuse(404, f"PUT into bucket {bucket}, which does not exist")
        if request.headers.get("Content-Type") != "application/octet-stream":
            return self._refuse(400, f"PUT {key}: the files API takes the raw bytes "
                                     "(application/octet-stream)")
        if dep["submitted"]:
            return self._refuse(403, "the bucket of a published deposition is locked")
        name = key
        if "/" in name or "\\" in name:
            return self._refuse(400, f"PUT {key!r}: a Zenodo file name holds no folders "
                                     "(zenodo/zenodo#1089, #2479)")
        if name not in dep["files"] and len(dep["files"]) >= self.file_limit:
            return self._refuse(400, f"a record holds at most {self.file_limit} files")
        data = request.content
        dep["files"][name] = {"id": hashlib.sha1(name.encode()).hexdigest()[:12], "data": data}
        return httpx.Response(201, json={"key": name, "size": len(data),
                                         "checksum": f"md5:{hashlib.md5(data).hexdigest()}",
                                         "mimetype": "application/octet-stream"})

    def publish(self, request: httpx.Request, id_: str) -> httpx.Response:
        dep = self._find(id_)
        if dep is None:
            return httpx.Response(404)
        if not dep["files"] or not dep["metadata"]:
            return self._refuse(400, "publishing needs files and the required metadata")
        dep["submitted"], dep["doi"] = True, f"10.5281/zenodo.{dep['id']}"
        return httpx.Response(202, json=self._view(dep))


ROUTES = [
    (r"POST /api/deposit/depositions", "create"),
    (r"GET /api/deposit/depositions/(\d+)", "retrieve"),
    (r"PUT /api/deposit/depositions/(\d+)", "update"),
    (r"GET /api/deposit/depositions/(\d+)/files", "list_files"),
    (r"DELETE /api/deposit/depositions/(\d+)/files/([\w-]+)", "delete_file"),
    (r"PUT /api/files/([\w-]+)/(.+)", "put_object"),
    (r"POST /api/deposit/depositions/(\d+)/actions/publish", "publish"),
]

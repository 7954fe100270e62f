"""A fake of a Dataverse installation's native API as an ``httpx.MockTransport`` handler, written
from the API guide (https://guides.dataverse.org/en/latest/api/native-api.html: "Create a Dataset
in a Dataverse Collection" with a ``datasetVersion`` holding the citation block's required fields
title, author, datasetContact, dsDescription and subject, and a licence the installation lists;
"Get JSON Representation of a Dataset" by ``:persistentId``; "Update Metadata For a Dataset";
"Add a File to a Dataset" as multipart/form-data with ``file`` and a ``jsonData`` part
(description, directoryLabel, categories, restrict, tabIngest); "Delete a File"; "Publish a
Dataset" with ``type=major|minor``; "Authentication": the ``X-Dataverse-key`` header).

Every request is checked; one the guide does not allow is answered with Dataverse's error shape
(``{"status": "ERROR", "message": ...}``) and recorded in :attr:`FakeDataverse.violations`, which a
test asserts is empty. A planned 503 (:attr:`FakeDataverse.fail`) stands for a server that stops
answering halfway."""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import re
from typing import Any

import httpx
from werkzeug.wrappers import Request

REQUIRED_CITATION = {"title", "author", "datasetContact", "dsDescription", "subject"}
JSON_DATA_KEYS = {"description", "directoryLabel", "categories", "restrict", "tabIngest",
                  "forceReplace", "provFreeForm", "fileToReplaceId"}
LICENSES = {"CC0 1.0", "CC BY 4.0"}
"""The licences a Dataverse installation lists out of the box."""


class FakeDataverse:
    """A Dataverse installation at ``base_url`` with one collection ``collection``."""

    def __init__(self, token: str = "dataverse-token", base_url: str = "https://dataverse.test",
                 collection: str = "lab", licenses: set[str] = LICENSES):
        self.token, self.base_url, self.collection = token, base_url, collection
        self.licenses = licenses
        self.datasets: dict[str, dict[str, Any]] = {}
        self.violations: list[str] = []
        self.requests: list[tuple[str, str]] = []
        self.fail: dict[tuple[str, int], int] = {}
        self._ids = itertools.count(501)
        self._counts: dict[str, int] = {}

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)

    def drafts(self) -> list[dict[str, Any]]:
        return [d for d in self.datasets.values() if d["state"] == "DRAFT"]

    def _refuse(self, status: int, message: str) -> httpx.Response:
        self.violations.append(message)
        return httpx.Response(status, json={"status": "ERROR", "message": message})

    def __call__(self, request: httpx.Request) -> httpx.Response:
        method, path = request.method, request.url.path
        self.requests.append((method, path))
        if not str(request.url).startswith(self.base_url):
            return self._refuse(404, f"{request.url} is not on {self.base_url}")
        if request.headers.get("X-Dataverse-key") != self.token:
            return self._refuse(401, f"{method} {path}: no valid X-Dataverse-key header")
        for pattern, route in ROUTES:
            match = re.fullmatch(pattern, f"{method} {path}")
            if match:
                self._counts[route] = self._counts.get(route, 0) + 1
                planned = self.fail.pop((route, self._counts[route]), None)
                if planned:
                    return httpx.Response(planned, text="Service Unavailable")
                return getattr(self, route)(request, *match.groups())
        return self._refuse(404, f"{method} {path}: not an endpoint of the native API")

    def _dataset(self, request: httpx.Request) -> dict[str, Any] | httpx.Response:
        pid = request.url.params.get("persistentId")
        if not pid:
            return self._refuse(400, f"{request.url.path}: no persistentId query parameter")
        dataset = self.datasets.get(pid)
        if dataset is None:
            return httpx.Response(404, json={"status": "ERROR",
                                             "message": f"Dataset with Persistent ID {pid} not found."})
        return dataset

    def _version(self, request: httpx.Request, body: Any) -> str | None:
        """What is wrong with a ``datasetVersion`` object (None when nothing)."""
        if request.headers.get("Content-Type", "").split(";")[0] != "application/json":
            return "Content-Type is not application/json"
        if not isinstance(body, dict):
            return "the body is not a datasetVersion object"
        license_ = body.get("license") or {}
        if license_.get("name") not in self.licenses:
            return f"license {license_.get('name')!r} is not one this installation lists"
        fields = body.get("metadataBlocks", {}).get("citation", {}).get("fields", [])
        names = {f.get("typeName") for f in fields}
        if REQUIRED_CITATION - names:
            return f"citation fields missing: {sorted(REQUIRED_CITATION - names)}"
        for f in fields:
            if set(f) != {"typeName", "typeClass", "multiple", "value"}:
                return f"field {f.get('typeName')}: keys {sorted(f)}"
            if f["typeClass"] not in ("primitive", "compound", "controlledVocabulary"):
                return f"field {f['typeName']}: typeClass {f['typeClass']}"
            if f["multiple"] != isinstance(f["value"], list):
                return f"field {f['typeName']}: 'multiple' does not match its value"
        return None

    def create(self, request: httpx.Request, alias: str) -> httpx.Response:
        if alias != self.collection:
            return self._refuse(404, f"no collection {alias}")
        body = json.loads(request.content or b"null")
        problem = self._version(request, (body or {}).get("datasetVersion"))
        if problem:
            return self._refuse(400, f"create dataset: {problem}")
        dataset_id = next(self._ids)
        pid = f"doi:10.5072/FK2/{dataset_id:06d}"
        self.datasets[pid] = {"id": dataset_id, "persistentId": pid, "state": "DRAFT",
                              "version": body["datasetVersion"], "files": []}
        return httpx.Response(201, json={"status": "OK",
                                         "data": {"id": dataset_id, "persistentId": pid}})

    def get(self, request: httpx.Request) -> httpx.Response:
        dataset = self._dataset(request)
        if isinstance(dataset, httpx.Response):
            return dataset
        files = [{"label": f["label"], "directoryLabel": f["directoryLabel"], "restricted": False,
                  "dataFile": {"id": f["id"], "filename": f["label"], "md5": f["md5"],
                               "checksum": {"type": "MD5", "value": f["md5"]},
                               "filesize": len(f["data"])}} for f in dataset["files"]]
        return httpx.Response(200, json={"status": "OK", "data": {
            "id": dataset["id"], "persistentUrl": f"https://doi.org/{dataset['persistentId'][4:]}",
            "latestVersion": {"versionState": dataset["state"], "files": files,
                              **dataset["version"]}}})

    def update(self, request: httpx.Request) -> httpx.Response:
        dataset = self._dataset(request)
        if isinstance(dataset, httpx.Response):
            return dataset
        body = json.loads(request.content or b"null")
        problem = self._version(request, body)
        if problem:
            return self._refuse(400, f"update metadata: {problem}")
        dataset["version"] = body
        return httpx.Response(200, json={"status": "OK", "data": {"id": dataset["id"]}})

    def add(self, request: httpx.Request) -> httpx.Response:
        dataset = self._dataset(request)
        if isinstance(dataset, httpx.Response):
            return dataset
        if dataset["state"] != "DRAFT":
            return self._refuse(400, "files are added to a draft")
        content_type = request.headers.get("Content-Type", "")
        if not content_type.startswith("multipart/form-data"):
            return self._refuse(400, "add: the body is not multipart/form-data")
        form = Request.from_values(input_stream=io.BytesIO(request.content),
                                   content_length=len(request.content),
                                   content_type=content_type, method="POST")
        upload = form.files.get("file")
        if upload is None or not upload.filename:
            return self._refuse(400, "add: no 'file' part with a file name")
        try:
            data_json = json.loads(form.form.get("jsonData", "{}"))
        except ValueError:
            return self._refuse(400, "add: 'jsonData' is not JSON")
        if set(data_json) - JSON_DATA_KEYS:
            return self._refuse(400, f"add: unknown jsonData keys {sorted(set(data_json) - JSON_DATA_KEYS)}")
        folder = data_json.get("directoryLabel", "")
        if not re.fullmatch(r"[\w\-. /]*", folder):
            return self._refuse(400, f"add: directoryLabel {folder!r} has characters Dataverse refuses")
        if upload.filename.endswith(".zip"):
            return self._refuse(400, "add: a .zip would be unpacked into its files")
        if any(f["label"] == upload.filename and f["directoryLabel"] == folder
               for f in dataset["files"]):
            return self._refuse(400, f"add: {folder}/{upload.filename} is already in the dataset")
        data = upload.read()
        record = {"id": next(self._ids), "label": upload.filename, "directoryLabel": folder,
                  "md5": hashlib.md5(data).hexdigest(), "data": data,
                  "tabIngest": data_json.get("tabIngest")}
        dataset["files"].append(record)
        return httpx.Response(200, json={"status": "OK", "data": {"files": [{
            "label": record["label"], "directoryLabel": folder,
            "dataFile": {"id": record["id"], "md5": record["md5"],
                         "checksum": {"type": "MD5", "value": record["md5"]}}}]}})

    def delete_file(self, request: httpx.Request, file_id: str) -> httpx.Response:
        for dataset in self.datasets.values():
            for f in dataset["files"]:
                if str(f["id"]) == file_id and dataset["state"] == "DRAFT":
                    dataset["files"].remove(f)
                    return httpx.Response(200, json={"status": "OK", "data": {}})
        return self._refuse(404, f"DELETE of file {file_id}, which no draft holds")

    def publish(self, request: httpx.Request) -> httpx.Response:
        dataset = self._dataset(request)
        if isinstance(dataset, httpx.Response):
            return dataset
        if request.url.params.get("type") not in ("major", "minor"):
            return self._refuse(400, "publish: type must be major or minor")
        dataset["state"] = "RELEASED"
        return httpx.Response(200, json={"status": "OK", "data": {"id": dataset["id"]}})


ROUTES = [
    (r"POST /api/dataverses/([\w-]+)/datasets", "create"),
    (r"GET /api/datasets/:persistentId/", "get"),
    (r"PUT /api/datasets/:persistentId/versions/:draft", "update"),
    (r"POST /api/datasets/:persistentId/add", "add"),
    (r"DELETE /api/files/(\d+)", "delete_file"),
    (r"POST /api/datasets/:persistentId/actions/:publish", "publish"),
]

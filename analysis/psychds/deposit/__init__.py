"""Depositing a published dataset with a data repository (Zenodo, Dataverse): a draft first, its
files (under their paths where the service keeps folders, else the folder as one archive) and
metadata, published only when asked; a deposit that stops halfway resumes from the
state file beside the folder and never opens a second draft (:func:`deposit`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from humanlike.analysis.psychds.deposit.package import (
    FOLDER_ARCHIVE,
    STIMULI_ARCHIVE,
    DepositError,
    DepositFile,
    DepositMetadata,
    DepositState,
    changed,
    deposit_files,
    deposit_metadata,
    flat_files,
    load_state,
    package_digest,
    save_state,
    state_path,
)

__all__ = ["FOLDER_ARCHIVE", "STIMULI_ARCHIVE", "DepositError", "DepositFile", "DepositMetadata",
           "DepositState", "Service", "deposit", "deposit_files", "deposit_metadata", "flat_files",
           "state_path"]


class Service(Protocol):
    """What :func:`deposit` asks of a repository client (:mod:`.zenodo`, :mod:`.dataverse`)."""

    name: str
    title: str
    limit: int
    base_url: str
    folders: bool
    """Whether the service's file names keep folders (else :func:`flat_files` is deposited)."""

    def draft_files(self, draft: dict[str, Any]) -> dict[str, dict[str, Any]] | None: ...
    def create(self, meta: DepositMetadata) -> dict[str, Any]: ...
    def update_metadata(self, draft: dict[str, Any], meta: DepositMetadata) -> None: ...
    def upload(self, draft: dict[str, Any], file: DepositFile) -> str: ...
    def delete(self, draft: dict[str, Any], name: str, present: dict[str, Any]) -> None: ...
    def publish(self, draft: dict[str, Any]) -> dict[str, Any]: ...


def deposit(root: Path, service: Service, *, release: bool = False,
            contact_email: str | None = None,
            echo: Callable[[str], None] = lambda _: None) -> DepositState:
    """Deposit the published folder ``root``: reuse the draft the state file names (or create
    one), set its metadata, upload the files it lacks (by md5), delete those no longer in the
    folder, and publish it when ``release``. The state is saved after every step; a
    :class:`DepositError` says how far it got, and running again resumes there."""
    pack = deposit_files if service.folders else flat_files
    files = pack(root, service.limit, service.title)
    meta = deposit_metadata(root, contact_email)
    digest = package_digest(files)
    state = load_state(root, service.name, service.base_url, digest)
    path = state_path(root, service.name)
    if state.released:
        if state.package_sha256 != digest:
            raise ValueError(f"{path}: this folder's deposit was published "
                             f"({state.released.get('doi')}) from other files; a new version "
                             "is not made by humanlike: move the state file away to deposit anew")
        echo(f"already published: {state.released.get('doi')}")
        return state
    try:
        present = _draft(root, service, state, meta, echo)
        state.package_sha256 = digest
        names = {f.name for f in files}
        for name, info in present.items():
            if name not in names:
                service.delete(state.draft, name, info)
                state.uploaded.pop(name, None)
                save_state(root, state)
        todo = list(changed(files, {n: i["md5"] for n, i in present.items()}))
        for f in files:
            if f not in todo:
                state.uploaded[f.name] = f.md5
        for number, f in enumerate(todo, 1):
            if f.name in present:
                service.delete(state.draft, f.name, present[f.name])
            md5 = service.upload(state.draft, f)
            if md5 != f.md5:
                raise DepositError(f"{service.title} recorded md5 {md5} for {f.name}, not "
                                   f"{f.md5}: the upload was damaged")
            state.uploaded[f.name] = md5
            save_state(root, state)
            echo(f"uploaded {f.name} ({number}/{len(todo)})")
        if release:
            state.released = service.publish(state.draft)
            save_state(root, state)
            echo(f"published: {state.released.get('doi')}")
        else:
            echo(f"draft {state.draft.get('id')} holds {len(files)} files; review it on "
                 f"{service.title}, then run again with --release to publish it")
    except DepositError as exc:
        raise DepositError(f"{exc}\nthe deposit so far is kept in {path}; run the same command "
                           "again to resume it (the draft is reused, not duplicated)") from None
    return state


def _draft(root: Path, service: Service, state: DepositState, meta: DepositMetadata,
           echo: Callable[[str], None]) -> dict[str, dict[str, Any]]:
    """The files of the draft the state names (its metadata refreshed), or of a new draft."""
    if state.draft.get("pending"):
        raise DepositError(
            f"a request creating a {service.title} draft got no answer, so a draft titled "
            f"{meta.title!r} may exist: delete it on {service.title} (or write its id into "
            f"the state's 'draft'), then remove 'pending' from {state_path(root, service.name)}")
    if state.draft:
        present = service.draft_files(state.draft)
        if present is not None:
            service.update_metadata(state.draft, meta)
            echo(f"resuming draft {state.draft.get('id')} ({len(present)} files there)")
            return present
        echo(f"draft {state.draft.get('id')} no longer exists; creating a new one")
    state.draft, state.uploaded = {"pending": True}, {}
    save_state(root, state)
    try:
        state.draft = service.create(meta)
    except DepositError as exc:
        if "HTTP " in str(exc):  # the service answered: nothing was created
            state.draft = {}
            save_state(root, state)
        raise
    save_state(root, state)
    echo(f"created draft {state.draft.get('id')}")
    return {}

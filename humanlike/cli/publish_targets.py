"""Where ``humanlike publish`` sends a published folder besides ``--out``: a Zenodo or Dataverse
deposit (:mod:`humanlike.analysis.psychds.deposit`) and Brain-Score plugins
(:mod:`humanlike.analysis.benchmark.brainscore`)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

F = Callable[..., Any]


def target_options(command: F) -> F:
    """``--deposit``, ``--release``, ``--deposit-url``, ``--dataverse-collection``,
    ``--contact-email``, ``--deposit-limit`` and ``--brainscore``."""
    options = [
        click.option("--deposit", type=click.Choice(["zenodo", "dataverse"]), default=None,
                     help="Also deposit the folder as a draft with this repository (token from "
                          "ZENODO_TOKEN or DATAVERSE_TOKEN); rerun to resume a deposit."),
        click.option("--release", is_flag=True,
                     help="Publish the deposit's draft (without it the draft waits for review)."),
        click.option("--deposit-url", default=None,
                     help="The repository's address (default: ZENODO_URL or https://zenodo.org; "
                          "DATAVERSE_URL, required for Dataverse)."),
        click.option("--dataverse-collection", default=None,
                     help="The Dataverse collection (alias) to deposit into (DATAVERSE_COLLECTION)."),
        click.option("--contact-email", default=None,
                     help="The dataset's contact (Dataverse asks for one; default: the first "
                          "CITATION.cff author with an email)."),
        click.option("--deposit-limit", type=click.IntRange(min=1), default=None,
                     help="Files the repository takes in one record (Zenodo 100; Dataverse 1000 "
                          "unless the installation says otherwise)."),
        click.option("--brainscore", type=click.Path(file_okay=False, path_type=Path),
                     default=None, help="Also write Brain-Score data and benchmark plugins of "
                                        "the study into this new folder."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def check_targets(out: Path, experiment: str, *, deposit: str | None, release: bool,
                  deposit_url: str | None, dataverse_collection: str | None,
                  contact_email: str | None, deposit_limit: int | None,
                  brainscore: Path | None) -> bool:
    """Refuse bad target options before anything is built; whether ``out`` already holds the
    published folder of ``experiment`` and a target is asked for (then it is sent as it is, so
    an interrupted deposit resumes on the same bytes)."""
    if release and not deposit:
        raise click.BadParameter("--release publishes a deposit; give --deposit too",
                                 param_hint="--release")
    if deposit:
        from humanlike.analysis.psychds.deposit import dataverse, zenodo

        _token(zenodo.TOKEN_VARIABLE if deposit == "zenodo" else dataverse.TOKEN_VARIABLE)
        if deposit == "dataverse" and not ((deposit_url or os.environ.get("DATAVERSE_URL")) and (
                dataverse_collection or os.environ.get("DATAVERSE_COLLECTION"))):
            raise click.BadParameter("Dataverse needs --deposit-url (or DATAVERSE_URL) and "
                                     "--dataverse-collection (or DATAVERSE_COLLECTION)",
                                     param_hint="--deposit")
    if brainscore is not None and brainscore.exists() and (
            not brainscore.is_dir() or any(brainscore.iterdir())):
        raise click.BadParameter(f"{brainscore} exists and is not empty; give a new folder",
                                 param_hint="--brainscore")
    definition = out / "analysis" / "benchmark.json"
    if not (deposit or brainscore) or not (out / "dataset_description.json").is_file() \
            or not definition.is_file():
        return False
    study = json.loads(definition.read_text(encoding="utf-8")).get("study")
    if study != experiment:
        raise click.BadParameter(f"{definition}: field 'study' is {study!r}, not {experiment!r}",
                                 param_hint="--out")
    return True


def send(out: Path, *, deposit: str | None, release: bool, deposit_url: str | None,
         dataverse_collection: str | None, contact_email: str | None,
         deposit_limit: int | None, brainscore: Path | None) -> None:
    """Deposit ``out`` and/or write its Brain-Score plugins, as the options ask."""
    if brainscore is not None:
        from humanlike.analysis.benchmark.brainscore import write_brainscore_plugins

        try:
            plugins = write_brainscore_plugins(out, brainscore)
        except ValueError as exc:
            raise click.ClickException(str(exc)) from None
        click.echo(f"Brain-Score plugins in {brainscore}: {plugins.data_identifier} (data), "
                   f"{plugins.benchmark_identifier} (benchmark, ceiling {plugins.ceiling:.6f})")
    if deposit:
        _deposit(out, deposit, release, deposit_url, dataverse_collection, contact_email,
                 deposit_limit)


def _deposit(out: Path, service_name: str, release: bool, url: str | None,
             collection: str | None, contact: str | None, limit: int | None) -> None:
    from humanlike.analysis.psychds.deposit import DepositError, dataverse, deposit, zenodo

    service: Any
    if service_name == "zenodo":
        token = _token(zenodo.TOKEN_VARIABLE)
        service = zenodo.Zenodo(token, url or os.environ.get("ZENODO_URL") or zenodo.BASE_URL)
        if limit:
            service.limit = limit
    else:
        token = _token(dataverse.TOKEN_VARIABLE)
        url = url or os.environ.get("DATAVERSE_URL") or ""
        collection = collection or os.environ.get("DATAVERSE_COLLECTION") or ""
        service = dataverse.Dataverse(token, url, collection,
                                      limit=limit or dataverse.FILE_LIMIT)
    try:
        deposit(out, service, release=release, contact_email=contact, echo=click.echo)
    except (DepositError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None


def _token(variable: str) -> str:
    token = os.environ.get(variable)
    if not token:
        raise click.UsageError(f"set {variable} to the repository's API token (it is read from "
                               "the environment only, never from an option)")
    return token

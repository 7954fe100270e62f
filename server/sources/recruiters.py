"""Register the Prolific and MTurk clients as ``server.actions`` recruiters (from ``create_app``).

A client is built only when its credentials exist: ``PROLIFIC_TOKEN`` in the environment for
Prolific, the standard AWS credential chain for MTurk; otherwise actions change local state only and
say so."""

from __future__ import annotations

import os
from typing import Any

from flask import Flask

from humanlike.server.participants.actions import Recruiter, register_recruiter
from humanlike.server.tables.core import Experiment


def mturk_sandbox(experiment: Experiment) -> bool:
    """Where the experiment's HIT lives: as recorded at creation, else the spec's table (sandbox
    unless it says live)."""
    meta = experiment.recruitment_meta or {}
    if "sandbox" in meta:
        return bool(meta["sandbox"])
    from humanlike.server.study import experiments

    loaded = experiments.registry().get(experiment.slug)
    recruitment = loaded.spec.recruitment if loaded is not None else None
    if recruitment is not None and recruitment.mturk is not None:
        return recruitment.mturk.sandbox
    return True


def prolific_recruiter(experiment: Experiment) -> Recruiter | None:
    if not os.environ.get("PROLIFIC_TOKEN"):
        return None
    from humanlike.server.sources.prolific import ProlificClient, ProlificRecruiter

    return ProlificRecruiter(ProlificClient(), experiment)


def _aws_configured() -> bool:
    """True when AWS credentials are named explicitly (environment or the shared files)."""
    if any(os.environ.get(name) for name in ("AWS_ACCESS_KEY_ID", "AWS_PROFILE",
                                             "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE")):
        return True
    home = os.path.expanduser("~/.aws")
    return os.path.exists(os.path.join(home, "credentials")) or os.path.exists(
        os.path.join(home, "config"))


def mturk_recruiter(experiment: Experiment) -> Recruiter | None:
    """The MTurk client, when this experiment's HIT was made by ``humanlike recruit mturk create``
    or AWS credentials are configured explicitly. Otherwise None, without walking boto's chain
    (whose last step asks the EC2 instance-metadata endpoint over the network)."""
    if experiment.recruitment_ref is None and not _aws_configured():
        return None
    if not os.environ.get("HUMANLIKE_MTURK_ENDPOINT"):
        return None  # MTurk closed on 2026-09-30: local status only unless an endpoint is given
    import boto3

    if boto3.Session().get_credentials() is None:
        return None
    from humanlike.server.sources.mturk import MTurkClient, MTurkRecruiter

    return MTurkRecruiter(MTurkClient(sandbox=mturk_sandbox(experiment)), experiment)


def init_app(app: Flask, **_: Any) -> None:
    """Register both platforms' recruiter factories."""
    register_recruiter("prolific", prolific_recruiter)
    register_recruiter("mturk", mturk_recruiter)

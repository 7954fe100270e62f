"""Locate the shared external data sets used by tests and benchmarks."""

from __future__ import annotations

import os
from pathlib import Path

_REPO_ROOT = Path(__file__).resolve().parent.parent


def shared_data_dir() -> Path:
    """Return the folder holding external reference data (``HUMANLIKE_DATA`` or ``../shared/data``)."""
    candidates = []
    if os.environ.get("HUMANLIKE_DATA"):
        candidates.append(Path(os.environ["HUMANLIKE_DATA"]))
    candidates += [_REPO_ROOT.parent / "shared" / "data", Path("/work/shared/data")]
    for path in candidates:
        if path.is_dir():
            return path
    raise FileNotFoundError(
        "shared reference data not found; set HUMANLIKE_DATA to the folder holding "
        "model-vs-human/ and mlds/ (looked in: " + ", ".join(str(c) for c in candidates) + ")"
    )

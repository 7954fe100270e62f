"""The ``debrief`` trial type: the internal form after the last block when the spec asks debrief
questions; one export row per (participant, question)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from humanlike.server.trial_types.base import Entry, ExportInput, Observer, TrialType

if TYPE_CHECKING:
    import pandas as pd

    from humanlike.server.study.spec import ExperimentSpec


def _validate_debrief(response: dict[str, Any], labels: list[str]) -> str | None:
    answers = response.get("answers")
    if not isinstance(answers, dict) or not all(
        isinstance(v, str) and len(v) <= 5000 for v in answers.values()
    ):
        return "response.answers must map question names to text"
    return None


def debrief_frame(inp: ExportInput) -> pd.DataFrame:
    """Debrief answers, one row per (participant, question)."""
    import pandas as pd

    rows = [
        {"participant": p, "question": q, "answer": a}
        for p, resp in zip(inp.trials["participant"], inp.trials["response"])
        if isinstance(resp, dict) and "answers" in resp
        for q, a in resp["answers"].items()
    ]
    return pd.DataFrame(rows, columns=["participant", "question", "answer"])


def debrief_entry(spec: ExperimentSpec) -> Entry | None:
    """The debrief form after the last block, when the spec asks debrief questions."""
    if not spec.debrief:
        return None
    return {"type": "debrief", "block": "debrief", "practice": False, "is_repeat": False,
            "repeat_of": None}


def simulate_debrief(observer: Observer, entry: Entry, fails_catch: bool) -> dict[str, Any]:
    """The demo's debrief answers."""
    return {"answers": {"strategy": "simulated participant", "problems": "none"}}


DEBRIEF = TrialType(
    name="debrief", validate=_validate_debrief, table="debrief", frame=debrief_frame,
    columns={"participant": "participant id", "question": "question name", "answer": "text"},
    browser=True, internal=True, closing_entry=debrief_entry, seconds_per_trial=60.0,
    simulate=simulate_debrief,
)

"""The ``triad`` trial type (MLDS, Maloney & Yang 2003): every triad of each sequence, the
reference in the centre; exported normalised to s1 < s2 < s3."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from humanlike.server.trial_types.base import Entry, ExportInput, Observer, TrialType
from humanlike.vocabulary import StimulusKind

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from humanlike.server.study.manifest import StimulusRecord
    from humanlike.server.study.spec import Block


def _validate_triad(response: dict[str, Any], labels: list[str]) -> str | None:
    if response.get("choice") not in ("left", "right"):
        return "response.choice must be 'left' or 'right'"
    return None


def triad_frame(inp: ExportInput) -> pd.DataFrame:
    """Triad trials normalised to s1 < s2 < s3; response 1 = s1 judged more similar to s2."""
    import pandas as pd

    tr = inp.trials
    out = tr[inp.columns].reset_index(drop=True)
    design = pd.DataFrame(list(tr["design"]), columns=["sequence", "s1", "s2", "s3", "swapped"])
    out["sequence"] = design["sequence"].astype(str)
    out[["s1", "s2", "s3"]] = design[["s1", "s2", "s3"]].astype(int)
    swapped = design["swapped"].astype(bool).to_numpy()
    chose_left = pd.DataFrame(list(tr["response"]), columns=["choice"])["choice"].eq("left")
    out["response"] = (chose_left.to_numpy() != swapped).astype(int)  # s1 chosen as more similar
    out["swapped"] = swapped
    return out


def triad_trials(block: Block, pool: list[StimulusRecord], rng: np.random.Generator) -> list[Entry]:
    """All C(n,3) triads of every sequence (s1 < s2 < s3, s2 the reference), outer pair in random order."""
    import numpy as np

    from humanlike.stimuli.mlds_design import all_triads

    by_seq: dict[str, dict[int, StimulusRecord]] = defaultdict(dict)
    for rec in pool:
        by_seq[str(rec.meta["sequence"])][int(rec.meta["level"])] = rec
    entries = []
    for seq in sorted(by_seq):
        recs = by_seq[seq]
        levels = np.array(sorted(recs))
        for s1, s2, s3 in levels[all_triads(len(levels)) - 1].tolist():
            entries.append(
                {
                    "type": block.trial_type,
                    "block": block.name,
                    "kind": StimulusKind.MLDS.value,
                    "sequence": seq,
                    "s1": s1,
                    "s2": s2,
                    "s3": s3,
                    "stimuli": [recs[s1].key, recs[s2].key, recs[s3].key],
                }
            )
    swapped = rng.random(len(entries)) < 0.5
    for entry, swap in zip(entries, swapped, strict=True):
        entry["swapped"] = bool(swap)
    return entries


def triad_supply(block: Block, records: Sequence[StimulusRecord]) -> int:
    """Practice triads a triad block can draw: every triad of each sequence of its kinds."""
    levels: dict[str, int] = {}
    for r in records:
        if r.kind in block.kinds:
            seq = str(r.meta.get("sequence"))
            levels[seq] = levels.get(seq, 0) + 1
    return sum(n * (n - 1) * (n - 2) // 6 for n in levels.values())


def check_triad_manifest(block: Block, records: Sequence[StimulusRecord]) -> str | None:
    """Triads need each MLDS stimulus' sequence and level."""
    for r in records:
        if r.kind == StimulusKind.MLDS and not {"sequence", "level"} <= r.meta.keys():
            return f"mlds stimulus {r.key!r} needs columns sequence and level"
    return None


def simulate_triad(observer: Observer, entry: Entry, fails_catch: bool) -> dict[str, Any]:
    """An MLDS observer with its sequence's scale psi and decision noise ``mlds_sigma``."""
    import numpy as np

    from humanlike.analysis.mlds.simulate import simulate_responses

    psi = observer.psi[str(entry["sequence"])]
    trio = np.array([[entry["s1"], entry["s2"], entry["s3"]]])
    chose_s1 = bool(simulate_responses(trio, psi, observer.settings.mlds_sigma,
                                       random_state=observer.rng)[0])
    return {"choice": "left" if chose_s1 != bool(entry["swapped"]) else "right"}


def triad_label(labels: Sequence[str], label: str) -> dict[str, Any]:
    """A triad answered by a label: left for a label at an even position of ``labels``, right for
    an odd one."""
    return {"choice": ("left", "right")[list(labels).index(label) % 2]}


def triad_summary(response: dict[str, Any]) -> str:
    """The triad's answer in words: which outer image was chosen as more similar to the centre."""
    return f"{response.get('choice')} image chosen as more similar"


TRIAD = TrialType(
    name="triad", validate=_validate_triad, table="triads", frame=triad_frame,
    columns={
        "sequence": "MLDS sequence id",
        "s1": "lowest level of the triad (1-based)",
        "s2": "middle level: the reference shown in the centre",
        "s3": "highest level of the triad",
        "response": "1 = pair (s2, s3) judged more different (s1 chosen as more similar to the reference)",
        "swapped": "true when s1 was shown on the right",
    },
    browser=True, designed_trials=triad_trials, seconds_per_trial=3.0,
    practice_supply=triad_supply, check_manifest=check_triad_manifest,
    simulate=simulate_triad, label_answer=triad_label, summary=triad_summary,
)

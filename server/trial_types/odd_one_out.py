"""The ``odd_one_out`` trial type: three images side by side, and the participant picks the one
least like the other two (the THINGS triplet task of Hebart, Zheng, Pereira & Baker 2020 and
Hebart, Contier, Teichmann and colleagues 2023). Every participant answers the same triplets
(drawn once from the block's pool with the block's ``design_seed``), each in an own random
left/middle/right order, so that triplets answered by several people give the noise ceiling
(``analysis/alignment/odd_one_out.py``). Block settings: ``OddOneOutSettings``."""

from __future__ import annotations

from collections.abc import Sequence
from math import comb
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from humanlike.server.trial_types.base import Entry, ExportInput, Observer, TrialType

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from humanlike.server.study.manifest import StimulusRecord
    from humanlike.server.study.spec import Block


POSITIONS = ("left", "middle", "right")
"""Where an image is shown; a response names the position of the odd one out."""

MAX_ALL_TRIPLETS = 2000
"""The most triplets a block takes as "every triplet of the pool" without a ``triplets`` count."""


class OddOneOutSettings(BaseModel):
    """An odd-one-out block's triplet design (the spec's ``[blocks.odd_one_out]``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    triplets: Annotated[int, Field(gt=0, le=100_000)] | None = None
    """Distinct triplets drawn uniformly from the pool's C(n, 3); None: every triplet (at most
    ``MAX_ALL_TRIPLETS``)."""
    design_seed: Annotated[int, Field(ge=0)] = 0
    """Seed of the triplet draw: the same triplets for every participant (their order and the
    positions are each participant's own)."""


def _validate_odd_one_out(response: dict[str, Any], labels: list[str]) -> str | None:
    if response.get("choice") not in POSITIONS:
        return "response.choice must be 'left', 'middle' or 'right' (the position of the odd one out)"
    return None


def odd_one_out_frame(inp: ExportInput) -> pd.DataFrame:
    """Odd-one-out trials: the triplet in key order (``image_1`` < ``image_2`` < ``image_3``, as
    Brain-Score's ``Hebart2023`` assembly names them), the shown order, the chosen position and
    the chosen image's key."""
    import numpy as np
    import pandas as pd

    tr = inp.trials
    out = tr[inp.columns].reset_index(drop=True)
    design = pd.DataFrame(list(tr["design"]), columns=["triplet", "stimuli"])
    shown = np.array(design["stimuli"].tolist(), dtype=object).reshape(-1, 3)
    triplet = np.array(design["triplet"].tolist(), dtype=object).reshape(-1, 3)
    for i in range(3):
        out[f"image_{i + 1}"] = triplet[:, i]
    for i, position in enumerate(POSITIONS):
        out[position] = shown[:, i]
    choice = pd.DataFrame(list(tr["response"]), columns=["choice"])["choice"]
    out["choice"] = choice.to_numpy()
    at = choice.map({p: i for i, p in enumerate(POSITIONS)}).to_numpy(dtype=int)
    out["odd_one_out"] = shown[np.arange(len(shown)), at] if len(shown) else []
    return out


def draw_triplets(n: int, count: int | None, seed: int) -> np.ndarray:
    """(m, 3) 0-based triplets i < j < k of ``n`` items: all C(n, 3) in lexicographic order when
    ``count`` is None, else ``count`` distinct ones drawn uniformly with ``seed`` (in draw order)."""
    import numpy as np

    from humanlike.stimuli.mlds_design import all_triads

    total = comb(n, 3)
    if count is None:
        if total > MAX_ALL_TRIPLETS:
            raise ValueError(f"{n} stimuli make {total} triplets (more than {MAX_ALL_TRIPLETS}): "
                             "set [blocks.odd_one_out] triplets")
        return all_triads(n) - 1
    if count > total:
        raise ValueError(f"odd_one_out.triplets = {count} but {n} stimuli make only {total}")
    rng = np.random.default_rng(seed)
    if count * 2 > total:  # most of them: a subset of all
        every = all_triads(n) - 1
        return every[np.sort(rng.choice(total, size=count, replace=False))]
    found = np.empty((0, 3), dtype=np.int64)
    while len(found) < count:  # rejection rounds (each vectorised): distinct items, new triplets
        draw = np.sort(rng.integers(0, n, size=(2 * count, 3)), axis=1)
        draw = draw[(draw[:, 0] < draw[:, 1]) & (draw[:, 1] < draw[:, 2])]
        both = np.concatenate([found, draw])
        _, first = np.unique(both, axis=0, return_index=True)
        found = both[np.sort(first)]
    return found[:count]


def odd_one_out_trials(block: Block, pool: list[StimulusRecord],
                       rng: np.random.Generator) -> list[Entry]:
    """The block's triplets (the same for every participant, ``draw_triplets``), each in a random
    left/middle/right order drawn from the participant's ``rng``."""
    import numpy as np

    settings = block.odd_one_out or OddOneOutSettings()
    records = sorted(pool, key=lambda r: r.key)
    if len(records) < 3:
        raise ValueError(f"block {block.name!r} needs at least 3 stimuli for a triplet; "
                         f"it has {len(records)}")
    triplets = draw_triplets(len(records), settings.triplets, settings.design_seed)
    order = np.argsort(rng.random(triplets.shape), axis=1)
    shown = np.take_along_axis(triplets, order, axis=1)
    keys = np.array([r.key for r in records], dtype=object)
    kinds = [r.kind for r in records]
    return [{"type": block.trial_type, "block": block.name, "kind": kinds[t[0]],
             "triplet": keys[t].tolist(), "stimuli": keys[s].tolist()}
            for t, s in zip(triplets.tolist(), shown.tolist(), strict=True)]


def odd_one_out_supply(block: Block, records: Sequence[StimulusRecord]) -> int:
    """Practice triplets an odd-one-out block can draw: its triplets (C(n, 3) of its kinds' stimuli,
    or the ``triplets`` count)."""
    settings = block.odd_one_out or OddOneOutSettings()
    n = sum(r.kind in block.kinds for r in records)
    return comb(n, 3) if settings.triplets is None else min(settings.triplets, comb(n, 3))


def check_odd_one_out_block(block: Block, records: Sequence[StimulusRecord]) -> str | None:
    """A triplet block has no single-image catch trials and needs three stimuli of its kinds."""
    if block.catch_trials:
        return (f"block {block.name}: odd_one_out blocks show triplets, not single catch images; "
                "set catch_trials = 0")
    n = sum(r.kind in block.kinds for r in records)
    if n < 3:
        return f"block {block.name}: odd_one_out needs at least 3 stimuli of its kinds; the manifest has {n}"
    return None


def odd_one_out_probabilities(embeddings: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """P(item k is the odd one out) for (..., 3, d) embeddings: softmax over the three pairs of
    dot-product similarity / temperature, item k odd when the other two are the pair chosen
    (the choice rule of Zheng et al. 2019 and Hebart et al. 2020, SPoSE, eq. 1)."""
    import numpy as np

    x = np.asarray(embeddings, dtype=float)
    sim = np.stack([np.einsum("...d,...d->...", x[..., 1, :], x[..., 2, :]),   # pair without 0
                    np.einsum("...d,...d->...", x[..., 0, :], x[..., 2, :]),   # pair without 1
                    np.einsum("...d,...d->...", x[..., 0, :], x[..., 1, :])], axis=-1)
    z = sim / temperature
    z = np.exp(z - z.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


def simulate_odd_one_out(observer: Observer, entry: Entry, fails_catch: bool) -> dict[str, Any]:
    """The observer model's label probabilities as embeddings, the odd one out drawn by the SPoSE
    choice rule (``odd_one_out_probabilities``) at temperature ``noise``; a uniform position with
    probability ``lapse``."""
    import numpy as np

    rng = observer.rng
    if rng.random() < observer.settings.lapse:
        return {"choice": POSITIONS[int(rng.integers(0, 3))]}
    x = np.stack([observer.model_p(str(key)) for key in entry["stimuli"]])
    p = odd_one_out_probabilities(x, max(float(observer.settings.noise), 1e-6))
    return {"choice": POSITIONS[int(rng.choice(3, p=p))]}


def odd_one_out_qc(trials: pd.DataFrame) -> pd.DataFrame:
    """Per participant over the scoring triplets: ``position_bias``, the share of answers at the
    most chosen position (1/3 balanced, 1 a single key), and ``repeat_consistency``, the share of
    repeated triplets (shown again in the same positions) answered at the same position as the
    first time (chance 1/3; NaN without repeats)."""
    import pandas as pd

    from humanlike.server.trial_types.responses import json_values

    scoring = ~trials["practice"].fillna(False).astype(bool).to_numpy()
    rows = trials.loc[scoring, ["participant", "trial_index", "is_repeat", "repeat_of"]].copy()
    responses = pd.Series(json_values(trials.loc[scoring, "response"]), index=rows.index,
                          dtype=object)
    rows["at"] = responses.str.get("choice").map({p: i for i, p in enumerate(POSITIONS)})
    rows = rows.dropna(subset=["at"])
    if rows.empty:
        return pd.DataFrame(columns=["position_bias", "repeat_consistency"])
    counts = pd.crosstab(rows["participant"], rows["at"])
    bias = counts.max(axis=1) / counts.sum(axis=1)
    repeat = rows["is_repeat"].astype(bool).to_numpy()
    firsts = rows.loc[~repeat, ["participant", "trial_index", "at"]]
    again = rows.loc[repeat, ["participant", "repeat_of", "at"]].astype({"repeat_of": "int64"})
    pairs = again.merge(firsts, left_on=["participant", "repeat_of"],
                        right_on=["participant", "trial_index"], suffixes=("", "_first"))
    same = (pairs["at"].to_numpy() == pairs["at_first"].to_numpy()).astype(float)
    consistency = pd.Series(same, index=pairs["participant"]).groupby(level=0).mean()
    out = pd.DataFrame({"position_bias": bias})
    out["repeat_consistency"] = consistency.reindex(out.index).astype(float)
    return out


def odd_one_out_label(labels: Sequence[str], label: str) -> dict[str, Any]:
    """A triplet answered by a label: the position of the label's index modulo 3."""
    return {"choice": POSITIONS[list(labels).index(label) % 3]}


def odd_one_out_summary(response: dict[str, Any]) -> str:
    """The triplet's answer in words: which position was chosen as the odd one out."""
    return f"{response.get('choice')} image chosen as the odd one out"


ODD_ONE_OUT = TrialType(
    name="odd_one_out", validate=_validate_odd_one_out, table="odd_one_out",
    frame=odd_one_out_frame,
    columns={
        "image_1": "first image of the triplet in key order (the triplet's id with image_2, image_3)",
        "image_2": "second image of the triplet in key order",
        "image_3": "third image of the triplet in key order",
        "left": "image shown on the left",
        "middle": "image shown in the middle",
        "right": "image shown on the right",
        "choice": "position chosen as the odd one out: left, middle or right",
        "odd_one_out": "the image chosen as the odd one out (the image at the chosen position)",
    },
    browser=True, designed_trials=odd_one_out_trials, seconds_per_trial=4.0,
    practice_supply=odd_one_out_supply, check_manifest=check_odd_one_out_block,
    settings=("odd_one_out",), simulate=simulate_odd_one_out, label_answer=odd_one_out_label,
    participant_qc=odd_one_out_qc, summary=odd_one_out_summary,
)

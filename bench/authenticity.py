"""Benchmark: the authenticity screen on real human observers and on agents built from them.

Pools: the four model-vs-human experiments in the shared data (edge, silhouette, cue-conflict:
10 observers each; contrast: 4 observers, 8 contrast levels), each with its three models as the
candidate models. In every replication and for every observer s, one pool is screened: all the real
observers plus three agents built from s (``humanlike.analysis.authenticity.agents``): the model
agent (a candidate model answers, s's reaction times resampled), the replay agent (s's answers and
RTs permuted onto the images) and the lazy agent (one fixed class, 450 +- 5 ms). Harder agents are
reported beside them: a model agent with a 25 % lapse into uniform guesses, and a model agent whose
model is not among the candidates (the screen is then screened with the other two models only).
Nothing here was tuned on these data: the reference values are in
``humanlike.analysis.authenticity.reference``.

Prints, per agent type, the share flagged with its binomial standard error, the share of real
observers flagged (over observers x replications, and observers ever flagged), the Clopper-Pearson
95 % upper bound of the per-observer false-positive rate, and seconds per screen; ends with one
JSON line. Run: ``.venv/bin/python bench/authenticity.py [--replications 20]``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time

import numpy as np
import pandas as pd
from joblib import Parallel, delayed
from scipy import stats
from tqdm import tqdm

from humanlike.analysis.authenticity.agents import lazy_agent, model_agent, replay_agent
from humanlike.analysis.authenticity.verdict import ScreenInput, screen
from humanlike.analysis.data_paths import shared_data_dir
from humanlike.analysis.io import read_model_vs_human

POOLS = ("edge", "silhouette", "cue-conflict", "contrast")
LAPSE = 0.25


def load(pool: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The pool's human trials and its models' answers."""
    frame = read_model_vs_human(shared_data_dir() / "model-vs-human" / "raw-data" / pool)
    frame = frame.rename(columns={"observer": "participant"})
    humans = frame[frame["group"] == "human"].reset_index(drop=True)
    models = frame[frame["group"] == "model"].rename(columns={"participant": "model"})
    return humans, models[["model", "stimulus", "response"]].reset_index(drop=True)


def one_pool(pool: str, humans: pd.DataFrame, models: pd.DataFrame, subject: str,
             replication: int) -> list[dict[str, object]]:
    """Screen the real observers with the agents built from ``subject`` in one replication."""
    rng = np.random.default_rng([POOLS.index(pool), replication, int(subject.split("-")[1])])
    names = sorted(models["model"].unique())
    own = humans[humans["participant"] == subject]
    model = names[replication % len(names)]
    classes = sorted(own["category"].astype(str).unique())
    agents = {
        "model": model_agent(own, models[models["model"] == model], "agent:model", rng),
        "model, 25% lapse": model_agent(own, models[models["model"] == model], "agent:lapse", rng,
                                        lapse=LAPSE),
        "replay": replay_agent(own, "agent:replay", rng),
        "lazy": lazy_agent(own, "agent:lazy", classes[replication % len(classes)], rng),
    }
    started = time.perf_counter()
    screened = screen(ScreenInput(pd.concat([humans, *agents.values()], ignore_index=True), models))
    # the same model agent where its model is not a candidate: screened with the other models
    hidden = model_agent(own, models[models["model"] == model], "agent:hidden", rng)
    others = screen(ScreenInput(pd.concat([humans, hidden], ignore_index=True),
                                models[models["model"] != model]))
    seconds = time.perf_counter() - started
    rows = [{"pool": pool, "kind": kind, "who": f"{subject}/{replication}",
             "flagged": screened.loc[agent["participant"].iloc[0], "authenticity"] == "flagged"}
            for kind, agent in agents.items()]
    rows.append({"pool": pool, "kind": "model, not a candidate", "who": f"{subject}/{replication}",
                 "flagged": others.loc["agent:hidden", "authenticity"] == "flagged"})
    if subject == sorted(humans["participant"].unique())[0]:  # each human once per replication
        rows += [{"pool": pool, "kind": "human", "who": person,
                  "flagged": screened.loc[person, "authenticity"] == "flagged",
                  "review": screened.loc[person, "authenticity"] == "review"}
                 for person in sorted(humans["participant"].unique())]
    rows.append({"pool": pool, "kind": "_seconds", "who": "", "flagged": seconds / 2})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replications", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    data = {pool: load(pool) for pool in POOLS}
    tasks = [(pool, subject, r) for pool in POOLS
             for subject in sorted(data[pool][0]["participant"].unique())
             for r in range(args.replications)]
    results = Parallel(n_jobs=args.jobs)(
        delayed(one_pool)(pool, *data[pool], subject, r)
        for pool, subject, r in tqdm(tasks, desc="pools screened", file=sys.stderr))
    frame = pd.DataFrame([row for rows in results for row in rows])
    seconds = frame.loc[frame["kind"] == "_seconds", "flagged"].astype(float)
    frame = frame[frame["kind"] != "_seconds"]
    print(f"authenticity screen, {args.replications} replications, pools {', '.join(POOLS)} "
          f"(python {platform.python_version()}, {platform.machine()})")
    print(f"{'who':28s} {'n':>6s} {'flagged':>8s} {'SE':>7s}")
    summary: dict[str, object] = {}
    for kind, group in frame.groupby("kind", sort=False):
        share = float(group["flagged"].mean())
        se = float(np.sqrt(share * (1 - share) / len(group)))
        print(f"{kind:28s} {len(group):6d} {share:8.3f} {se:7.3f}")
        summary[kind] = {"n": len(group), "flagged": share, "se": se}
        if kind != "human":
            by_pool = group.groupby("pool")["flagged"].mean().round(3).to_dict()
            print(f"{'':28s} by pool: {by_pool}")
    humans = frame[frame["kind"] == "human"]
    people = humans.assign(person=humans["pool"] + "/" + humans["who"]).groupby("person")
    ever = int(people["flagged"].any().sum())
    n_people = int(people.ngroups)
    upper = float(stats.beta.ppf(0.95, ever + 1, n_people - ever))
    reviewed = float(humans["review"].astype(bool).mean())
    print(f"real observers ever flagged: {ever} of {n_people}; 95% upper bound of the per-observer "
          f"false-positive rate {upper:.3f} (Clopper-Pearson); share marked review {reviewed:.3f}")
    print(f"seconds per screen of a pool: median {seconds.median():.3f}, max {seconds.max():.3f}")
    summary.update({"humans_ever_flagged": ever, "n_humans": n_people, "fpr_upper95": upper,
                    "human_review_share": reviewed, "seconds_per_screen": float(seconds.median())})
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())

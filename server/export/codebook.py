"""Descriptions of every exported column (written as codebook.json next to the data); each trial
type's own columns come from its registry entry (``trial_types``)."""

from humanlike.analysis.authenticity.verdict import COLUMNS as AUTHENTICITY_COLUMNS
from humanlike.server.lifecycle import ParticipantStatus
from humanlike.server.participants.display import CALIBRATION_COLUMNS, TIMING_COLUMNS
from humanlike.server.platforms import Exit, Platform
from humanlike.server.study.settings import ADAPTIVE_EXPORT_COLUMNS as _ADAPTIVE_COLUMNS
from humanlike.server.study.settings import ADAPTIVE_TRIAL_COLUMNS
from humanlike.server.trial_types.registry import TRIAL_TYPES
from humanlike.vocabulary import STIMULUS_KINDS

_KINDS = " | ".join(STIMULUS_KINDS)

TRIAL_COLUMNS = {
    "experiment": "experiment slug",
    "participant": "participant id (random, not the platform id)",
    "platform_id": "Prolific PID, MTurk worker id, or local-<id>",
    "condition": "counterbalancing condition",
    "trial_index": "position in the participant's timeline (0-based); unique per participant",
    "trial_type": "",  # the registered types, filled in by codebook()
    "block": "block name from the spec (practice trials too: see practice)",
    "practice": "true for practice trials (exclude from analyses)",
    "stimulus": "stimulus id: file path relative to the manifest (triads: the reference image)",
    "stimulus_kind": _KINDS,
    "is_repeat": "true when the trial repeats an earlier one for reliability",
    "repeat_of": "trial_index of the first presentation (repeats only)",
    "rt_ms": "reaction time: stimulus onset to submit, ms (rAF/performance.now clock)",
    "first_rt_ms": "stimulus onset to the first change of a rating, ms (rating trials)",
    "presented_ms": "measured on-screen duration from requestAnimationFrame timestamps, ms",
    "frames": "number of display frames the stimulus was on screen",
    "client_time": "browser clock when the trial ended, ms since the Unix epoch",
    "server_time": "server time (UTC, ISO 8601) when the trial was stored",
}
PARTICIPANT_COLUMNS = {
    "experiment": "experiment slug",
    "participant": "participant id",
    "platform": " | ".join(Platform),
    "platform_id": "Prolific PID, MTurk worker id, or local-<id>",
    "study_id": "Prolific STUDY_ID or MTurk HIT id",
    "session_id": "Prolific SESSION_ID or MTurk assignment id",
    "condition": "counterbalancing condition",
    "spec_version": "hash of the spec version the participant was allocated under and served "
                    "to the end (the spec_version table holds each version's spec and texts)",
    "status": " | ".join(ParticipantStatus),
    "simulated": "true for a rehearsal participant (humanlike simulate): recorded by the server at "
                 "arrival when the study's rehearsal key verified; not analysed unless the spec's "
                 "[exclusion] analyse_simulated or the analyses' --include-simulated asks for it",
    "seed": "seed the participant's timeline was generated from",
    "created_at": "arrival time (UTC)",
    "started_at": "first stored trial (UTC)",
    "completed_at": "completion time (UTC)",
    "duration_s": "completed_at - created_at, seconds",
    "refresh_hz": "display refresh rate measured at the start",
    "user_agent": "browser User-Agent; empty unless [privacy] store_user_agent (see stored)",
    "n_trials": "number of trials in the timeline (psiTurk participants: trial records stored)",
    "psiturk_mode": "psiTurk participants only: debug | sandbox | live",
    **_ADAPTIVE_COLUMNS,
    "n_stored": "number of trials stored",
    "completion_code": "completion code shown or sent to the platform (an exit's own code where "
                       "the participant left by a declared exit)",
    "outcome": "how the participant left the study: " + " | ".join(Exit) + " (empty: still under "
               "way, timed out or returned on the platform); each exit's platform code or credit is "
               "the spec's [completion.exits] (docs/recruitment.md)",
    "bonus": "bonus paid",
    "n_blur": "number of window blur events (the participant switched to another window)",
    "n_hidden": "number of visibility events with state hidden (tab hidden or minimised)",
    "n_fullscreen_exit": "number of exits from fullscreen",
    "n_rating_trials": "rating trials (practice excluded) behind the QC columns",
    "missing_share": "share of rating trials unanswered or faster than min_trial_rt_ms",
    "catch_accuracy": "share of catch trials whose highest rating is the true class (ties count as wrong)",
    "natural_accuracy": "share of natural-image trials whose highest rating is the true class",
    "n_natural": "natural-image trials behind natural_accuracy",
    "median_rt_ms": "median reaction time over rating trials",
    "repeat_reliability": "Pearson r between first and repeated rating vectors",
    "repeat_n": "number of (stimulus, category) pairs behind repeat_reliability",
    "all_zero_share": "share of natural-image rating trials rated 0 for every category",
    "identical_run_share": "longest run of consecutive rating trials with the same rating of every "
                           "category, as a share of the participant's rating trials",
    "completion_s": "completion time used by the completion-time rules (= duration_s)",
    "excluded": "true when any exclusion rule of the spec fails",
    "exclusion_reasons": "';'-separated reasons for exclusion",
    **AUTHENTICITY_COLUMNS,
    "analysed": "true when the participant is in every analysis: finished, not rejected, not "
                "excluded (QC or researcher); returned / timed-out / quit-early participants only "
                "with the spec's analyse_partial_data (humanlike.analysis.sample)",
    "analysed_reason": "why not analysed (returned | timed out | quit early | in progress | rejected | "
                       "the exclusion reasons | no trials | simulated), or a researcher's "
                       "inclusion, or 'simulated: analysed (a rehearsal)' with the spec's "
                       "analyse_simulated",
}
STIMULUS_COLUMNS = {
    "stimulus": "stimulus id (file path relative to the manifest)",
    "kind": _KINDS,
    "true_class": "true category (natural and catch images)",
    "sha256": "sha256 of the file",
}
EVENT_COLUMNS = {
    "experiment": "experiment slug",
    "participant": "participant id",
    "type": "blur | focus | visibility | resize | fullscreen_enter | fullscreen_exit | error | "
            "environment | input (the page's input provenance since the last one: trusted and "
            "synthetic key and pointer events, clicks, clicks without pointer movement, pastes, "
            "navigator.webdriver) | resume | resume_policy (a return under the spec's resume policy) | "
            "stale_trial (a trial answered before its block restarted, sent afterwards: kept "
            "here, not as an answer) | lock_reset (humanlike reset-lock: the next session id "
            "may resume this participant) | preview (the logged-in researcher's own try of a "
            "study link, marked simulated at arrival; value: user_id and the kind of link)",
    "value": "event details (JSON)",
    "client_time": "browser clock, ms since the Unix epoch",
    "server_time": "server time (UTC, ISO 8601)",
}


def codebook() -> dict[str, dict[str, str]]:
    """Column descriptions per exported file."""
    public = [t for t in TRIAL_TYPES.values() if not t.internal]
    internal = [t for t in TRIAL_TYPES.values() if t.internal]
    trials = dict(TRIAL_COLUMNS, trial_type=" | ".join(TRIAL_TYPES))
    return {
        "trials": trials,
        **{t.table: {**trials, **t.columns, **(ADAPTIVE_TRIAL_COLUMNS if t.rated else {})}
           for t in public},
        **{d.table: {**trials, **d.columns} for t in public for d in t.derived},
        "participants": PARTICIPANT_COLUMNS,
        "stimuli": STIMULUS_COLUMNS,
        "events": EVENT_COLUMNS,
        "trial_timing": TIMING_COLUMNS,
        "display": CALIBRATION_COLUMNS,
        **{t.table: dict(t.columns) for t in internal},
    }

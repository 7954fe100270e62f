"""Descriptions of every exported column (written as codebook.json next to the data)."""

TRIAL_COLUMNS = {
    "experiment": "experiment slug",
    "participant": "participant id (random, not the platform id)",
    "platform_id": "Prolific PID, MTurk worker id, or local-<id>",
    "condition": "counterbalancing condition",
    "trial_index": "position in the participant's timeline (0-based); unique per participant",
    "trial_type": "rating | triad | classification | debrief",
    "block": "block name from the spec (<block>-practice for practice trials)",
    "practice": "true for practice trials (exclude from analyses)",
    "stimulus": "stimulus id: file path relative to the manifest (triads: the reference image)",
    "stimulus_kind": "natural | controversial | mlds | catch",
    "is_repeat": "true when the trial repeats an earlier one for reliability",
    "repeat_of": "trial_index of the first presentation (repeats only)",
    "rt_ms": "reaction time: stimulus onset to submit, ms (rAF/performance.now clock)",
    "first_rt_ms": "stimulus onset to the first change of a rating, ms (rating trials)",
    "presented_ms": "measured on-screen duration from requestAnimationFrame timestamps, ms",
    "frames": "number of display frames the stimulus was on screen",
    "client_time": "browser clock when the trial ended, ms since the Unix epoch",
    "server_time": "server time (UTC, ISO 8601) when the trial was stored",
}
RATING_COLUMNS = {
    "category": "category label rated in this row",
    "rating": "rating of the category: 0, .25, .5, .75 or 1",
}
TRIAD_COLUMNS = {
    "sequence": "MLDS sequence id",
    "s1": "lowest level of the triad (1-based)",
    "s2": "middle level: the reference shown in the centre",
    "s3": "highest level of the triad",
    "response": "1 = pair (s2, s3) judged more different (s1 chosen as more similar to the reference)",
    "swapped": "true when s1 was shown on the right",
}
CLASSIFICATION_COLUMNS = {
    "response": "chosen category",
    "category": "true category",
    "correct": "response == category",
}
PARTICIPANT_COLUMNS = {
    "experiment": "experiment slug",
    "participant": "participant id",
    "platform": "local | prolific | mturk",
    "platform_id": "Prolific PID, MTurk worker id, or local-<id>",
    "study_id": "Prolific STUDY_ID or MTurk HIT id",
    "session_id": "Prolific SESSION_ID or MTurk assignment id",
    "condition": "counterbalancing condition",
    "status": "allocated | consented | started | completed | submitted | approved | rejected | returned | quit_early | timed_out",
    "seed": "seed the participant's timeline was generated from",
    "created_at": "arrival time (UTC)",
    "started_at": "first stored trial (UTC)",
    "completed_at": "completion time (UTC)",
    "duration_s": "completed_at - created_at, seconds",
    "refresh_hz": "display refresh rate measured at the start",
    "user_agent": "browser User-Agent",
    "n_trials": "number of trials in the timeline",
    "n_stored": "number of trials stored",
    "completion_code": "completion code shown or sent to the platform",
    "bonus": "bonus paid",
    "n_rating_trials": "rating trials (practice excluded) behind the QC columns",
    "missing_share": "share of rating trials unanswered or faster than min_trial_rt_ms",
    "catch_accuracy": "share of catch trials whose highest rating is the true class (ties count as wrong)",
    "natural_accuracy": "share of natural-image trials whose highest rating is the true class",
    "n_natural": "natural-image trials behind natural_accuracy",
    "median_rt_ms": "median reaction time over rating trials",
    "repeat_reliability": "Pearson r between first and repeated rating vectors",
    "repeat_n": "number of (stimulus, category) pairs behind repeat_reliability",
    "all_zero_share": "share of natural-image rating trials rated 0 for every category",
    "completion_s": "completion time used by the completion-time rules (= duration_s)",
    "excluded": "true when any exclusion rule of the spec fails",
    "exclusion_reasons": "';'-separated reasons for exclusion",
}
STIMULUS_COLUMNS = {
    "stimulus": "stimulus id (file path relative to the manifest)",
    "kind": "natural | controversial | mlds | catch",
    "true_class": "true category (natural and catch images)",
    "sha256": "sha256 of the file",
}
EVENT_COLUMNS = {
    "experiment": "experiment slug",
    "participant": "participant id",
    "type": "blur | focus | visibility | resize | fullscreen_enter | fullscreen_exit | error | environment",
    "value": "event details (JSON)",
    "client_time": "browser clock, ms since the Unix epoch",
    "server_time": "server time (UTC, ISO 8601)",
}


def codebook() -> dict[str, dict[str, str]]:
    """Column descriptions per exported file."""
    return {
        "trials": TRIAL_COLUMNS,
        "ratings": {**TRIAL_COLUMNS, **RATING_COLUMNS},
        "triads": {**TRIAL_COLUMNS, **TRIAD_COLUMNS},
        "classifications": {**TRIAL_COLUMNS, **CLASSIFICATION_COLUMNS},
        "participants": PARTICIPANT_COLUMNS,
        "stimuli": STIMULUS_COLUMNS,
        "events": EVENT_COLUMNS,
        "debrief": {"participant": "participant id", "question": "question name", "answer": "text"},
    }

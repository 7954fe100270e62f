"""psiTurk's participant-facing errors: the names and numbers its ``error.html`` shows (psiTurk 3.3.1's
``ExperimentError``), rendered with the project's own ``error.html``."""

from __future__ import annotations

from typing import Any

#: name -> (error number as psiTurk numbers it, HTTP status we answer with, description)
ERRORS: dict[str, tuple[int, int, str]] = {
    "status_incorrectly_set": (1000, 409, "The participant's recorded status does not allow this page."),
    "hit_assign_worker_id_not_set_in_mturk": (1001, 400, "The ad needs hitId and assignmentId in its URL."),
    "hit_assign_worker_id_not_set_in_consent": (
        1002, 400, "The consent page needs hitId, assignmentId and workerId in its URL."),
    "hit_assign_worker_id_not_set_in_exp": (
        1003, 400, "The experiment page needs hitId, assignmentId, workerId and mode in its URL."),
    "hit_assign_appears_in_database_more_than_once": (
        1004, 409, "This assignment is recorded more than once."),
    "already_started_exp": (1008, 403, "This experiment was started before and ended early; it cannot be restarted."),
    "already_started_exp_mturk": (1009, 403, "This experiment was started before; the ad cannot start it again."),
    "already_did_exp_hit": (1010, 403, "This worker has already taken part in this experiment."),
    "tried_to_quit": (1011, 404, "Leaving the experiment could not be recorded."),
    "intermediate_save": (1012, 500, ""),
    "improper_inputs": (1013, 400, "The uniqueId is required but was not given."),
    "browser_type_not_allowed": (1014, 403, "This browser is not allowed by this experiment."),
    "api_server_not_reachable": (1015, 503, ""),
    "ad_not_found": (1016, 404, ""),
    "error_setting_worker_complete": (1017, 404, "Completing the experiment could not be recorded."),
    # humanlike's: /complete from a browser that did not start the task (no write cookie)
    "complete_from_another_browser": (
        1017, 403, "Completing the experiment could not be recorded: this browser did not start it."),
    "hit_not_registered_with_ad_server": (1018, 404, ""),
    "template_unsafe": (1019, 400, ""),
    "insert_mode_failed": (1020, 500, "The consent page has no link to carry the mode along."),
    "page_not_found": (404, 404, "The requested page does not exist."),
    "in_debug": (2005, 400, ""),
    "unknown_error": (9999, 500, ""),
}


class ExperimentError(Exception):
    """A psiTurk participant error (``ExperimentError('already_started_exp')``), shown as error.html."""

    def __init__(self, value: str) -> None:
        super().__init__(value)
        self.value = value if value in ERRORS else "unknown_error"
        self.errornum, self.status, self.errordesc = ERRORS[self.value]

    def __str__(self) -> str:
        return repr(self.value)


class ExperimentApiError(Exception):
    """A JSON error of a psiTurk route: ``{"message": ...}`` with a status code."""

    def __init__(self, message: str, status_code: int = 500, payload: dict[str, Any] | None = None):
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.payload = payload

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.payload or ())
        out["message"] = self.message
        return out


class InvalidUsageError(ExperimentApiError):
    """A 400 JSON error (psiTurk's name for it)."""

    def __init__(self, message: str, status_code: int = 400, payload: dict[str, Any] | None = None):
        super().__init__(message, status_code, payload)


InvalidUsage = InvalidUsageError  # psiTurk 2's name, still used by old custom.py files

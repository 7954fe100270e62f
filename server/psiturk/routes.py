"""The psiTurk 3 participant protocol (blueprint ``psiturk``): ``/ad`` and ``/pub``, ``/consent``,
``/exp``, ``/inexp``, ``GET``/``PUT /sync/<uniqueId>``, ``/quitter``, ``/complete``,
``/worker_complete``, ``/worker_submitted``, ``/check_worker_status``, ``/static/js/psiturk.js`` and
the project's templates served as files. Prolific entry maps ``PROLIFIC_PID``, ``STUDY_ID`` and
``SESSION_ID`` onto workerId, hitId and assignmentId.

Query parameters only ever reach templates as variables, never as template source (psiTurk #517)."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from flask import (
    Blueprint,
    Response,
    current_app,
    jsonify,
    redirect,
    request,
    send_from_directory,
    session,
)
from jinja2 import Environment
from werkzeug.exceptions import NotFound

from humanlike.server.database import write_lock
from humanlike.server.extensions import db
from humanlike.server.participants.tokens import token_matches
from humanlike.server.platforms import Platform, completion_code
from humanlike.server.psiturk import participants as pp
from humanlike.server.psiturk.errors import ExperimentApiError, ExperimentError
from humanlike.server.psiturk.modes import MTURK_MODES, Mode
from humanlike.server.psiturk.project import PsiturkProject
from humanlike.server.tables.core import utcnow
from humanlike.server.tables.psiturk import (
    BlobError,
    PsiturkAssignment,
    blob,
    fallback_blob,
    store_blob,
)

bp = Blueprint("psiturk", __name__)

#: the largest PUT /sync body (psiTurk resends the whole blob: long tasks reach megabytes)
MAX_BLOB_BYTES = 32 * 1024 * 1024
PROLIFIC_URL = "https://app.prolific.com/submissions/complete?cc={code}"
_MOBILE = re.compile(r"Mobi|Android|iPhone|iPod|Windows Phone", re.IGNORECASE)
_TABLET = re.compile(r"iPad|Tablet|Android(?!.*Mobi)|Kindle|Silk", re.IGNORECASE)
_BOT = re.compile(r"bot|crawl|spider|slurp|HeadlessChrome/0", re.IGNORECASE)


@dataclass
class PsiturkState:
    """What the routes need: the project, its template environment and its experiment row id."""

    project: PsiturkProject
    env: Environment
    get_condition: Any = None
    _experiment_id: int | None = None

    @property
    def experiment_id(self) -> int:
        """The project's experiment row (created on the first request, after the migrations)."""
        if self._experiment_id is None:
            self._experiment_id = pp.project_experiment(self.project).id
        return self._experiment_id


def state() -> PsiturkState:
    return current_app.extensions["psiturk"]  # type: ignore[no-any-return]


def render(name: str, source: str | None = None, status: int = 200, **context: Any) -> Response:
    """Render a project template (or ``source``, a template's text) with psiTurk's variables."""
    env = state().env
    template = env.from_string(source) if source is not None else env.get_template(name)
    return Response(template.render(**context), status=status, mimetype="text/html")


def nocache(response: Any) -> Any:
    response.headers["Cache-Control"] = "no-cache, no-store, must-revalidate"
    response.headers["Pragma"] = "no-cache"
    response.headers["Expires"] = "0"
    return response


def insert_mode(page: str) -> str:
    """psiTurk's ``insert_mode``: ``&mode={{ mode }}`` after the last ``workerId={{ workerid }}``."""
    at = page.rfind("workerId={{ workerid }}")
    if at < 0:
        raise ExperimentError("insert_mode_failed")
    end = at + len("workerId={{ workerid }}")
    return page[:end] + "&mode={{ mode }}" + page[end:]


def handle_experiment_error(exc: ExperimentError) -> Response:
    """The project's error.html with psiTurk's number and description."""
    current_app.logger.warning("psiturk error %s (%s) %s", exc.value, exc.errornum, dict(request.args))
    args = request.args
    return nocache(render(
        "error.html", status=exc.status, errornum=exc.errornum, errordesc=exc.errordesc,
        contact_address=state().project.contact_email, hitId=args.get("hitId"),
        assignId=args.get("assignmentId"), workerId=args.get("workerId")))


def handle_api_error(exc: ExperimentApiError) -> Response:
    response = jsonify(exc.to_dict())
    response.status_code = exc.status_code
    return response


@bp.after_request
def _headers(response: Response) -> Response:
    """psiTurk pages run inline scripts and handlers: only framing and plugins are restricted."""
    config = current_app.config
    response.headers.setdefault(
        "Content-Security-Policy",
        f"object-src 'none'; frame-ancestors 'self' {config['FRAME_ANCESTORS']}")
    return response


def _ids() -> tuple[str | None, str | None, str | None, bool]:
    """(hitId, assignmentId, workerId, from Prolific): psiTurk's names or Prolific's."""
    args = request.args
    if "PROLIFIC_PID" in args:
        return args.get("STUDY_ID"), args.get("SESSION_ID"), args.get("PROLIFIC_PID"), True
    return args.get("hitId"), args.get("assignmentId"), args.get("workerId"), False


def _prolific_key(worker_id: str, assignment_id: str) -> str:
    return "psiturk_prolific:" + hashlib.sha256(f"{worker_id}:{assignment_id}".encode()).hexdigest()[:16]


def _token_cookie(uniqueid: str) -> str:
    return "psiturk_" + hashlib.sha256(uniqueid.encode()).hexdigest()[:16]


def browser_excluded(rules: tuple[str, ...], agent: str) -> bool:
    """psiTurk's ``browser_exclude_rule``: device words (mobile, tablet, touchcapable, pc, bot),
    safari (not Chrome), or any other text found in the User-Agent."""
    mobile, tablet = bool(_MOBILE.search(agent)), bool(_TABLET.search(agent))
    for rule in rules:
        word = rule.lower()
        if word == "mobile" and mobile and not tablet:
            return True
        if word == "tablet" and tablet:
            return True
        if word == "touchcapable" and (mobile or tablet):
            return True
        if word == "pc" and not (mobile or tablet) and not _BOT.search(agent):
            return True
        if word == "bot" and _BOT.search(agent):
            return True
        if word == "safari":
            if "Safari" in agent and "Chrome" not in agent:
                return True
        elif word not in ("mobile", "tablet", "touchcapable", "pc", "bot") and rule in agent:
            return True
    return False


def _assignment(**where: Any) -> PsiturkAssignment | None:
    stmt = sa.select(PsiturkAssignment).where(
        PsiturkAssignment.experiment_id == state().experiment_id,
        *[getattr(PsiturkAssignment, k) == v for k, v in where.items()])
    return db.session.execute(stmt).scalars().first()


def _by_uniqueid(uniqueid: str) -> PsiturkAssignment | None:
    return _assignment(uniqueid=uniqueid)


def _worker_assignments(worker_id: str) -> list[PsiturkAssignment]:
    return list(db.session.execute(sa.select(PsiturkAssignment).where(
        PsiturkAssignment.experiment_id == state().experiment_id,
        PsiturkAssignment.workerid == worker_id)).scalars())


@bp.route("/")
def index() -> Response:
    if (state().project.templates / "default.html").is_file():
        return nocache(render("default.html"))
    raise NotFound()


@bp.route("/favicon.ico")
def favicon() -> Response:
    return send_from_directory(state().project.static, "favicon.ico")


@bp.route("/static/js/psiturk.js")
def psiturk_js() -> Response:
    """humanlike's own psiturk.js (psiTurk's API; tasks do not ship it)."""
    response = current_app.send_static_file("psiturk/psiturk.js")
    response.headers["Cache-Control"] = "no-cache"
    return response


@bp.route("/check_worker_status")
def check_worker_status() -> Response:
    if "workerId" not in request.args:
        return jsonify(status="bad request")
    worker_id = request.args["workerId"]
    if state().project.allow_repeats:
        found = _assignment(workerid=worker_id, assignmentid=request.args.get("assignmentId", ""))
        status = found.status if found else pp.NOT_ACCEPTED
    else:
        matches = _worker_assignments(worker_id)
        status = max((m.status for m in matches), default=pp.NOT_ACCEPTED)
    return jsonify(status=status)


@bp.route("/ad")
@bp.route("/pub")
def advertisement() -> Response:
    """The ad: a preview before the HIT is accepted, the start button after, the submit form
    (MTurk) or the completion redirect (Prolific) once the task is complete."""
    project = state().project
    if browser_excluded(project.browser_exclude_rule, request.user_agent.string):
        raise ExperimentError("browser_type_not_allowed")
    hit_id, assignment_id, worker_id, prolific = _ids()
    if hit_id is None or assignment_id is None:
        raise ExperimentError("hit_assign_worker_id_not_set_in_mturk")
    mode = request.args.get("mode", Mode.LIVE)
    debug = hit_id.startswith("debug")
    if prolific and worker_id:
        session[_prolific_key(worker_id, assignment_id)] = True
    already = False
    if worker_id is not None:
        already = any(a.assignmentid != assignment_id for a in _worker_assignments(worker_id))
    part = (_assignment(hitid=hit_id, assignmentid=assignment_id, workerid=worker_id)
            if worker_id is not None else None)
    status = part.status if part else None
    if status in (pp.STARTED, pp.QUITEARLY) and not debug:
        raise ExperimentError("already_started_exp_mturk")
    if status == pp.COMPLETED or (status == pp.SUBMITTED and not already):
        assert part is not None
        if part.participant.platform == Platform.PROLIFIC.value:
            return nocache(redirect(PROLIFIC_URL.format(code=completion_code(part.participant))))
        return nocache(render("thanks-mturksubmit.html", using_sandbox=(mode == Mode.SANDBOX),
                              hitid=hit_id, assignmentid=assignment_id, workerid=worker_id))
    if already and not (debug or project.allow_repeats):
        raise ExperimentError("already_did_exp_hit")
    if status == pp.ALLOCATED or not status or debug:
        source = insert_mode(_template_text("ad.html"))
        return nocache(render("ad.html", source, mode=mode, hitid=hit_id,
                              assignmentid=assignment_id, workerid=worker_id))
    raise ExperimentError("status_incorrectly_set")


def _template_text(name: str) -> str:
    return (state().project.templates / name).read_text(encoding="utf-8")


@bp.route("/consent")
def give_consent() -> Response:
    hit_id, assignment_id, worker_id, prolific = _ids()
    if hit_id is None or assignment_id is None or worker_id is None:
        raise ExperimentError("hit_assign_worker_id_not_set_in_consent")
    if prolific:
        session[_prolific_key(worker_id, assignment_id)] = True
    source = insert_mode(_template_text("consent.html"))
    return nocache(render("consent.html", source, mode=request.args.get("mode", Mode.LIVE),
                          hitid=hit_id, assignmentid=assignment_id, workerid=worker_id))


@bp.route("/exp")
def start_exp() -> Response:
    """The task page: a new participant gets the least-filled condition and counterbalance."""
    hit_id, assignment_id, worker_id, prolific = _ids()
    mode = request.args.get("mode")
    if hit_id is None or assignment_id is None or worker_id is None or mode is None:
        raise ExperimentError("hit_assign_worker_id_not_set_in_exp")
    from humanlike.server.security import is_link_preview

    if is_link_preview(request.method, request.headers.get("User-Agent")):
        raise ExperimentError("browser_type_not_allowed")  # a link preview allocates nobody
    st = state()
    project = st.project
    debug = hit_id.startswith("debug")
    prolific = prolific or bool(session.get(_prolific_key(worker_id, assignment_id)))
    token: str | None = None
    with write_lock():
        try:
            if project.allow_repeats:
                matches = [m for m in _worker_assignments(worker_id) if m.assignmentid == assignment_id]
            else:
                matches = _worker_assignments(worker_id)
            if not matches:
                from humanlike.server.tables.core import Experiment

                exp = db.session.get(Experiment, st.experiment_id)
                assert exp is not None
                if db.session.get_bind().dialect.name == "postgresql":
                    db.session.execute(sa.select(Experiment.id).where(
                        Experiment.id == exp.id).with_for_update())
                if st.get_condition is not None:
                    cond, counter = st.get_condition(mode)
                else:
                    cond, counter = pp.choose_condition(project, exp.id, mode)
                part, token = pp.create_assignment(
                    exp, hit_id=hit_id, assignment_id=assignment_id, worker_id=worker_id,
                    mode=mode, cond=int(cond), counterbalance=int(counter),
                    code_version=project.code_version,
                    platform=pp.platform_of(mode, hit_id, prolific), client=_client())
            else:
                same = [m for m in matches if m.assignmentid == assignment_id]
                if len(same) > 1:
                    raise ExperimentError("hit_assign_appears_in_database_more_than_once")
                if len(same) < len(matches):
                    raise ExperimentError("already_did_exp_hit")
                part = same[0]
                if part.status >= pp.STARTED and not debug:
                    raise ExperimentError("already_started_exp")
                token = _renew_token(part)
            db.session.commit()
        except BaseException:
            db.session.rollback()
            raise
    response = render(
        "exp.html", uniqueId=part.uniqueid, condition=part.cond, counterbalance=part.counterbalance,
        adServerLoc="/complete", mode=mode, contact_address=project.contact_email,
        codeversion=project.code_version)
    # the proof of being this participant: sent by the task page's own requests (/sync, /inexp,
    # /quitter's beacon, /complete), never by another browser (docs/psiturk.md, "Who may call what")
    response.delete_cookie(_token_cookie(part.uniqueid), path="/sync/")  # as issued before issue 25
    response.set_cookie(_token_cookie(part.uniqueid), token, path="/", httponly=True,
                        samesite="Lax", secure=current_app.config["PRODUCTION"])
    return nocache(response)


def _renew_token(part: PsiturkAssignment) -> str:
    from humanlike.server.participants.tokens import hash_token, new_token

    token = new_token()
    part.participant.token_hash = hash_token(token)
    return token


def _client() -> dict[str, str | None]:
    agent = request.user_agent
    return {"ip": request.remote_addr or "UNKNOWN", "browser": agent.browser or "UNKNOWN",
            "platform": agent.platform or "UNKNOWN",
            "language": request.accept_languages.best or "UNKNOWN",
            "user_agent": agent.string[:1000]}


def _proven(part: PsiturkAssignment) -> bool:
    """True when the request carries the participant's write cookie (set by ``/exp``)."""
    token = request.cookies.get(_token_cookie(part.uniqueid))
    if not token:
        return False
    return token_matches(part.participant.token_hash, token)


def _forbidden() -> Response:
    """psiTurk's JSON status answer, refused: the caller is not the participant's browser."""
    response = jsonify(status="forbidden: this browser is not this participant's")
    response.status_code = 403
    return response


def _set_status(part: PsiturkAssignment, code: int, **stamps: Any) -> None:
    with write_lock():
        try:
            part.status = code
            for key, value in stamps.items():
                setattr(part, key, value)
            db.session.commit()
        except BaseException:
            db.session.rollback()
            raise


@bp.route("/inexp", methods=["POST"])
def enterexp() -> Response:
    """The participant left the instructions: from now on the task cannot be restarted."""
    unique_id = request.form.get("uniqueId")
    if unique_id is None:
        raise ExperimentError("improper_inputs")
    part = _by_uniqueid(unique_id)
    if part is None:
        return jsonify(status="error, uniqueId not found")
    if not _proven(part):
        return _forbidden()
    _set_status(part, pp.STARTED, beginexp=utcnow())
    return jsonify(status="success")


def _sync_part(uid: str) -> PsiturkAssignment:
    part = _by_uniqueid(uid)
    if part is None:
        raise ExperimentApiError("DB error: Unique user not found.", 404,
                                 {"error": "not_found", "detail": f"no participant {uid!r}"})
    return part


@bp.route("/sync/<path:uid>", methods=["GET"])
def load(uid: str) -> Response:
    """The stored task data, as psiTurk's blob (the fallback fields before the first save), to the
    participant's own browser only; anyone else gets the same 403 whether or not ``uid`` exists."""
    part = _by_uniqueid(uid) if request.cookies.get(_token_cookie(uid)) else None
    if part is None or not _proven(part):
        raise ExperimentApiError("this browser cannot read this participant's data", 403,
                                 {"error": "forbidden", "detail": "missing or wrong write cookie"})
    data = blob(part)
    return nocache(jsonify(data if data is not None else fallback_blob(part)))


@bp.route("/sync/<path:uid>", methods=["PUT", "POST"])
def update(uid: str) -> Response:
    """Store a save as its increments (POST is the page's unload beacon, text/plain JSON).

    The hot path of a psiTurk task (a save after every trial): one Core SELECT, then the inserts."""
    with db.engine.connect() as conn:
        found = conn.execute(_SYNC_LOOKUP, {"uid": uid, "exp": state().experiment_id}).first()
    if found is None:
        raise ExperimentApiError("DB error: Unique user not found.", 404,
                                 {"error": "not_found", "detail": f"no participant {uid!r}"})
    token = request.cookies.get(_token_cookie(uid))
    if not token or not token_matches(found.token_hash, token):
        raise ExperimentApiError("this browser cannot write this participant's data", 403,
                                 {"error": "forbidden", "detail": "missing or wrong write cookie"})
    request.max_content_length = MAX_BLOB_BYTES
    body = request.get_data(cache=False)
    try:
        payload = json.loads(body)
    except ValueError as exc:
        raise ExperimentApiError("body is not JSON", 400,
                                 {"error": "malformed_json", "detail": str(exc)}) from None
    try:
        store_blob(found.id, payload, seen=(found.trials_seen or 0, found.events_seen or 0),
                   own_connection=True)
    except BlobError as exc:
        raise ExperimentApiError(str(exc), 400, {"error": "invalid_blob", "detail": str(exc)}) from None
    return Response(_SAVED, mimetype="application/json")


_SYNC_LOOKUP = sa.text(
    "SELECT a.id, a.trials_seen, a.events_seen, p.token_hash FROM psiturk_assignment a "
    "JOIN participant p ON p.id = a.participant_id WHERE a.uniqueid = :uid AND a.experiment_id = :exp")
_SAVED = json.dumps({"status": "user data saved"}) + "\n"


@bp.route("/quitter", methods=["POST"])
def quitter() -> Response:
    unique_id = request.form.get("uniqueId", "")
    if unique_id.startswith("debug"):
        return jsonify(status="didn't mark as quitter since this is debugging")
    part = _by_uniqueid(unique_id)
    if part is None:
        raise ExperimentError("tried_to_quit")
    if not _proven(part):
        return _forbidden()
    if part.status in (pp.ALLOCATED, pp.STARTED):  # a finished participant stays finished
        _set_status(part, pp.QUITEARLY)
    return jsonify(status="marked as quitter")


@bp.route("/complete")
def debug_complete() -> Response:
    """The end of the task: complete, then close the popup (sandbox, live) or the debug page."""
    unique_id = request.args.get("uniqueId")
    if unique_id is None:
        raise ExperimentError("improper_inputs")
    mode = request.args.get("mode", "")
    part = _by_uniqueid(unique_id)
    if part is None:
        raise ExperimentError("error_setting_worker_complete")
    if not _proven(part):
        raise ExperimentError("complete_from_another_browser")
    if part.status < pp.COMPLETED or part.status == pp.QUITEARLY:
        _set_status(part, pp.COMPLETED, endhit=utcnow())
    if mode in MTURK_MODES:
        return nocache(render("closepopup.html"))
    return nocache(render("complete.html", allow_repeats=state().project.allow_repeats,
                          worker_id=part.workerid))


def _status_route(code: int) -> Response:
    unique_id = request.args.get("uniqueId")
    if unique_id is None:
        return jsonify(status="bad request")
    part = _by_uniqueid(unique_id)
    if part is None:
        return jsonify(status="database error")
    if not _proven(part) and not (code == pp.SUBMITTED and part.status == pp.COMPLETED):
        # /worker_submitted comes from the ad inside MTurk's frame, where no cookie of ours
        # travels: without the proof it only moves a completed participant on to submitted
        return _forbidden()
    stamps = {"endhit": utcnow()} if code == pp.COMPLETED else {}
    if part.status < code or part.status == pp.QUITEARLY:
        _set_status(part, code, **stamps)
    return jsonify(status="success")


@bp.route("/worker_complete")
def worker_complete() -> Response:
    return _status_route(pp.COMPLETED)


@bp.route("/worker_submitted")
def worker_submitted() -> Response:
    return _status_route(pp.SUBMITTED)


@bp.route("/<path:path>")
def regularpage(path: str) -> Response:
    """Any other path: a file of the project's templates folder, as it is (``preloadPages``)."""
    return send_from_directory(state().project.templates, path)

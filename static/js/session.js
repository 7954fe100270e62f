// @ts-check
/* The participant's session in this page: the state the runner's files share, the write token,
 * the resume code, progress, the connection status, queueing a finished trial for the server, and
 * the browser events recorded about the session (focus, visibility, connection, resize, full
 * screen, errors, and the input provenance of provenance.js).
 *
 * The write token comes from the page config (signed session cookie) or, when the page runs
 * without cookies (MTurk's cross-site frame), from the URL fragment `#token=...`, read once into
 * this browser's storage (keyed by participant) and removed from the address bar.
 */

/**
 * @typedef {{pid: string, token: string | null, api: string, resume_code?: string | null,
 *   reopen?: string}} RunnerConfig
 */

/**
 * @typedef {object} RunnerState
 * @property {RunnerConfig | null} config
 * @property {InstanceType<typeof HumanlikeTrialQueue.TrialQueue>} queue
 * @property {Timeline} timeline
 * @property {FrameInfo} frame
 * @property {Record<number, boolean>} done indices stored or waiting in the queue
 * @property {boolean} running true while trials run (a full-screen exit then asks to return)
 */

var HumanlikeSession = (function () {
  "use strict";

  /** @type {RunnerState} */
  var state = /** @type {any} */ ({ config: null, queue: null, timeline: null, frame: null,
                                    done: {}, running: false });

  /** @param {{online: boolean, pending: number}} info */
  function setStatus(info) {
    var box = document.getElementById("sync-status");
    if (!box) return;
    if (info.online === false) {
      box.className = "sync-status offline";
      box.textContent = _("Connection lost: your answers are kept and will be sent (%(pending)s waiting)",
                          { pending: info.pending });
    } else {
      box.className = "sync-status";
      box.textContent = "";
    }
  }

  /* ---- the token: page config (cookie), URL fragment (read once), or this browser's storage ---- */

  /**
   * @param {string} pid
   * @returns {string} the storage key of a participant's token
   */
  function tokenKey(pid) { return "humanlike-token:" + pid; }

  /**
   * The participant's write token: from the page config, else from `#token=...` (then kept in
   * sessionStorage and localStorage and removed from the URL), else from storage; null if none.
   * @param {RunnerConfig} config
   * @returns {string | null}
   */
  function resolveToken(config) {
    var token = config.token || null;
    var match = /(?:^#|&)token=([A-Za-z0-9_-]+)/.exec(window.location.hash || "");
    if (match) {
      token = match[1];
      try {
        window.history.replaceState(null, "", window.location.pathname + window.location.search);
      } catch (e) { /* a sandboxed frame may refuse; the token stays in this frame's URL only */ }
    }
    /** @type {Storage[]} */
    var stores = [];
    try { stores = [window.sessionStorage, window.localStorage]; } catch (e) { stores = []; }
    stores.forEach(function (store) {
      try {
        if (token) store.setItem(tokenKey(config.pid), token);
        else token = store.getItem(tokenKey(config.pid)) || token;
      } catch (e) { /* storage blocked: the fragment/cookie token still works for this page */ }
    });
    return token;
  }

  /** @param {string} code */
  function showResumeCode(code) {
    var box = document.getElementById("resume-code");
    if (box) {
      box.dataset.code = code; // the code itself, whatever the page's language
      box.textContent = _("Resume code: %(code)s", { code: code });
      box.title = _("If your browser closes, open the study link with ?resume=%(code)s", { code: code });
    }
  }

  /* ---- progress ---- */

  /** @returns {number} trials of the task (the debrief is not one) */
  function taskTotal() {
    return state.timeline.trials.filter(function (t) { return t.type !== "debrief"; }).length;
  }

  /** @returns {number} task trials done (stored or waiting to be sent) */
  function countDone() {
    return state.timeline.trials.filter(function (t) {
      return t.type !== "debrief" && state.done[t.index];
    }).length;
  }

  /** Update the progress bar: trials done / total, the same across reloads. */
  function showProgress() {
    var bar = document.getElementById("progress-fill");
    var text = document.getElementById("progress-text");
    var outer = document.getElementById("progress");
    if (!bar || !text || !outer || !state.timeline) return;
    var total = taskTotal();
    var n = countDone();
    bar.style.width = (total ? (100 * n) / total : 0).toFixed(1) + "%";
    text.textContent = n + " / " + total;
    outer.setAttribute("aria-valuenow", String(n));
    outer.setAttribute("aria-valuemax", String(total));
    outer.hidden = false;
  }

  /* ---- trials to the server ---- */

  /**
   * @param {string} key
   * @returns {string}
   */
  function stimulusUrl(key) { return state.timeline.stimulus_base + key; }

  /**
   * @param {any} x
   * @returns {number | null} x if it is a finite number
   */
  function num(x) { return typeof x === "number" && isFinite(x) ? x : null; }

  /**
   * Queue a finished trial for the server.
   * @param {TimelineEntry} entry
   * @param {object} response what the participant did
   * @param {any} data the plugin's data (timing)
   */
  function send(entry, response, data) {
    state.done[entry.index] = true;
    showProgress();
    if (typeof HumanlikeProvenance !== "undefined") HumanlikeProvenance.flush(); // the input behind it
    state.queue.add({
      trial_index: entry.index,
      trial_type: entry.type,
      response: response,
      rt_ms: num(data.rt_ms !== undefined ? data.rt_ms : data.rt),
      first_rt_ms: num(data.first_rt_ms),
      presented_ms: num(data.presented_ms),
      frames: typeof data.frames === "number" ? Math.round(data.frames) : null,
      client_time: Date.now(),
    });
  }

  /* ---- browser events ---- */

  function watchEvents() {
    var q = state.queue;
    // provenance.js: the task page loads it; unit tests of this file may not
    if (typeof HumanlikeProvenance !== "undefined") HumanlikeProvenance.watch(q);
    window.addEventListener("blur", function () { q.event("blur"); });
    window.addEventListener("focus", function () { q.event("focus"); });
    document.addEventListener("visibilitychange", function () { q.event("visibility", document.visibilityState); });
    /** @type {number | null} */
    var offlineSince = null;
    // An "offline" event cannot reach the server while offline: both are sent on reconnection.
    window.addEventListener("offline", function () { offlineSince = Date.now(); });
    window.addEventListener("online", function () {
      var since = offlineSince === null ? Date.now() : offlineSince;
      offlineSince = null;
      q.event("offline", { since: since });
      q.event("online", { offline_ms: Date.now() - since });
    });
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    var resizeTimer = undefined;
    window.addEventListener("resize", function () {
      clearTimeout(resizeTimer);
      resizeTimer = setTimeout(function () {
        q.event("resize", { width: window.innerWidth, height: window.innerHeight });
      }, 300);
    });
    document.addEventListener("fullscreenchange", function () {
      q.event(document.fullscreenElement ? "fullscreen_enter" : "fullscreen_exit");
      if (!document.fullscreenElement && state.running && state.timeline.fullscreen) {
        HumanlikeScreens.askFullscreen();
      }
    });
    window.addEventListener("error", function (e) {
      q.event("error", { message: String(e.message).slice(0, 500), source: String(e.filename || "").slice(0, 200), line: e.lineno || null });
    });
  }

  return { state: state, setStatus: setStatus, resolveToken: resolveToken, showResumeCode: showResumeCode,
           taskTotal: taskTotal, countDone: countDone, showProgress: showProgress,
           stimulusUrl: stimulusUrl, send: send, watchEvents: watchEvents };
})();

// @ts-check
/* humanlike runner: fetches the participant's timeline, runs it with jsPsych, syncs every trial.
 *
 * Order: consent (plain page with the estimated duration, recorded through the API) -> full screen
 * (if the spec asks: before the display is measured, so the calibration, the refresh rate and the
 * "does the stimulus fit" check see the window the trials run in) -> measure the refresh rate ->
 * display (calibration, stimulus size) -> instructions (first visit) or "welcome back"
 * (a resume) -> preload -> trials from the first one neither acknowledged by the server nor waiting
 * in localStorage, with the screens the spec puts around them (block introductions, practice labels
 * and feedback, "practice over", breaks every N trials, fixation cross and inter-trial interval) ->
 * debrief -> wait until every trial is acknowledged -> complete -> leave (Prolific redirect, MTurk
 * form POST, or the local thank-you page).
 *
 * The task page loads, before this file: trial_types.js (the registry), the trial types' files
 * (plugins/*.js, each registering its builder), trial_queue.js, session.js (shared state, token,
 * progress, events), screens.js (screens around the trials, messages, full screen) and consent.js
 * (consent and instructions).
 */
var HumanlikeRunner = (function () {
  "use strict";

  var state = HumanlikeSession.state;
  var Screens = HumanlikeScreens;

  /** @returns {TrialContext} what a trial type's builder gets from the runner */
  function trialContext() {
    return { timeline: state.timeline, frame: state.frame,
             stimulusUrl: HumanlikeSession.stimulusUrl, send: HumanlikeSession.send };
  }

  /**
   * A practice entry with a "Practice" label in front of its prompt (every trial type shows it).
   * @param {TimelineEntry} entry
   * @returns {TimelineEntry}
   */
  function labelled(entry) {
    return Object.assign({}, entry, {
      prompt: "<p class='hl-practice-label' id='practice-label'>" + _("Practice trial") + "</p>" + (entry.prompt || ""),
    });
  }

  /**
   * The jsPsych trials for `entries`, each from the builder its type registered with
   * HumanlikeTrialTypes, or the first entry whose type has no builder.
   * @param {TimelineEntry[]} entries
   * @returns {{trials: any[], unknown: TimelineEntry | null}}
   */
  function buildTrials(entries) {
    var ctx = trialContext();
    /** @type {any[]} */
    var trials = [];
    for (var i = 0; i < entries.length; i++) {
      var entry = entries[i];
      var builder = HumanlikeTrialTypes.get(entry.type);
      if (builder === null) return { trials: trials, unknown: entry };
      trials.push(builder(entry.practice ? labelled(entry) : entry, ctx));
    }
    return { trials: trials, unknown: null };
  }

  /**
   * Report a trial the browser cannot build (an `error` event) and tell the participant, before
   * any trial runs.
   * @param {TimelineEntry} entry
   */
  function unknownTrialType(entry) {
    var message = "unknown trial type " + JSON.stringify(entry.type);
    console.error("humanlike: " + message);
    state.queue.event("error", { message: message, trial_index: entry.index });
    Screens.showMessage(_("This study cannot run"), "start-error",
      _("This page cannot show one of the study's trials (%(problem)s). Please return the study " +
        "on your recruitment platform and tell the researcher; nothing you did is lost.", { problem: message }));
  }

  /** Wait for every trial to be acknowledged, complete, and leave. */
  function finish() {
    var root = Screens.taskRoot();
    root.innerHTML = "<div class='page'><h2 id='saving'>" + _("Saving your responses…") + "</h2><p>" +
      _("Please keep this page open.") + "</p></div>";
    return state.queue.drained().then(function () {
      return state.queue.request("/complete", {});
    }).then(function (/** @type {any} */ res) {
      var next = res.next;
      if (next.kind === "mturk_form") {
        var form = /** @type {HTMLFormElement} */ (Screens.el("form", { method: "POST", action: next.action }));
        Object.keys(next.fields).forEach(function (k) {
          form.appendChild(Screens.el("input", { type: "hidden", name: k, value: next.fields[k] }));
        });
        document.body.appendChild(form);
        form.submit();
      } else {
        window.location.assign(next.url);
      }
    }, function (/** @type {any} */ err) {
      Screens.showMessage(_("Something went wrong"), "complete-error",
        _("Your responses are kept in this browser. Please reload the page. (%(error)s)",
          { error: err.error || "error" }));
    });
  }

  /** @returns {Promise<FrameInfo>} */
  function measureRefresh() {
    if (window.HumanlikeFrameClock && HumanlikeFrameClock.measureRefresh) {
      return HumanlikeFrameClock.measureRefresh(60);
    }
    return Promise.resolve({ frame_ms: 1000 / 60, refresh_hz: 60 });
  }

  /**
   * Run the trials not yet acknowledged nor waiting locally, after the instructions (first visit)
   * and the preload.
   * @param {Timeline} tl
   */
  function run(tl) {
    state.timeline = tl;
    state.queue.setAttempt(tl.attempt || 0); // trials of a restarted block's earlier attempt move aside
    state.queue.forget(tl.acknowledged);
    state.queue.flush(true);
    /** @type {Record<number, boolean>} */
    var done = {};
    tl.acknowledged.forEach(function (i) { done[i] = true; });
    state.queue.indices().forEach(function (i) { done[i] = true; });
    state.done = done;
    HumanlikeSession.showProgress();
    var remaining = tl.trials.filter(function (t) { return !done[t.index]; });
    var built = buildTrials(remaining);
    if (built.unknown !== null) { unknownTrialType(built.unknown); return; }
    if (remaining.length === 0) { finish(); return; }
    var jsPsych = initJsPsych({
      display_element: "task",
      on_finish: function () { state.running = false; if (!outdated) finish(); },
    });
    stopTrials = function () { jsPsych.abortExperiment(); };
    /** @type {any[]} */
    var timeline = [];
    // back after a restarted block (even the first): welcome back, not the instructions again
    var resuming = remaining.length < tl.trials.length || (tl.attempt || 0) > 0;
    if (!resuming) {
      timeline.push(HumanlikeConsent.instructionsScreen(tl));
    } else {
      state.queue.event("resume", { next_index: remaining[0].index });
      timeline.push(Screens.welcomeBackScreen());
    }
    /** @type {string[]} */
    var images = [];
    remaining.forEach(function (t) {
      if (t.stimulus) images.push(HumanlikeSession.stimulusUrl(t.stimulus));
      (t.stimuli || []).forEach(function (k) { images.push(HumanlikeSession.stimulusUrl(k)); });
    });
    if (tl.presentation.mask) images.push(HumanlikeSession.stimulusUrl(tl.presentation.mask));
    if (images.length) {
      timeline.push({ type: jsPsychPreload, images: images, show_progress_bar: true,
                      max_load_time: 120000, continue_after_error: false });
    }
    state.running = true;
    jsPsych.run(timeline.concat(Screens.withScreens(remaining, built.trials, resuming)));
  }

  /**
   * The full-screen screen in its own jsPsych run, when the spec asks for full screen and the page
   * is not in it yet; resolves once the window has its full-screen size (the `resize` after the
   * change), or after a second if the browser refused or did not resize.
   * @param {Timeline} tl
   * @returns {Promise<void>}
   */
  function fullScreenFirst(tl) {
    if (!tl.fullscreen || !document.fullscreenEnabled || document.fullscreenElement) {
      return Promise.resolve();
    }
    return new Promise(function (resolve) {
      var jsPsych = initJsPsych({ display_element: "task", on_finish: function () {
        var timer = setTimeout(done, 1000);
        function done() {
          clearTimeout(timer);
          window.removeEventListener("resize", done);
          resolve();
        }
        window.addEventListener("resize", done);
      } });
      jsPsych.run([/** @type {any} */ (Screens.fullscreenScreen())]);
    });
  }

  var outdated = false;
  /** @type {() => void} */
  var stopTrials = function () {};

  /**
   * The server refused a trial because the participant came back in another window or tab and
   * the block restarted there: stop this page's trials (nothing is lost: the server kept them)
   * and say where the study goes on.
   * @param {{error: string}} err
   */
  function onQueueError(err) {
    console.error("humanlike: trial rejected", err);
    if (err.error !== "trial_from_restarted_block" || outdated) return;
    outdated = true;
    state.running = false;
    stopTrials();
    setTimeout(function () {
      Screens.showMessage(_("This window is out of date"), "outdated",
        _("The study was opened again in another window or tab and goes on there. Your answers " +
          "from this window are kept. Please close this window."));
    }, 0);
  }

  /**
   * Entry point of the task page.
   * @param {RunnerConfig} config
   */
  function start(config) {
    state.config = config;
    var token = HumanlikeSession.resolveToken(config);
    if (token === null) {
      Screens.showMessage(_("Please reopen your study link"), "start-error",
        config.reopen || _("Please open your original study link again."));
      return;
    }
    if (config.resume_code) HumanlikeSession.showResumeCode(config.resume_code);
    state.queue = new HumanlikeTrialQueue.TrialQueue({
      pid: config.pid, token: token, api: config.api,
      onStatus: HumanlikeSession.setStatus,
      onError: onQueueError,
    });
    HumanlikeSession.watchEvents();
    state.queue.request("/timeline").then(function (/** @type {Timeline} */ tl) {
      HumanlikeSession.setStatus({ online: true, pending: state.queue.size() });
      var consent = tl.status === "allocated" ? HumanlikeConsent.showConsent(tl) : Promise.resolve(tl.status);
      return consent.then(function (status) {
        if (status === "returned") {
          HumanlikeConsent.showDeclined();
          return;
        }
        return fullScreenFirst(tl).then(measureRefresh).then(function (frame) {
          state.frame = frame;
          state.queue.event("environment", {
            refresh_hz: frame.refresh_hz, frame_ms: frame.frame_ms,
            screen_width: window.screen.width, screen_height: window.screen.height,
            window_width: window.innerWidth, window_height: window.innerHeight,
            device_pixel_ratio: window.devicePixelRatio || 1,
            webdriver: navigator.webdriver === true,
          });
          return HumanlikeDisplay.prepare(tl, frame, state.queue).then(function (ok) {
            if (ok) run(tl);
          });
        });
      });
    }, function (/** @type {any} */ err) {
      Screens.showMessage(_("Cannot start"), "start-error", (err && err.detail) || _("The study could not be loaded."));
    });
  }

  return { start: start, buildTrials: buildTrials, trialContext: trialContext };
})();

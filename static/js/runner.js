// @ts-check
/* humanlike runner: fetches the participant's timeline, runs it with jsPsych, syncs every trial.
 *
 * Order: consent (plain page, recorded through the API) -> measure the refresh rate -> instructions
 * (first visit only) -> preload -> trials from the first one neither acknowledged by the server nor
 * waiting in localStorage -> debrief -> wait until every trial is acknowledged -> complete -> leave
 * (Prolific redirect, MTurk form POST, or the local thank-you page).
 */
var HumanlikeRunner = (function () {
  "use strict";

  /**
   * One trial of the participant's timeline, as the server sends it (design fields included).
   * @typedef {object} TimelineEntry
   * @property {number} index
   * @property {string} type
   * @property {string} [stimulus]
   * @property {string[]} [stimuli]
   * @property {string} [prompt]
   * @property {string} [sequence]
   * @property {number} [s1]
   * @property {number} [s2]
   * @property {number} [s3]
   * @property {boolean} [swapped]
   */

  /**
   * @typedef {object} Timeline
   * @property {string} status
   * @property {string} consent_html
   * @property {string} instructions_html
   * @property {string} stimulus_base
   * @property {number[]} acknowledged
   * @property {TimelineEntry[]} trials
   * @property {Array<{label: string, key: string}>} categories
   * @property {Array<{name: string, text: string}>} debrief
   * @property {{mode: string, duration_ms: number | null, mask: string | null, image_height_px: number}} presentation
   */

  /** @typedef {{pid: string, token: string, api: string}} RunnerConfig */
  /** @typedef {{frame_ms: number, refresh_hz: number}} FrameInfo */

  /**
   * @typedef {object} RunnerState
   * @property {RunnerConfig | null} config
   * @property {InstanceType<typeof HumanlikeTrialQueue.TrialQueue>} queue
   * @property {Timeline} timeline
   * @property {FrameInfo} frame
   */

  /** @type {RunnerState} */
  var state = /** @type {any} */ ({ config: null, queue: null, timeline: null, frame: null });

  /**
   * @param {string} tag
   * @param {Record<string, string>} [attrs]
   * @param {string} [html]
   * @returns {HTMLElement}
   */
  function el(tag, attrs, html) {
    var node = document.createElement(tag);
    var given = attrs || {};
    Object.keys(given).forEach(function (k) { node.setAttribute(k, given[k]); });
    if (html !== undefined) node.innerHTML = html;
    return node;
  }

  /** @param {{online: boolean, pending: number}} info */
  function setStatus(info) {
    var box = document.getElementById("sync-status");
    if (!box) return;
    if (info.online === false) {
      box.className = "sync-status offline";
      box.textContent = "Connection lost: your answers are kept and will be sent (" + info.pending + " waiting)";
    } else {
      box.className = "sync-status";
      box.textContent = "";
    }
  }

  /** @returns {HTMLElement} the element the study runs in */
  function taskRoot() {
    return /** @type {HTMLElement} */ (document.getElementById("task"));
  }

  /**
   * Show the consent page; resolves with the participant's new status.
   * @param {Timeline} tl
   * @returns {Promise<string>}
   */
  function showConsent(tl) {
    return new Promise(function (resolve) {
      var root = taskRoot();
      var page = el("div", { "class": "consent page" });
      page.appendChild(el("section", {}, tl.consent_html));
      var agree = /** @type {HTMLButtonElement} */ (el("button", { id: "consent-agree", type: "button" }, "I agree"));
      var decline = /** @type {HTMLButtonElement} */ (
        el("button", { id: "consent-decline", type: "button", "class": "secondary" }, "I do not agree"));
      var row = el("p", { "class": "consent-buttons" });
      row.appendChild(agree);
      row.appendChild(decline);
      page.appendChild(row);
      root.appendChild(page);
      agree.focus();
      /** @param {boolean} yes */
      var choose = function (yes) {
        agree.disabled = decline.disabled = true;
        state.queue.request("/consent", { agree: yes }).then(function (res) {
          root.removeChild(page);
          resolve(res.status);
        });
      };
      agree.addEventListener("click", function () { choose(true); });
      decline.addEventListener("click", function () { choose(false); });
    });
  }

  /**
   * @param {string} key
   * @returns {string}
   */
  function stimulusUrl(key) { return state.timeline.stimulus_base + key; }

  /** The presentation parameters both plugins take, from the timeline and the measured refresh. */
  function presentationParams() {
    var p = state.timeline.presentation;
    return {
      presentation: p.mode,
      duration_ms: p.duration_ms,
      mask: p.mask ? stimulusUrl(p.mask) : null,
      frame_ms: state.frame.frame_ms,
    };
  }

  /**
   * @param {TimelineEntry} entry
   * @returns {object} a jsPsych trial
   */
  function ratingTrial(entry) {
    var p = presentationParams();
    return {
      type: jsPsychRating,
      stimulus: stimulusUrl(entry.stimulus || ""),
      categories: state.timeline.categories,
      stimulus_height_px: state.timeline.presentation.image_height_px,
      presentation: p.presentation,
      duration_ms: p.duration_ms,
      mask: p.mask,
      frame_ms: p.frame_ms,
      prompt: entry.prompt || "",
      data: { humanlike_index: entry.index },
      /** @param {any} data */
      on_finish: function (data) {
        send(entry, {
          ratings: data.ratings,
          n_changes: data.n_changes,
          input_modality: data.input_modality,
          requested_frames: data.requested_frames,
        }, data);
      },
    };
  }

  /**
   * @param {TimelineEntry} entry
   * @returns {object} a jsPsych trial
   */
  function triadTrial(entry) {
    var p = presentationParams();
    var levels = [entry.s1, entry.s2, entry.s3];
    var keys = entry.stimuli || [];
    var left = entry.swapped ? 2 : 0;
    var right = entry.swapped ? 0 : 2;
    return {
      type: jsPsychTriad,
      reference: stimulusUrl(keys[1]),
      left: stimulusUrl(keys[left]),
      right: stimulusUrl(keys[right]),
      image_height_px: Math.min(state.timeline.presentation.image_height_px, 200),
      presentation: p.presentation,
      duration_ms: p.duration_ms,
      mask: p.mask,
      frame_ms: p.frame_ms,
      prompt: entry.prompt || "",
      sequence: entry.sequence,
      s_left: levels[left],
      s_ref: levels[1],
      s_right: levels[right],
      data: { humanlike_index: entry.index },
      /** @param {any} data */
      on_finish: function (data) {
        // Only what the participant did: the server holds the trial's design (which side was which).
        send(entry, { choice: data.choice, chosen_level: data.chosen_level,
                      input_modality: data.input_modality,
                      requested_frames: data.requested_frames }, data);
      },
    };
  }

  /**
   * A classification trial: the timings, mask and categories come from the trial's design; the
   * true class only on practice trials with feedback.
   * @param {TimelineEntry} entry
   * @returns {object} a jsPsych trial
   */
  function classificationTrial(entry) {
    var e = /** @type {any} */ (entry);
    var allowed = e.categories || null;
    var categories = state.timeline.categories.filter(function (c) {
      return allowed === null || allowed.indexOf(c.label) >= 0;
    });
    return {
      type: jsPsychClassification,
      stimulus: stimulusUrl(entry.stimulus || ""),
      categories: categories,
      image_height_px: state.timeline.presentation.image_height_px,
      fixation_ms: e.fixation_ms,
      duration_ms: e.duration_ms,
      mask_ms: e.mask_ms,
      mask: e.mask === "noise" ? "noise" : stimulusUrl(e.mask),
      mask_seed: e.mask_seed,
      response_timeout_ms: e.response_timeout_ms === undefined ? null : e.response_timeout_ms,
      feedback: Boolean(e.feedback),
      correct_label: e.feedback ? (e.true_class || null) : null,
      frame_ms: state.frame.frame_ms,
      prompt: entry.prompt || "<p>Which category was it?</p>",
      data: { humanlike_index: entry.index },
      /** @param {any} data */
      on_finish: function (data) {
        send(entry, { choice: data.response, input_modality: data.input_modality,
                      requested_frames: data.requested_frames }, data);
      },
    };
  }

  /**
   * @param {string} text
   * @returns {string}
   */
  function escapeHtml(text) {
    var d = document.createElement("div");
    d.textContent = text;
    return d.innerHTML;
  }

  /**
   * @param {TimelineEntry} entry
   * @returns {object} a jsPsych trial
   */
  function debriefTrial(entry) {
    var html = state.timeline.debrief.map(function (q) {
      return "<p><label for='debrief-" + q.name + "'>" + escapeHtml(q.text) + "</label><br>" +
        "<textarea id='debrief-" + q.name + "' name='" + q.name + "' rows='3' cols='60' maxlength='2000'></textarea></p>";
    }).join("");
    return {
      type: jsPsychSurveyHtmlForm,
      preamble: "<h2>A few last questions</h2>",
      html: html,
      button_label: "Finish",
      autofocus: state.timeline.debrief.length ? "debrief-" + state.timeline.debrief[0].name : "",
      data: { humanlike_index: entry.index },
      /** @param {any} data */
      on_finish: function (data) {
        /** @type {Record<string, string>} */
        var answers = {};
        Object.keys(data.response || {}).forEach(function (k) { answers[k] = String(data.response[k]); });
        send(entry, { answers: answers }, { rt: data.rt });
      },
    };
  }

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

  /* The browser half of the trial-type registry: one builder per type the server's registry names
   * (a server-side test reads this line). A new browser trial type is one entry here. */
  var TRIAL_BUILDERS = { rating: ratingTrial, triad: triadTrial, classification: classificationTrial, debrief: debriefTrial };

  /**
   * The jsPsych trials for `entries`, or the first entry whose type has no builder.
   * @param {TimelineEntry[]} entries
   * @returns {{trials: any[], unknown: TimelineEntry | null}}
   */
  function buildTrials(entries) {
    /** @type {any[]} */
    var trials = [];
    for (var i = 0; i < entries.length; i++) {
      var entry = entries[i];
      var builder = Object.prototype.hasOwnProperty.call(TRIAL_BUILDERS, entry.type)
        ? TRIAL_BUILDERS[/** @type {keyof typeof TRIAL_BUILDERS} */ (entry.type)] : null;
      if (builder === null) return { trials: trials, unknown: entry };
      trials.push(builder(entry));
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
    var root = /** @type {HTMLElement} */ (document.getElementById("task"));
    root.innerHTML = "<div class='page'><h2>This study cannot run</h2><p id='start-error'></p></div>";
    /** @type {HTMLElement} */ (document.getElementById("start-error")).textContent =
      "This page cannot show one of the study's trials (" + message + "). Please return the study " +
      "on your recruitment platform and tell the researcher; nothing you did is lost.";
  }

  function watchEvents() {
    var q = state.queue;
    window.addEventListener("blur", function () { q.event("blur"); });
    window.addEventListener("focus", function () { q.event("focus"); });
    document.addEventListener("visibilitychange", function () { q.event("visibility", document.visibilityState); });
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
    });
    window.addEventListener("error", function (e) {
      q.event("error", { message: String(e.message).slice(0, 500), source: String(e.filename || "").slice(0, 200), line: e.lineno || null });
    });
  }

  /** Wait for every trial to be acknowledged, complete, and leave. */
  function finish() {
    var root = taskRoot();
    root.innerHTML = "<div class='page'><h2 id='saving'>Saving your responses…</h2><p>Please keep this page open.</p></div>";
    return state.queue.drained().then(function () {
      return state.queue.request("/complete", {});
    }).then(function (/** @type {any} */ res) {
      var next = res.next;
      if (next.kind === "mturk_form") {
        var form = /** @type {HTMLFormElement} */ (el("form", { method: "POST", action: next.action }));
        Object.keys(next.fields).forEach(function (k) {
          form.appendChild(el("input", { type: "hidden", name: k, value: next.fields[k] }));
        });
        document.body.appendChild(form);
        form.submit();
      } else {
        window.location.assign(next.url);
      }
    }, function (/** @type {any} */ err) {
      root.innerHTML = "<div class='page'><h2>Something went wrong</h2><p id='complete-error'></p></div>";
      /** @type {HTMLElement} */ (document.getElementById("complete-error")).textContent =
        "Your responses are kept in this browser. Please reload the page. (" + (err.error || "error") + ")";
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
    state.queue.forget(tl.acknowledged);
    state.queue.flush(true);
    /** @type {Record<number, boolean>} */
    var done = {};
    tl.acknowledged.forEach(function (i) { done[i] = true; });
    state.queue.indices().forEach(function (i) { done[i] = true; });
    var remaining = tl.trials.filter(function (t) { return !done[t.index]; });
    var built = buildTrials(remaining);
    if (built.unknown !== null) { unknownTrialType(built.unknown); return; }
    if (remaining.length === 0) { finish(); return; }
    var jsPsych = initJsPsych({
      display_element: "task",
      on_finish: function () { finish(); },
    });
    /** @type {any[]} */
    var timeline = [];
    if (tl.acknowledged.length === 0 && state.queue.size() === 0) {
      timeline.push({
        type: jsPsychHtmlButtonResponse,
        stimulus: "<div class='instructions'>" + tl.instructions_html + "</div>",
        choices: ["Start"],
        on_load: function () {
          /** @type {HTMLElement | null} */
          var button = document.querySelector("#jspsych-html-button-response-btngroup button");
          if (button) button.focus();
        },
      });
    }
    /** @type {string[]} */
    var images = [];
    remaining.forEach(function (t) {
      if (t.stimulus) images.push(stimulusUrl(t.stimulus));
      (t.stimuli || []).forEach(function (k) { images.push(stimulusUrl(k)); });
    });
    if (tl.presentation.mask) images.push(stimulusUrl(tl.presentation.mask));
    if (images.length) {
      timeline.push({ type: jsPsychPreload, images: images, show_progress_bar: true,
                      max_load_time: 120000, continue_after_error: false });
    }
    jsPsych.run(timeline.concat(built.trials));
  }

  /**
   * Entry point of the task page.
   * @param {RunnerConfig} config
   */
  function start(config) {
    state.config = config;
    state.queue = new HumanlikeTrialQueue.TrialQueue({
      pid: config.pid, token: config.token, api: config.api,
      onStatus: setStatus,
      onError: function (err) { console.error("humanlike: trial rejected", err); },
    });
    watchEvents();
    state.queue.request("/timeline").then(function (/** @type {Timeline} */ tl) {
      setStatus({ online: true, pending: state.queue.size() });
      var consent = tl.status === "allocated" ? showConsent(tl) : Promise.resolve(tl.status);
      return consent.then(function (status) {
        if (status === "returned") {
          taskRoot().innerHTML =
            "<div class='page'><h2>Thank you</h2><p>You did not consent, so the study has ended. " +
            "Please return the study on your recruitment platform.</p></div>";
          return;
        }
        return measureRefresh().then(function (frame) {
          state.frame = frame;
          state.queue.event("environment", {
            refresh_hz: frame.refresh_hz, frame_ms: frame.frame_ms,
            screen_width: window.screen.width, screen_height: window.screen.height,
            window_width: window.innerWidth, window_height: window.innerHeight,
            device_pixel_ratio: window.devicePixelRatio || 1,
          });
          run(tl);
        });
      });
    }, function (/** @type {any} */ err) {
      taskRoot().innerHTML = "<div class='page'><h2>Cannot start</h2><p id='start-error'></p></div>";
      /** @type {HTMLElement} */ (document.getElementById("start-error")).textContent =
        (err && err.detail) || "The study could not be loaded.";
    });
  }

  return { start: start, TRIAL_BUILDERS: TRIAL_BUILDERS, buildTrials: buildTrials, _state: state };
})();

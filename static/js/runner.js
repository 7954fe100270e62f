// @ts-check
/* humanlike runner: fetches the participant's timeline, runs it with jsPsych, syncs every trial.
 *
 * Order: consent (plain page with the estimated duration, recorded through the API) -> measure the
 * refresh rate -> full screen (if the spec asks) -> instructions (first visit) or "welcome back"
 * (a resume) -> preload -> trials from the first one neither acknowledged by the server nor waiting
 * in localStorage, with the screens the spec puts around them (block introductions, practice labels
 * and feedback, "practice over", breaks every N trials, fixation cross and inter-trial interval) ->
 * debrief -> wait until every trial is acknowledged -> complete -> leave (Prolific redirect, MTurk
 * form POST, or the local thank-you page).
 *
 * The write token comes from the page config (signed session cookie) or, when the page runs
 * without cookies (MTurk's cross-site frame), from the URL fragment `#token=...`, read once into
 * this browser's storage (keyed by participant) and removed from the address bar.
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
   * @property {string} [block]
   * @property {string} [kind]
   * @property {boolean} [practice]
   * @property {boolean} [is_repeat]
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
   * @property {Array<{name: string, text: string, options?: string[] | null}>} debrief
   * @property {{mode: string, duration_ms: number | null, mask: string | null, image_height_px: number,
   *   fixation_ms?: number, iti_ms?: number}} presentation
   * @property {Record<string, {intro: string, trial_type: string, practice_feedback: boolean}>} [blocks]
   * @property {number | null} [break_every]
   * @property {boolean} [fullscreen]
   * @property {number} [estimated_minutes]
   */

  /**
   * @typedef {{pid: string, token: string | null, api: string, resume_code?: string | null,
   *   reopen?: string}} RunnerConfig
   */
  /** @typedef {{frame_ms: number, refresh_hz: number}} FrameInfo */

  /**
   * @typedef {object} RunnerState
   * @property {RunnerConfig | null} config
   * @property {InstanceType<typeof HumanlikeTrialQueue.TrialQueue>} queue
   * @property {Timeline} timeline
   * @property {FrameInfo} frame
   * @property {Record<number, boolean>} done indices stored or waiting in the queue
   * @property {boolean} running true while trials run (a full-screen exit then asks to return)
   */

  /** @type {RunnerState} */
  var state = /** @type {any} */ ({ config: null, queue: null, timeline: null, frame: null,
                                    done: {}, running: false });

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
      if (tl.estimated_minutes) {
        page.appendChild(el("p", { id: "duration-estimate", "class": "duration-estimate" },
          "This study takes about " + tl.estimated_minutes + " minutes."));
      }
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
      if (q.options && q.options.length) {
        var choices = q.options.map(function (option, i) {
          var id = "debrief-" + q.name + (i === 0 ? "" : "-" + i);
          return "<label class='debrief-choice' for='" + id + "'><input type='radio' id='" + id +
            "' name='" + q.name + "' value='" + escapeHtml(option).replace(/'/g, "&#39;") + "'" +
            (i === 0 ? " required" : "") + "> " + escapeHtml(option) + "</label>";
        }).join("");
        return "<fieldset class='debrief-options'><legend>" + escapeHtml(q.text) + "</legend>" +
          choices + "</fieldset>";
      }
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
    state.done[entry.index] = true;
    showProgress();
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
   * A practice entry with a "Practice" label in front of its prompt (every trial type shows it).
   * @param {TimelineEntry} entry
   * @returns {TimelineEntry}
   */
  function labelled(entry) {
    return Object.assign({}, entry, {
      prompt: "<p class='hl-practice-label' id='practice-label'>Practice trial</p>" + (entry.prompt || ""),
    });
  }

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
      trials.push(builder(entry.practice ? labelled(entry) : entry));
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
      box.textContent = "Resume code: " + code;
      box.title = "If your browser closes, open the study link with ?resume=" + code;
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

  /* ---- screens around the trials ---- */

  /**
   * A "continue when ready" screen; its button has the focus so Enter continues.
   * @param {string} html
   * @param {string} label
   * @param {string} name a data-screen name (intro, break, practice_over, ...)
   * @param {(() => void)} [onClick]
   * @returns {object} a jsPsych trial
   */
  function buttonScreen(html, label, name, onClick) {
    return {
      type: jsPsychHtmlButtonResponse,
      stimulus: "<div class='hl-screen' data-screen='" + name + "'>" + html + "</div>",
      choices: [label],
      data: { screen: name },
      on_load: function () {
        /** @type {HTMLElement | null} */
        var button = document.querySelector("#jspsych-html-button-response-btngroup button");
        if (button) button.focus();
      },
      on_finish: function () { if (onClick) onClick(); },
    };
  }

  /**
   * The keys of a trial type, as the block introduction lists them.
   * @param {string} type
   * @returns {string} HTML
   */
  function keyHelp(type) {
    if (type === "rating") {
      var keys = state.timeline.categories.map(function (c) {
        return "<kbd>" + escapeHtml(c.key.toUpperCase()) + "</kbd> " + escapeHtml(c.label);
      }).join(", ");
      return "<p>Press a category's key to raise its rating, <kbd>Shift</kbd> + key to lower it, " +
        "<kbd>Enter</kbd> to continue; or click. Keys: " + keys + ".</p>";
    }
    if (type === "triad") {
      return "<p><kbd>F</kbd> or <kbd>&larr;</kbd> for the left image, <kbd>J</kbd> or " +
        "<kbd>&rarr;</kbd> for the right image; or click it.</p>";
    }
    return "<p>The keys are shown on each trial.</p>";
  }

  /**
   * @param {TimelineEntry} entry the first trial of the block
   * @returns {object} a jsPsych trial
   */
  function introScreen(entry) {
    var info = (state.timeline.blocks || {})[entry.block || ""];
    var text = info && info.intro ? "<p class='hl-intro-text'>" + escapeHtml(info.intro) + "</p>" : "";
    var practice = entry.practice ? "<p>It starts with a few <strong>practice trials</strong>.</p>" : "";
    return buttonScreen("<h2>Next part</h2>" + text + "<div class='hl-keys'>" + keyHelp(entry.type) +
                        "</div>" + practice, "Start", "intro");
  }

  /**
   * @param {TimelineEntry[]} entries the repeated trials
   * @returns {object} a jsPsych trial
   */
  function repeatsScreen(entries) {
    /** @type {Record<string, boolean>} */
    var types = {};
    entries.forEach(function (e) { types[e.type] = true; });
    return buttonScreen("<h2>Last part</h2><p>A few more trials like the ones before.</p>" +
      "<div class='hl-keys'>" + Object.keys(types).map(keyHelp).join("") + "</div>", "Start", "intro");
  }

  /**
   * @param {number} trial the number of the next trial (1-based)
   * @returns {object} a jsPsych trial
   */
  function breakScreen(trial) {
    return buttonScreen("<h2>Take a break</h2><p>You have done " + (trial - 1) + " of " + taskTotal() +
      " trials. Rest your eyes for a moment, and continue when you are ready.</p>",
      "Continue when ready", "break");
  }

  /** @returns {object} a jsPsych trial */
  function practiceOverScreen() {
    return buttonScreen("<h2>Practice over</h2><p>The real trials start now. They work exactly " +
      "like the practice.</p>", "Start", "practice_over");
  }

  /** @returns {object} a jsPsych trial: feedback after a practice rating or triad (no right answer) */
  function practiceFeedbackScreen() {
    return buttonScreen("<h2>Practice answer recorded</h2><p>There is no right or wrong answer " +
      "here: answer as the images look to you.</p>", "Continue", "practice_feedback");
  }

  /**
   * @param {string} mark "+" or "" (inter-trial interval)
   * @param {number} duration_ms
   * @returns {object} a jsPsych trial
   */
  function fixationScreen(mark, duration_ms) {
    return { type: jsPsychFixation, mark: mark, duration_ms: duration_ms,
             frame_ms: state.frame.frame_ms, data: { screen: mark ? "fixation" : "iti" } };
  }

  /**
   * The trials of `remaining` with the screens the spec puts around them: block introductions,
   * "last part" before the repeats, breaks every N trials (by trial number, so the same across
   * reloads), practice feedback and "practice over", fixation before and the inter-trial interval
   * after each trial.
   * @param {TimelineEntry[]} remaining
   * @param {any[]} trials the built trials of `remaining`, in the same order
   * @param {boolean} resuming a "welcome back" screen is shown instead of a break first
   * @returns {any[]}
   */
  function withScreens(remaining, trials, resuming) {
    var tl = state.timeline;
    var p = tl.presentation;
    var fixation = p.fixation_ms || 0;
    var iti = p.iti_ms || 0;
    var every = tl.break_every || 0;
    var blocks = tl.blocks || {};
    /** @type {Record<number, TimelineEntry>} */
    var byIndex = {};
    tl.trials.forEach(function (t) { byIndex[t.index] = t; });
    /** @type {any[]} */
    var out = [];
    var repeatsShown = false;
    remaining.forEach(function (entry, k) {
      var task = entry.type !== "debrief";
      var before = byIndex[entry.index - 1];
      var first = k === 0;
      if (task && entry.is_repeat) {
        if (!repeatsShown) out.push(repeatsScreen(remaining.filter(function (e) { return e.is_repeat; })));
        repeatsShown = true;
      } else if (task && (first || !before || before.block !== entry.block)) {
        out.push(introScreen(entry));
      } else if (task && before && before.practice && !entry.practice && before.block === entry.block) {
        out.push(practiceOverScreen());
      }
      if (task && every && entry.index > 0 && entry.index % every === 0 && !(first && resuming)) {
        out.push(breakScreen(entry.index + 1));
      }
      if (task && fixation > 0) out.push(fixationScreen("+", fixation));
      out.push(trials[k]);
      if (task && entry.practice && (blocks[entry.block || ""] || {}).practice_feedback) {
        out.push(practiceFeedbackScreen());
      }
      if (task && iti > 0) out.push(fixationScreen("", iti));
    });
    return out;
  }

  /* ---- full screen ---- */

  function enterFullscreen() {
    var root = document.documentElement;
    if (root.requestFullscreen && !document.fullscreenElement) {
      root.requestFullscreen().catch(function () { /* refused: the study goes on in the window */ });
    }
  }

  /** After a full-screen exit mid-task: a prompt (over the page) with a button to go back. */
  function askFullscreen() {
    if (document.getElementById("fullscreen-prompt")) return;
    var box = el("div", { id: "fullscreen-prompt", "class": "fullscreen-prompt", role: "dialog" });
    var inner = el("div", { "class": "page" }, "<h2>Please return to full screen</h2>" +
      "<p>The study runs in full screen. Press the button to go back.</p>");
    var button = /** @type {HTMLButtonElement} */ (el("button", { type: "button", id: "fullscreen-return" },
      "Return to full screen"));
    button.addEventListener("click", function () {
      enterFullscreen();
      if (box.parentNode) box.parentNode.removeChild(box);
    });
    inner.appendChild(button);
    box.appendChild(inner);
    document.body.appendChild(box);
    button.focus();
  }

  function watchEvents() {
    var q = state.queue;
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
      if (!document.fullscreenElement && state.running && state.timeline.fullscreen) askFullscreen();
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
    state.done = done;
    showProgress();
    var remaining = tl.trials.filter(function (t) { return !done[t.index]; });
    var built = buildTrials(remaining);
    if (built.unknown !== null) { unknownTrialType(built.unknown); return; }
    if (remaining.length === 0) { finish(); return; }
    var jsPsych = initJsPsych({
      display_element: "task",
      on_finish: function () { state.running = false; finish(); },
    });
    /** @type {any[]} */
    var timeline = [];
    var resuming = remaining.length < tl.trials.length;
    if (tl.fullscreen && document.fullscreenEnabled) {
      timeline.push(buttonScreen("<h2>Full screen</h2><p>This study runs in full screen. " +
        "Please stay in full screen until the end.</p>", "Enter full screen", "fullscreen",
        function () { enterFullscreen(); }));
    }
    if (!resuming) {
      timeline.push(buttonScreen("<div class='instructions'>" + tl.instructions_html + "</div>",
                                 "Start", "instructions"));
    } else {
      state.queue.event("resume", { next_index: remaining[0].index });
      timeline.push(buttonScreen("<h2>Welcome back</h2><p>You continue where you stopped: trial " +
        (countDone() + 1) + " of " + taskTotal() + ".</p>", "Continue", "resume"));
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
    state.running = true;
    jsPsych.run(timeline.concat(withScreens(remaining, built.trials, resuming)));
  }

  /**
   * Entry point of the task page.
   * @param {RunnerConfig} config
   */
  function start(config) {
    state.config = config;
    var token = resolveToken(config);
    if (token === null) {
      taskRoot().innerHTML = "<div class='page'><h2>Please reopen your study link</h2><p id='start-error'></p></div>";
      /** @type {HTMLElement} */ (document.getElementById("start-error")).textContent =
        config.reopen || "Please open your original study link again.";
      return;
    }
    if (config.resume_code) showResumeCode(config.resume_code);
    state.queue = new HumanlikeTrialQueue.TrialQueue({
      pid: config.pid, token: token, api: config.api,
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

  return { start: start, TRIAL_BUILDERS: TRIAL_BUILDERS, buildTrials: buildTrials,
           withScreens: withScreens, resolveToken: resolveToken, _state: state };
})();

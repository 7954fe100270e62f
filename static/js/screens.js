// @ts-check
/* The screens around the trials and the task page's messages: block introductions, "last part"
 * before the repeats, breaks every N trials, practice feedback and "practice over", fixation cross
 * and inter-trial interval, "welcome back" on a resume, full screen (the screen that enters it and
 * the prompt after an exit), and the error messages that replace the task. Reads the participant's
 * timeline from HumanlikeSession.state.
 */
var HumanlikeScreens = (function () {
  "use strict";

  var state = HumanlikeSession.state;

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

  /**
   * @param {string} text
   * @returns {string}
   */
  function escapeHtml(text) {
    var d = document.createElement("div");
    d.textContent = text;
    return d.innerHTML;
  }

  /** @returns {HTMLElement} the element the study runs in */
  function taskRoot() {
    return /** @type {HTMLElement} */ (document.getElementById("task"));
  }

  /**
   * Replace the task with a message: a heading and a paragraph `id` holding `text` (as text).
   * @param {string} title
   * @param {string} id
   * @param {string} text
   */
  function showMessage(title, id, text) {
    taskRoot().innerHTML = "<div class='page'><h2>" + title + "</h2><p id='" + id + "'></p></div>";
    /** @type {HTMLElement} */ (document.getElementById(id)).textContent = text;
  }

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
      return "<p>" + _("Press a category's key to raise its rating, <kbd>Shift</kbd> + key to lower it, " +
        "<kbd>Enter</kbd> to submit; or click. Keys: %(keys)s.", { keys: keys }) + "</p>";
    }
    if (type === "triad") {
      return "<p>" + _("<kbd>F</kbd> or <kbd>&larr;</kbd> for the left image, <kbd>J</kbd> or " +
        "<kbd>&rarr;</kbd> for the right image; or click it.") + "</p>";
    }
    return "<p>" + _("The keys are shown on each trial.") + "</p>";
  }

  /**
   * The block's title: "Part k of n" among the timeline's task blocks in order ("The task" when
   * there is one), so the first block's introduction is not called the next part.
   * @param {TimelineEntry} entry the first trial of the block
   * @returns {string}
   */
  function partTitle(entry) {
    /** @type {string[]} */
    var order = [];
    state.timeline.trials.forEach(function (t) {
      var name = t.block || "";
      if (t.type !== "debrief" && !t.is_repeat && order.indexOf(name) < 0) order.push(name);
    });
    if (order.length < 2) return _("The task");
    return _("Part %(part)s of %(parts)s", { part: order.indexOf(entry.block || "") + 1, parts: order.length });
  }

  /**
   * @param {TimelineEntry} entry the first trial of the block
   * @returns {object} a jsPsych trial
   */
  function introScreen(entry) {
    var info = (state.timeline.blocks || {})[entry.block || ""];
    var text = info && info.intro ? "<p class='hl-intro-text'>" + escapeHtml(info.intro) + "</p>" : "";
    var practice = entry.practice ? "<p>" + _("It starts with a few <strong>practice trials</strong>.") + "</p>" : "";
    return buttonScreen("<h2>" + partTitle(entry) + "</h2>" + text + "<div class='hl-keys'>" + keyHelp(entry.type) +
                        "</div>" + practice, _("Start"), "intro");
  }

  /**
   * @param {TimelineEntry[]} entries the repeated trials
   * @returns {object} a jsPsych trial
   */
  function repeatsScreen(entries) {
    /** @type {Record<string, boolean>} */
    var types = {};
    entries.forEach(function (e) { types[e.type] = true; });
    return buttonScreen("<h2>" + _("Last part") + "</h2><p>" + _("A few more trials like the ones before.") + "</p>" +
      "<div class='hl-keys'>" + Object.keys(types).map(keyHelp).join("") + "</div>", _("Start"), "intro");
  }

  /**
   * @param {number} trial the number of the next trial (1-based)
   * @returns {object} a jsPsych trial
   */
  function breakScreen(trial) {
    return buttonScreen("<h2>" + _("Take a break") + "</h2><p>" +
      _("You have done %(done)s of %(total)s trials. Rest your eyes for a moment, and continue when you are ready.",
        { done: trial - 1, total: HumanlikeSession.taskTotal() }) + "</p>",
      _("Continue when ready"), "break");
  }

  /** @returns {object} a jsPsych trial */
  function practiceOverScreen() {
    return buttonScreen("<h2>" + _("Practice over") + "</h2><p>" + _("The real trials start now. They work exactly " +
      "like the practice.") + "</p>", _("Start"), "practice_over");
  }

  /** @returns {object} a jsPsych trial: feedback after a practice rating or triad (no right answer) */
  function practiceFeedbackScreen() {
    return buttonScreen("<h2>" + _("Practice answer recorded") + "</h2><p>" + _("There is no right or wrong answer " +
      "here: answer as the images look to you.") + "</p>", _("Continue"), "practice_feedback");
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

  /** @returns {object} a jsPsych trial: "welcome back" on a resume, with where the participant stopped */
  function welcomeBackScreen() {
    var where = { trial: HumanlikeSession.countDone() + 1, total: HumanlikeSession.taskTotal() };
    var text = state.timeline.restarted_block
      ? _("This part of the study starts again from its beginning: trial %(trial)s of %(total)s.", where)
      : _("You continue where you stopped: trial %(trial)s of %(total)s.", where);
    return buttonScreen("<h2>" + _("Welcome back") + "</h2><p>" + text + "</p>", _("Continue"), "resume");
  }

  /**
   * The trials of `remaining` with the screens the spec puts around them: block introductions,
   * "last part" before the repeats, breaks every N trials (by trial number, so the same across
   * reloads; a break due on an introduced trial comes before the introduction), practice feedback and "practice over", fixation before and the inter-trial interval
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
      // a break falling on a block's first trial comes before its introduction (or "last part" /
      // "practice over"), never between the introduction and the trial it introduces
      if (task && every && entry.index > 0 && entry.index % every === 0 && !(first && resuming)) {
        out.push(breakScreen(entry.index + 1));
      }
      if (task && entry.is_repeat) {
        if (!repeatsShown) out.push(repeatsScreen(remaining.filter(function (e) { return e.is_repeat; })));
        repeatsShown = true;
      } else if (task && (first || !before || before.block !== entry.block)) {
        out.push(introScreen(entry));
      } else if (task && before && before.practice && !entry.practice && before.block === entry.block) {
        out.push(practiceOverScreen());
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

  /**
   * The polite "display not suitable" screen, before any trial (the spec's [display] refused this
   * display: refresh rate, whole frames, size in degrees, or calibration answers).
   * @param {string} reason refresh_rate | whole_frames | too_small | calibration_failed
   * @param {string} detail what was measured, shown as text
   * @param {boolean} [leaving] the server ended the study with the platform's code: the page is
   *   about to go back to the recruitment site (no need to return the study by hand)
   */
  function unsuitableScreen(reason, detail, leaving) {
    /** @type {Record<string, string>} */
    var why = {
      refresh_rate: _("This study needs a screen that refreshes at a particular rate, and yours runs at another."),
      whole_frames: _("This study shows images for durations your screen's refresh rate cannot show exactly."),
      too_small: _("The images of this study would not fit in your browser window at the size the study needs."),
      calibration_failed: _("The screen-size and distance measurement did not give plausible values."),
    };
    taskRoot().innerHTML = "<div class='page hl-unsuitable' data-screen='unsuitable' role='status'>" +
      "<h2>" + _("Thank you, but this display is not suitable") + "</h2><p id='unsuitable-why'></p>" +
      (leaving ? "<p>" + _("You did nothing wrong. Taking you back to the recruitment site, which records " +
                 "that this display did not suit the study&hellip;") + "</p>"
               : "<p>" + _("Please return the study on your recruitment platform (or try again on another computer, " +
                 "or in a larger window). You did nothing wrong.") + "</p>") +
      "<p class='hl-unsuitable-detail'>" + _("Measured:") + " <span id='unsuitable-detail'></span></p></div>";
    /** @type {HTMLElement} */ (document.getElementById("unsuitable-why")).textContent = why[reason] || reason;
    /** @type {HTMLElement} */ (document.getElementById("unsuitable-detail")).textContent = detail;
    var root = /** @type {HTMLElement} */ (document.querySelector(".hl-unsuitable"));
    root.dataset.reason = reason;
  }

  /* ---- full screen ---- */

  function enterFullscreen() {
    var root = document.documentElement;
    if (root.requestFullscreen && !document.fullscreenElement) {
      root.requestFullscreen().catch(function () { /* refused: the study goes on in the window */ });
    }
  }

  /** @returns {object} a jsPsych trial: the screen whose button enters full screen */
  function fullscreenScreen() {
    return buttonScreen("<h2>" + _("Full screen") + "</h2><p>" + _("This study runs in full screen. " +
      "Please stay in full screen until the end.") + "</p>", _("Enter full screen"), "fullscreen",
      function () { enterFullscreen(); });
  }

  /** After a full-screen exit mid-task: a prompt (over the page) with a button to go back. */
  function askFullscreen() {
    if (document.getElementById("fullscreen-prompt")) return;
    var box = el("div", { id: "fullscreen-prompt", "class": "fullscreen-prompt", role: "dialog" });
    var inner = el("div", { "class": "page" }, "<h2>" + _("Please return to full screen") + "</h2>" +
      "<p>" + _("The study runs in full screen. Press the button to go back.") + "</p>");
    var button = /** @type {HTMLButtonElement} */ (el("button", { type: "button", id: "fullscreen-return" },
      _("Return to full screen")));
    button.addEventListener("click", function () {
      enterFullscreen();
      if (box.parentNode) box.parentNode.removeChild(box);
    });
    inner.appendChild(button);
    box.appendChild(inner);
    document.body.appendChild(box);
    button.focus();
  }

  return { el: el, escapeHtml: escapeHtml, taskRoot: taskRoot, showMessage: showMessage,
           buttonScreen: buttonScreen, welcomeBackScreen: welcomeBackScreen, withScreens: withScreens,
           fullscreenScreen: fullscreenScreen, askFullscreen: askFullscreen,
           unsuitableScreen: unsuitableScreen };
})();

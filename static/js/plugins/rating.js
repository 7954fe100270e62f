// @ts-check
/**
 * jsPsych 8 plugin "rating": one image and K category rows, each rated on a few levels
 * (default 0, 25, 50, 75, 100 %). Ratings need not sum to 100 %; there is no feedback.
 *
 * Keyboard alone works: a category's key steps its level up (saturating at the top level),
 * Shift + key steps it down (saturating at the bottom); Enter submits. The mouse works too: click a
 * level, then the Submit button.
 *
 * Keys are matched on the keydown event itself (not through jsPsych's keyboard listener, whose
 * callback only receives `event.key`): with Shift held, `event.key` of a digit is a symbol that
 * depends on the layout ("!" for Shift+1 on a US keyboard, "1" on a French one), so a digit key is
 * matched by its physical key (`event.code` "Digit1" or "Numpad1"), and a letter by
 * `event.key.toLowerCase()`. Shift state is `event.shiftKey`. Auto-repeated keydowns (a held key)
 * and keys pressed with Ctrl, Alt or Meta are ignored, so each deliberate press is one step.
 *
 * Presentation goes through HumanlikePresentation (static/js/presentation.js, shared with `triad`,
 * built on HumanlikeFrameClock): the image appears in a requestAnimationFrame callback and, in
 * "duration" mode, is hidden (or replaced by `mask`) after a whole number of frames. All times are from rAF timestamps and event timestamps on the
 * performance.now() clock, relative to the stimulus onset.
 */
/** @typedef {{label: string, key: string}} Category */

/**
 * A rating trial's parameters as the plugin receives them (jsPsych has applied the defaults).
 * @typedef {object} RatingTrial
 * @property {string} stimulus
 * @property {number} stimulus_height_px
 * @property {Category[]} categories
 * @property {number[]} levels
 * @property {boolean} require_change
 * @property {"until_response" | "duration"} presentation
 * @property {number | null} duration_ms
 * @property {string | null} mask
 * @property {number} frame_ms
 * @property {string | null} prompt
 * @property {string | null} hint
 * @property {string} button_label
 * @property {string} require_change_message
 */

var jsPsychRating = (function (jspsych) {
  "use strict";

  var version = "1.0.0";

  const info = {
    name: "rating",
    version: version,
    parameters: {
      /** URL of the image to rate (preloaded by jsPsych's preload plugin with `auto_preload`). */
      stimulus: {
        type: jspsych.ParameterType.IMAGE,
        default: undefined,
      },
      /** Height of the image on screen, in CSS pixels. */
      stimulus_height_px: {
        type: jspsych.ParameterType.INT,
        default: 280,
      },
      /** The rows: `{label, key}` each. `label` names the category in the data; `key` (a letter or
       * a digit) steps the row's level up, Shift + key steps it down. Labels and keys are unique. */
      categories: {
        type: jspsych.ParameterType.COMPLEX,
        array: true,
        default: undefined,
        nested: {
          label: { type: jspsych.ParameterType.STRING, default: undefined },
          key: { type: jspsych.ParameterType.KEY, default: undefined },
        },
      },
      /** The levels of every row, in percent, ascending. Each row starts at the first level. */
      levels: {
        type: jspsych.ParameterType.INT,
        array: true,
        default: [0, 25, 50, 75, 100],
      },
      /** If true, the participant must change at least one level before submitting. */
      require_change: {
        type: jspsych.ParameterType.BOOL,
        default: false,
      },
      /** "until_response": the image stays until the ratings are submitted; "duration": the image
       * is shown for `duration_ms` (rounded to whole frames), then `mask` (or nothing). */
      presentation: {
        type: jspsych.ParameterType.SELECT,
        options: ["until_response", "duration"],
        default: "until_response",
      },
      /** Requested presentation time in ms for `presentation: "duration"`. */
      duration_ms: {
        type: jspsych.ParameterType.INT,
        default: null,
      },
      /** URL of the image shown in place of the stimulus after `duration_ms` (blank if null). */
      mask: {
        type: jspsych.ParameterType.IMAGE,
        default: null,
      },
      /** Duration of one screen refresh in ms, as measured by HumanlikeFrameClock.measureRefresh. */
      frame_ms: {
        type: jspsych.ParameterType.FLOAT,
        default: 1000 / 60,
      },
      /** HTML shown above the rows (e.g. the question). */
      prompt: {
        type: jspsych.ParameterType.HTML_STRING,
        default: null,
      },
      /** HTML shown below the rows explaining the keys; null hides it. */
      hint: {
        type: jspsych.ParameterType.HTML_STRING,
        default:
          _("Press a category's key to raise its rating, <kbd>Shift</kbd> + key to lower it, " +
            "<kbd>Enter</kbd> to submit. Or click."),
      },
      /** Label of the submit button. */
      button_label: {
        type: jspsych.ParameterType.STRING,
        default: _("Submit"),
      },
      /** Text shown when `require_change` blocks a submission. */
      require_change_message: {
        type: jspsych.ParameterType.STRING,
        default: _("Please rate at least one category before submitting."),
      },
    },
    data: {
      /** Category label -> submitted level / 100 (0, .25, .5, .75, 1 with the default levels). */
      ratings: { type: jspsych.ParameterType.OBJECT },
      /** Stimulus onset (rAF timestamp) -> submit event, in ms. */
      rt_ms: { type: jspsych.ParameterType.FLOAT },
      /** Stimulus onset -> first change of any level, in ms; null if nothing was changed. */
      first_rt_ms: { type: jspsych.ParameterType.FLOAT },
      /** Measured time the image was on screen, in ms: hide - onset rAF timestamps in "duration"
       * mode, onset -> submit in "until_response" mode (or if submitted before the hide). */
      presented_ms: { type: jspsych.ParameterType.FLOAT },
      /** Screen refreshes the image was on: round(presented_ms / frame_ms) at a timed hide,
       * ceil(presented_ms / frame_ms) when the response came first (see frame_clock.js). */
      frames: { type: jspsych.ParameterType.INT },
      /** max(1, round(duration_ms / frame_ms)) in "duration" mode; null in "until_response". */
      requested_frames: { type: jspsych.ParameterType.INT },
      /** Number of level changes (presses or clicks that left a level unchanged do not count). */
      n_changes: { type: jspsych.ParameterType.INT },
      /** "keyboard", "mouse" or "both": what the participant used to change levels and submit. */
      input_modality: { type: jspsych.ParameterType.STRING },
      /** URL of the image. */
      stimulus: { type: jspsych.ParameterType.STRING },
    },
  };

  /**
   * Validate `categories` and return a matcher: keydown event -> row index or -1.
   * @param {Category[]} categories
   * @returns {(event: KeyboardEvent) => number}
   */
  function keyMatcher(categories) {
    const byKey = new Map();
    const byCode = new Map();
    const labels = new Set();
    categories.forEach((category, row) => {
      const label = category.label;
      const key = category.key;
      if (typeof label !== "string" || label === "") {
        throw new Error(`rating: categories[${row}].label must be a non-empty string`);
      }
      if (labels.has(label)) {
        throw new Error(`rating: categories[${row}].label "${label}" is used twice`);
      }
      labels.add(label);
      if (typeof key !== "string" || key.length === 0) {
        throw new Error(`rating: categories[${row}].key must be a non-empty string`);
      }
      const lower = key.toLowerCase();
      if (lower === "enter" || lower === "shift" || lower === " ") {
        throw new Error(`rating: categories[${row}].key "${key}" is reserved`);
      }
      if (byKey.has(lower)) {
        throw new Error(`rating: categories[${row}].key "${key}" is used twice`);
      }
      byKey.set(lower, row);
      if (/^[0-9]$/.test(key)) {
        byCode.set("Digit" + key, row);
        byCode.set("Numpad" + key, row);
      }
    });
    return (event) => {
      if (event.code && byCode.has(event.code)) {
        return byCode.get(event.code);
      }
      if (typeof event.key === "string") {
        const row = byKey.get(event.key.toLowerCase());
        if (row !== undefined) {
          return row;
        }
      }
      return -1;
    };
  }

  /**
   * @param {string} tag
   * @param {string} [className]
   * @param {string} [text]
   * @returns {HTMLElement}
   */
  function element(tag, className, text) {
    const el = document.createElement(tag);
    if (className) {
      el.className = className;
    }
    if (text !== undefined) {
      el.textContent = text;
    }
    return el;
  }

  /**
   * Check `categories` and `levels`; return the key matcher.
   * @param {RatingTrial} trial
   * @returns {(event: KeyboardEvent) => number}
   */
  function checkedMatcher(trial) {
    const categories = trial.categories;
    if (!Array.isArray(categories) || categories.length === 0) {
      throw new Error("rating: categories must be a non-empty array of {label, key}");
    }
    const levels = trial.levels;
    if (!Array.isArray(levels) || levels.length < 2) {
      throw new Error("rating: levels must be an array of at least two numbers");
    }
    for (let i = 1; i < levels.length; i++) {
      if (!(levels[i] > levels[i - 1])) {
        throw new Error("rating: levels must be strictly ascending");
      }
    }
    return keyMatcher(categories);
  }

  class RatingPlugin {
    static info = info;

    /** @param {JsPsych} jsPsych */
    constructor(jsPsych) {
      this.jsPsych = jsPsych;
    }

    /**
     * @param {HTMLElement} display_element
     * @param {RatingTrial} trial
     */
    trial(display_element, trial) {
      const P = HumanlikePresentation;
      const categories = trial.categories;
      const rowForEvent = checkedMatcher(trial);
      const levels = trial.levels;
      const duration_ms = P.durationFor(trial, "rating");

      // ---- display ------------------------------------------------------------------------
      const root = element("div", "hl-trial hl-rating");
      root.dataset.phase = "loading";
      const layout = element("div", "hl-rating-layout");
      const frame = element("div", "hl-stimulus-frame");
      frame.style.height = trial.stimulus_height_px + "px";
      const img = P.image(trial.stimulus, "hl-stimulus", trial.stimulus_height_px);
      frame.appendChild(img);
      const maskSrc = P.maskFor(trial, duration_ms);
      const masks = maskSrc === null ? [] : [P.image(maskSrc, "hl-mask", null)];
      masks.forEach((mask) => frame.appendChild(mask));
      layout.appendChild(frame);

      const panel = element("div", "hl-rating-panel");
      if (trial.prompt !== null) {
        const prompt = element("div", "hl-prompt");
        prompt.innerHTML = trial.prompt;
        panel.appendChild(prompt);
      }
      const rows = element("div", "hl-rating-rows");
      /** @type {HTMLButtonElement[][]} */
      const buttons = categories.map((/** @type {Category} */ category, /** @type {number} */ row) => {
        const rowEl = element("div", "hl-rating-row");
        rowEl.setAttribute("role", "radiogroup");
        rowEl.setAttribute("aria-label", _("%(label)s (key %(key)s)", { label: category.label, key: category.key }));
        rowEl.dataset.row = String(row);
        const name = element("span", "hl-rating-name");
        name.appendChild(element("span", "hl-rating-label", category.label));
        name.appendChild(element("kbd", "hl-key", category.key.toUpperCase()));
        rowEl.appendChild(name);
        const group = element("div", "hl-levels");
        const rowButtons = levels.map((/** @type {number} */ level, /** @type {number} */ index) => {
          const b = /** @type {HTMLButtonElement} */ (element("button", "hl-level", `${level}%`));
          b.type = "button";
          b.tabIndex = -1;
          b.setAttribute("role", "radio");
          b.dataset.row = String(row);
          b.dataset.index = String(index);
          group.appendChild(b);
          return b;
        });
        rowEl.appendChild(group);
        rows.appendChild(rowEl);
        return rowButtons;
      });
      panel.appendChild(rows);
      if (trial.hint !== null) {
        const hint = element("p", "hl-hint");
        hint.innerHTML = trial.hint;
        panel.appendChild(hint);
      }
      const message = element("p", "hl-message");
      message.setAttribute("aria-live", "polite");
      panel.appendChild(message);
      const status = P.liveRegion(panel); // screen readers: what changed, what the trial waits for
      const submit = /** @type {HTMLButtonElement} */ (element("button", "hl-submit", trial.button_label));
      submit.type = "button";
      panel.appendChild(submit);
      layout.appendChild(panel);
      root.appendChild(layout);
      display_element.innerHTML = "";
      display_element.appendChild(root);

      // ---- state --------------------------------------------------------------------------
      /** @type {number[]} level index per row */
      const state = categories.map(() => 0);
      /** @type {number | null} */
      let firstChange = null;
      let nChanges = 0;
      let finished = false;
      const modalities = new P.Modalities();

      /** @param {number} row */
      const render = (row) => {
        buttons[row].forEach((b, index) => {
          const selected = index === state[row];
          b.classList.toggle("hl-selected", selected);
          b.setAttribute("aria-checked", selected ? "true" : "false");
        });
      };
      categories.forEach((/** @type {Category} */ _, /** @type {number} */ row) => render(row));

      /**
       * @param {number} row
       * @param {number} index
       * @param {number} t
       */
      const setLevel = (row, index, t) => {
        const clamped = Math.min(levels.length - 1, Math.max(0, index));
        if (clamped === state[row]) {
          return;
        }
        state[row] = clamped;
        nChanges += 1;
        if (firstChange === null) {
          firstChange = t;
        }
        message.textContent = "";
        render(row);
        status.textContent = `${categories[row].label}: ${buttons[row][clamped].textContent}`;
      };

      /** @param {number} t */
      const trySubmit = (t) => {
        if (trial.require_change && nChanges === 0) {
          message.textContent = trial.require_change_message;
          return;
        }
        endTrial(t);
      };

      /** @param {KeyboardEvent} event */
      const onKeydown = (event) => {
        if (presentation.onset() === null || finished || event.ctrlKey || event.altKey || event.metaKey) {
          return;
        }
        if (event.key === "Enter") {
          event.preventDefault();
          if (!event.repeat) {
            modalities.add("keyboard");
            trySubmit(P.eventTime(event));
          }
          return;
        }
        const row = rowForEvent(event);
        if (row < 0) {
          return;
        }
        event.preventDefault();
        if (event.repeat) {
          return;
        }
        modalities.add("keyboard");
        setLevel(row, state[row] + (event.shiftKey ? -1 : 1), P.eventTime(event));
      };

      /** @param {MouseEvent} event */
      const onClick = (event) => {
        if (presentation.onset() === null || finished) {
          return;
        }
        const target = /** @type {HTMLElement} */ (event.target).closest("button");
        if (target === null || !root.contains(target)) {
          return;
        }
        modalities.add(P.clickModality(event));
        if (target === submit) {
          trySubmit(P.eventTime(event));
        } else if (target.classList.contains("hl-level")) {
          setLevel(Number(target.dataset.row), Number(target.dataset.index), P.eventTime(event));
        }
      };

      const keyTarget = this.jsPsych.getDisplayContainerElement();
      keyTarget.addEventListener("keydown", onKeydown);
      root.addEventListener("click", onClick);

      /** @param {number} t */
      const endTrial = (t) => {
        finished = true;
        keyTarget.removeEventListener("keydown", onKeydown);
        root.removeEventListener("click", onClick);
        const shown = presentation.onset();
        const onset = shown === null ? t : shown;
        const timing = presentation.stop(t);
        /** @type {Record<string, number>} */
        const ratings = {};
        categories.forEach((/** @type {Category} */ category, /** @type {number} */ row) => {
          ratings[category.label] = levels[state[row]] / 100;
        });
        this.jsPsych.finishTrial({
          ratings: ratings,
          rt_ms: P.round1(Math.max(0, t - onset)),
          first_rt_ms: firstChange === null ? null : P.round1(Math.max(0, firstChange - onset)),
          presented_ms: timing.presented_ms,
          frames: timing.frames,
          requested_frames: timing.requested_frames,
          n_changes: nChanges,
          input_modality: modalities.value(),
          stimulus: trial.stimulus,
        });
      };

      const presentation = P.present({
        root: root,
        target: [img],
        mask: masks,
        duration_ms: duration_ms,
        frame_ms: trial.frame_ms,
        onShow: () => {
          status.textContent = _("Rate each category: press its key to raise its rating, Shift and " +
            "the key to lower it, Enter to submit.");
        },
      });
    }

    /**
     * jsPsych simulation: "data-only" finishes with plausible data and shows nothing; "visual"
     * runs the real trial and drives it with synthetic key presses (or clicks when
     * `simulation_options.data.input_modality` is "mouse").
     * @param {RatingTrial} trial
     * @param {string} simulation_mode
     * @param {any} simulation_options
     * @param {() => void} load_callback
     */
    simulate(trial, simulation_mode, simulation_options, load_callback) {
      if (simulation_mode === "data-only") {
        load_callback();
        this.jsPsych.finishTrial(this.simulatedData(trial, simulation_options));
      } else if (simulation_mode === "visual") {
        this.simulateVisual(trial, simulation_options, load_callback);
      }
    }

    /**
     * Plausible data for `trial`: random levels, an ex-Gaussian response time, the timing the
     * presentation would report; `simulation_options.data` overrides any field.
     * @param {RatingTrial} trial
     * @param {any} simulation_options
     * @returns {Record<string, any>}
     */
    simulatedData(trial, simulation_options) {
      checkedMatcher(trial);
      const random = this.jsPsych.randomization;
      const levels = trial.levels;
      /** @type {number[]} level index per row */
      const chosen = [];
      trial.categories.forEach(() => chosen.push(random.randomInt(0, levels.length - 1)));
      if (trial.require_change && !chosen.some((index) => index > 0)) {
        chosen[0] = 1;
      }
      /** @type {Record<string, number>} */
      const ratings = {};
      trial.categories.forEach((/** @type {Category} */ category, /** @type {number} */ row) => {
        ratings[category.label] = levels[chosen[row]] / 100;
      });
      const given = this.jsPsych.pluginAPI.mergeSimulationData(
        {
          ratings: ratings,
          rt_ms: HumanlikePresentation.round1(random.sampleExGaussian(1500, 300, 1 / 500, true)),
          input_modality: "keyboard",
          stimulus: trial.stimulus,
        },
        simulation_options
      );
      // What follows from the ratings and the response time, unless given: stepping each row up
      // from the first level takes one change per level.
      const n_changes = trial.categories.reduce(
        (/** @type {number} */ sum, /** @type {Category} */ category) =>
          sum + Math.max(0, levels.indexOf(Math.round(given.ratings[category.label] * 100))),
        0
      );
      const timing = HumanlikePresentation.simulatedTiming(trial, given.rt_ms);
      return Object.assign(
        {
          n_changes: n_changes,
          first_rt_ms: n_changes === 0 ? null : HumanlikePresentation.round1(given.rt_ms * 0.4),
          presented_ms: timing.presented_ms,
          frames: timing.frames,
          requested_frames: timing.requested_frames,
        },
        given
      );
    }

    /**
     * @param {RatingTrial} trial
     * @param {any} simulation_options
     * @param {() => void} load_callback
     */
    simulateVisual(trial, simulation_options, load_callback) {
      const data = this.simulatedData(trial, simulation_options);
      const display_element = this.jsPsych.getDisplayElement();
      this.trial(display_element, trial);
      load_callback();
      const api = this.jsPsych.pluginAPI;
      HumanlikePresentation.whenShown(display_element).then((root) => {
        /** @type {Array<() => void>} */
        const actions = [];
        const mouse = data.input_modality === "mouse";
        trial.categories.forEach((/** @type {Category} */ category, /** @type {number} */ row) => {
          const target = trial.levels.indexOf(Math.round(data.ratings[category.label] * 100));
          if (target <= 0) {
            return;
          }
          if (mouse) {
            // a mouse goes straight to the level; a key steps up to it one level at a time
            const button = root.querySelector(`.hl-level[data-row="${row}"][data-index="${target}"]`);
            actions.push(() => clickLikeAMouse(button));
          } else {
            for (let step = 1; step <= target; step++) {
              actions.push(() => api.pressKey(category.key));
            }
          }
        });
        if (mouse) {
          actions.push(() => clickLikeAMouse(root.querySelector(".hl-submit")));
        } else {
          actions.push(() => api.pressKey("Enter"));
        }
        const gap = Math.max(1, data.rt_ms / actions.length);
        actions.forEach((action, i) => {
          this.jsPsych.pluginAPI.setTimeout(action, gap * (i + 1));
        });
      });
    }
  }

  /**
   * A click with `detail` 1, as a real mouse gives (jsPsych's clickTarget gives 0, a keyboard click).
   * @param {Element | null} target
   */
  function clickLikeAMouse(target) {
    if (target !== null) {
      target.dispatchEvent(new MouseEvent("click", { bubbles: true, detail: 1 }));
    }
  }

  return RatingPlugin;
})(jsPsychModule);

/* The task page's "rating" trial: a timeline entry of type "rating" as this plugin's parameters
 * (registered with HumanlikeTrialTypes, static/js/trial_types.js). */
HumanlikeTrialTypes.register("rating", function ratingTrial(entry, ctx) {
  "use strict";
  var p = HumanlikeTrialTypes.presentationParams(ctx);
  return {
    type: jsPsychRating,
    stimulus: ctx.stimulusUrl(entry.stimulus || ""),
    categories: ctx.timeline.categories,
    stimulus_height_px: ctx.timeline.presentation.image_height_px,
    presentation: p.presentation,
    duration_ms: p.duration_ms,
    mask: p.mask,
    frame_ms: p.frame_ms,
    prompt: entry.prompt || "",
    data: { humanlike_index: entry.index },
    /** @param {any} data */
    on_finish: function (data) {
      ctx.send(entry, {
        ratings: data.ratings,
        n_changes: data.n_changes,
        input_modality: data.input_modality,
        requested_frames: data.requested_frames,
      }, data);
    },
  };
});

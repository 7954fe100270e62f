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
 * Presentation goes through HumanlikeFrameClock (static/js/frame_clock.js): the image appears in a
 * requestAnimationFrame callback and, in "duration" mode, is hidden (or replaced by `mask`) after a
 * whole number of frames. All times are from rAF timestamps and event timestamps on the
 * performance.now() clock, relative to the stimulus onset.
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
          "Press a category's key to raise its rating, <kbd>Shift</kbd> + key to lower it, " +
          "<kbd>Enter</kbd> to submit. Or click.",
      },
      /** Label of the submit button. */
      button_label: {
        type: jspsych.ParameterType.STRING,
        default: "Submit",
      },
      /** Text shown when `require_change` blocks a submission. */
      require_change_message: {
        type: jspsych.ParameterType.STRING,
        default: "Please rate at least one category before submitting.",
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

  /** Validate `categories` and return a matcher: keydown event -> row index or -1. */
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

  /** Event time on the performance.now() clock (KeyboardEvent/MouseEvent timeStamp). */
  function eventTime(event) {
    const t = event && event.timeStamp;
    return typeof t === "number" && t > 0 ? t : performance.now();
  }

  function round1(x) {
    return Math.round(x * 10) / 10;
  }

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

  function decoded(img) {
    return typeof img.decode === "function" ? img.decode().catch(() => undefined) : Promise.resolve();
  }

  class RatingPlugin {
    constructor(jsPsych) {
      this.jsPsych = jsPsych;
    }

    trial(display_element, trial) {
      const categories = trial.categories;
      if (!Array.isArray(categories) || categories.length === 0) {
        throw new Error("rating: categories must be a non-empty array of {label, key}");
      }
      const rowForEvent = keyMatcher(categories);
      const levels = trial.levels;
      if (!Array.isArray(levels) || levels.length < 2) {
        throw new Error("rating: levels must be an array of at least two numbers");
      }
      for (let i = 1; i < levels.length; i++) {
        if (!(levels[i] > levels[i - 1])) {
          throw new Error("rating: levels must be strictly ascending");
        }
      }
      const duration_ms = trial.presentation === "duration" ? trial.duration_ms : null;
      if (trial.presentation === "duration" && !(trial.duration_ms > 0)) {
        throw new Error('rating: presentation "duration" needs a positive duration_ms');
      }

      // ---- display ------------------------------------------------------------------------
      const root = element("div", "hl-trial hl-rating");
      root.dataset.phase = "loading";
      const layout = element("div", "hl-rating-layout");
      const frame = element("div", "hl-stimulus-frame");
      frame.style.height = trial.stimulus_height_px + "px";
      const img = element("img", "hl-stimulus");
      img.src = trial.stimulus;
      img.alt = "";
      img.draggable = false;
      img.style.height = trial.stimulus_height_px + "px";
      img.style.visibility = "hidden";
      frame.appendChild(img);
      let maskImg = null;
      if (trial.mask !== null && duration_ms !== null) {
        maskImg = element("img", "hl-mask");
        maskImg.src = trial.mask;
        maskImg.alt = "";
        maskImg.draggable = false;
        maskImg.style.visibility = "hidden";
        frame.appendChild(maskImg);
      }
      layout.appendChild(frame);

      const panel = element("div", "hl-rating-panel");
      if (trial.prompt !== null) {
        const prompt = element("div", "hl-prompt");
        prompt.innerHTML = trial.prompt;
        panel.appendChild(prompt);
      }
      const rows = element("div", "hl-rating-rows");
      const buttons = categories.map((category, row) => {
        const rowEl = element("div", "hl-rating-row");
        rowEl.setAttribute("role", "radiogroup");
        rowEl.setAttribute("aria-label", `${category.label} (key ${category.key})`);
        rowEl.dataset.row = String(row);
        const name = element("span", "hl-rating-name");
        name.appendChild(element("span", "hl-rating-label", category.label));
        name.appendChild(element("kbd", "hl-key", category.key.toUpperCase()));
        rowEl.appendChild(name);
        const group = element("div", "hl-levels");
        const rowButtons = levels.map((level, index) => {
          const b = element("button", "hl-level", `${level}%`);
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
      const submit = element("button", "hl-submit", trial.button_label);
      submit.type = "button";
      panel.appendChild(submit);
      layout.appendChild(panel);
      root.appendChild(layout);
      display_element.innerHTML = "";
      display_element.appendChild(root);

      // ---- state --------------------------------------------------------------------------
      const state = categories.map(() => 0); // level index per row
      let onset = null;
      let firstChange = null;
      let nChanges = 0;
      let finished = false;
      const modalities = new Set();
      let clock = null;

      const render = (row) => {
        buttons[row].forEach((b, index) => {
          const selected = index === state[row];
          b.classList.toggle("hl-selected", selected);
          b.setAttribute("aria-checked", selected ? "true" : "false");
        });
      };
      categories.forEach((_, row) => render(row));

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
      };

      const trySubmit = (t) => {
        if (trial.require_change && nChanges === 0) {
          message.textContent = trial.require_change_message;
          return;
        }
        endTrial(t);
      };

      const onKeydown = (event) => {
        if (onset === null || finished || event.ctrlKey || event.altKey || event.metaKey) {
          return;
        }
        if (event.key === "Enter") {
          event.preventDefault();
          if (!event.repeat) {
            modalities.add("keyboard");
            trySubmit(eventTime(event));
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
        setLevel(row, state[row] + (event.shiftKey ? -1 : 1), eventTime(event));
      };

      const onClick = (event) => {
        if (onset === null || finished) {
          return;
        }
        const target = event.target.closest("button");
        if (target === null || !root.contains(target)) {
          return;
        }
        // detail === 0: a click synthesised from the keyboard (Space on a focused button).
        modalities.add(event.detail === 0 ? "keyboard" : "mouse");
        if (target === submit) {
          trySubmit(eventTime(event));
        } else if (target.classList.contains("hl-level")) {
          setLevel(Number(target.dataset.row), Number(target.dataset.index), eventTime(event));
        }
      };

      const keyTarget = this.jsPsych.getDisplayContainerElement();
      keyTarget.addEventListener("keydown", onKeydown);
      root.addEventListener("click", onClick);

      const endTrial = (t) => {
        finished = true;
        keyTarget.removeEventListener("keydown", onKeydown);
        root.removeEventListener("click", onClick);
        const timing = clock.stop(t);
        root.dataset.phase = "done";
        const ratings = {};
        categories.forEach((category, row) => {
          ratings[category.label] = levels[state[row]] / 100;
        });
        let modality = null;
        if (modalities.size === 2) {
          modality = "both";
        } else if (modalities.size === 1) {
          modality = modalities.values().next().value;
        }
        this.jsPsych.finishTrial({
          ratings: ratings,
          rt_ms: round1(Math.max(0, t - onset)),
          first_rt_ms: firstChange === null ? null : round1(Math.max(0, firstChange - onset)),
          presented_ms: timing.presented_ms,
          frames: timing.frames,
          requested_frames: timing.requested_frames,
          n_changes: nChanges,
          input_modality: modality,
          stimulus: trial.stimulus,
        });
      };

      // ---- presentation: decode the (preloaded) images, then show in a rAF callback --------
      const images = maskImg === null ? [img] : [img, maskImg];
      Promise.all(images.map(decoded)).then(() => {
        if (!root.isConnected) {
          return; // the trial was ended from outside before the image was ready
        }
        clock = HumanlikeFrameClock.present({
          target: img,
          mask: maskImg,
          duration_ms: duration_ms,
          frame_ms: trial.frame_ms,
          onShow: (t) => {
            onset = t;
            root.dataset.phase = "stimulus";
          },
          onHide: () => {
            root.dataset.phase = maskImg === null ? "blank" : "mask";
          },
        });
      });
    }
  }
  RatingPlugin.info = info;

  return RatingPlugin;
})(jsPsychModule);

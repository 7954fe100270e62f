// @ts-check
/**
 * jsPsych 8 plugin "odd_one_out": a triplet trial (the THINGS odd-one-out task, Hebart et al. 2020,
 * 2023). Three images side by side; the participant picks the one least like the other two with
 * 1, 2, 3 (or ArrowLeft, ArrowDown, ArrowRight) for left, middle, right, or by clicking it. No
 * feedback.
 *
 * Keys go through jsPsych's keyboard listener (pluginAPI.getKeyboardResponse), registered at the
 * stimulus onset. Presentation goes through HumanlikePresentation (static/js/presentation.js, shared
 * with `rating` and `triad`): the three images appear together in a requestAnimationFrame callback
 * and, in "duration" mode, are hidden together (each replaced by `mask`, or blank) after a whole
 * number of frames. Times are relative to the onset rAF timestamp, on the performance.now() clock.
 * The runner sends the server only what the participant did; the server keeps each trial's design
 * (which image was where) itself.
 */
/**
 * An odd-one-out trial's parameters as the plugin receives them (jsPsych has applied the defaults).
 * @typedef {object} OddOneOutTrial
 * @property {string} left
 * @property {string} middle
 * @property {string} right
 * @property {number} image_height_px
 * @property {"until_response" | "duration"} presentation
 * @property {number | null} duration_ms
 * @property {string | null} mask
 * @property {number} frame_ms
 * @property {string | null} prompt
 */

var jsPsychOddOneOut = (function (jspsych) {
  "use strict";

  var version = "1.0.0";

  /** The three positions, left to right. */
  const POSITIONS = ["left", "middle", "right"];
  /** @returns {Record<string, string>} each position's accessible name, in the page's language */
  const SIDE_NAMES = () => ({ left: _("left image"), middle: _("middle image"), right: _("right image") });
  /** @returns {Record<string, string>} what the status region says once a position is chosen */
  const CHOSEN = () => ({ left: _("Left image chosen."), middle: _("Middle image chosen."),
                          right: _("Right image chosen.") });

  /** @type {Record<string, string>} */
  const KEY_TO_CHOICE = {
    "1": "left", arrowleft: "left",
    "2": "middle", arrowdown: "middle",
    "3": "right", arrowright: "right",
  };

  const info = {
    name: "odd_one_out",
    version: version,
    parameters: {
      /** URL of the image on the left. */
      left: { type: jspsych.ParameterType.IMAGE, default: undefined },
      /** URL of the image in the middle. */
      middle: { type: jspsych.ParameterType.IMAGE, default: undefined },
      /** URL of the image on the right. */
      right: { type: jspsych.ParameterType.IMAGE, default: undefined },
      /** Height of each image on screen, in CSS pixels. */
      image_height_px: { type: jspsych.ParameterType.INT, default: 200 },
      /** "until_response": the images stay until the choice; "duration": they are shown for
       * `duration_ms` (rounded to whole frames), then `mask` (or nothing) in each position. */
      presentation: {
        type: jspsych.ParameterType.SELECT,
        options: ["until_response", "duration"],
        default: "until_response",
      },
      /** Requested presentation time in ms for `presentation: "duration"`. */
      duration_ms: { type: jspsych.ParameterType.INT, default: null },
      /** URL of the image shown in each of the three positions after `duration_ms` (blank if null). */
      mask: { type: jspsych.ParameterType.IMAGE, default: null },
      /** Duration of one screen refresh in ms, as measured by HumanlikeFrameClock.measureRefresh. */
      frame_ms: { type: jspsych.ParameterType.FLOAT, default: 1000 / 60 },
      /** HTML shown below the images; null hides it. */
      prompt: {
        type: jspsych.ParameterType.HTML_STRING,
        default:
          "<p>" + _("Which image is the odd one out, the least like the other two?") + "</p>" +
          "<p>" + _("<kbd>1</kbd> or <kbd>&larr;</kbd> left, <kbd>2</kbd> or <kbd>&darr;</kbd> middle, " +
          "<kbd>3</kbd> or <kbd>&rarr;</kbd> right, or click the image.") + "</p>",
      },
    },
    data: {
      /** "left", "middle" or "right": the position of the image chosen as the odd one out. */
      choice: { type: jspsych.ParameterType.STRING },
      /** URL of the image chosen as the odd one out. */
      chosen: { type: jspsych.ParameterType.STRING },
      /** Stimulus onset (rAF timestamp) -> choice, in ms. */
      rt_ms: { type: jspsych.ParameterType.FLOAT },
      /** Measured time the images were on screen, in ms (as in `triad`). */
      presented_ms: { type: jspsych.ParameterType.FLOAT },
      /** Screen refreshes the images were on (as in `triad`). */
      frames: { type: jspsych.ParameterType.INT },
      /** max(1, round(duration_ms / frame_ms)) in "duration" mode; null in "until_response". */
      requested_frames: { type: jspsych.ParameterType.INT },
      /** "keyboard" or "mouse". */
      input_modality: { type: jspsych.ParameterType.STRING },
      /** URLs of the three images, copied from the parameters. */
      left: { type: jspsych.ParameterType.STRING },
      middle: { type: jspsych.ParameterType.STRING },
      right: { type: jspsych.ParameterType.STRING },
    },
  };

  class OddOneOutPlugin {
    static info = info;

    /** @param {JsPsych} jsPsych */
    constructor(jsPsych) {
      this.jsPsych = jsPsych;
    }

    /**
     * @param {HTMLElement} display_element
     * @param {OddOneOutTrial} trial
     */
    trial(display_element, trial) {
      const P = HumanlikePresentation;
      const duration_ms = P.durationFor(trial, "odd_one_out");
      const maskSrc = P.maskFor(trial, duration_ms);

      // ---- display ------------------------------------------------------------------------
      const root = document.createElement("div");
      root.className = "hl-trial hl-odd";
      root.dataset.phase = "loading";
      const row = document.createElement("div");
      row.className = "hl-odd-row";
      /** @type {HTMLImageElement[]} */
      const stimuli = [];
      /** @type {HTMLImageElement[]} */
      const masks = [];
      /** @type {Record<string, HTMLElement>} */
      const slots = {};
      POSITIONS.forEach((side, i) => {
        const slot = document.createElement("div");
        slot.className = "hl-odd-slot hl-choosable hl-odd-" + side;
        slot.dataset.side = side;
        slot.style.height = trial.image_height_px + "px";
        slot.setAttribute("role", "button");
        slot.setAttribute("aria-label", (i + 1) + " " + SIDE_NAMES()[side]); // the visible key first
        const img = P.image(trial[/** @type {"left" | "middle" | "right"} */ (side)], "hl-stimulus", trial.image_height_px);
        slot.appendChild(img);
        stimuli.push(img);
        if (maskSrc !== null) {
          const mask = P.image(maskSrc, "hl-mask", trial.image_height_px);
          slot.appendChild(mask);
          masks.push(mask);
        }
        const key = document.createElement("kbd");
        key.className = "hl-odd-key";
        key.textContent = String(i + 1);
        slot.appendChild(key);
        slots[side] = slot;
        row.appendChild(slot);
      });
      root.appendChild(row);
      if (trial.prompt !== null) {
        const prompt = document.createElement("div");
        prompt.className = "hl-prompt";
        prompt.innerHTML = trial.prompt;
        root.appendChild(prompt);
      }
      const status = P.liveRegion(root); // screen readers: what the trial waits for
      display_element.innerHTML = "";
      display_element.appendChild(root);

      // ---- responses ----------------------------------------------------------------------
      P.chooseOne({
        jsPsych: this.jsPsych,
        root: root,
        presentation: { root: root, target: stimuli, mask: masks, duration_ms: duration_ms,
          frame_ms: trial.frame_ms },
        keys: KEY_TO_CHOICE,
        status: status,
        waiting: _("Which image is the odd one out? Press 1 or the left arrow for the " +
          "left image, 2 or the down arrow for the middle one, 3 or the right arrow for the right one."),
        finish: (choice, rt_ms, timing, modality) => {
          slots[choice].classList.add("hl-chosen");
          status.textContent = CHOSEN()[choice];
          this.jsPsych.finishTrial({
            choice: choice,
            chosen: trial[/** @type {"left" | "middle" | "right"} */ (choice)],
            rt_ms: rt_ms,
            presented_ms: timing.presented_ms,
            frames: timing.frames,
            requested_frames: timing.requested_frames,
            input_modality: modality,
            left: trial.left,
            middle: trial.middle,
            right: trial.right,
          });
        },
      });
    }

    /**
     * jsPsych simulation: "data-only" finishes with plausible data and shows nothing; "visual"
     * runs the real trial and presses 1, 2 or 3 (or clicks the image when
     * `simulation_options.data.input_modality` is "mouse").
     * @param {OddOneOutTrial} trial
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
     * Plausible data for `trial`: a uniformly drawn position, an ex-Gaussian response time, the
     * timing the presentation would report; `simulation_options.data` overrides any field.
     * @param {OddOneOutTrial} trial
     * @param {any} simulation_options
     * @returns {Record<string, any>}
     */
    simulatedData(trial, simulation_options) {
      const random = this.jsPsych.randomization;
      const choice = POSITIONS[random.randomInt(0, 2)];
      const rt_ms = HumanlikePresentation.round1(random.sampleExGaussian(1800, 300, 1 / 600, true));
      const data = this.jsPsych.pluginAPI.mergeSimulationData(
        { choice: choice, rt_ms: rt_ms, input_modality: "keyboard",
          left: trial.left, middle: trial.middle, right: trial.right },
        simulation_options
      );
      // Fields that follow from the choice and the response time, unless given.
      const timing = HumanlikePresentation.simulatedTiming(trial, data.rt_ms);
      return Object.assign(
        {
          chosen: trial[/** @type {"left" | "middle" | "right"} */ (data.choice)],
          presented_ms: timing.presented_ms,
          frames: timing.frames,
          requested_frames: timing.requested_frames,
        },
        data
      );
    }

    /**
     * @param {OddOneOutTrial} trial
     * @param {any} simulation_options
     * @param {() => void} load_callback
     */
    simulateVisual(trial, simulation_options, load_callback) {
      const data = this.simulatedData(trial, simulation_options);
      const display_element = this.jsPsych.getDisplayElement();
      this.trial(display_element, trial);
      load_callback();
      HumanlikePresentation.whenShown(display_element).then((root) => {
        this.jsPsych.pluginAPI.setTimeout(() => {
          if (data.input_modality === "mouse") {
            const slot = root.querySelector(`.hl-odd-${data.choice}`);
            if (slot !== null) slot.dispatchEvent(new MouseEvent("click", { bubbles: true, detail: 1 }));
          } else {
            this.jsPsych.pluginAPI.pressKey(String(POSITIONS.indexOf(data.choice) + 1));
          }
        }, Math.max(1, data.rt_ms));
      });
    }
  }

  return OddOneOutPlugin;
})(jsPsychModule);

/* The task page's "odd_one_out" trial: a timeline entry of type "odd_one_out" (its `stimuli` in
 * shown order: left, middle, right) as this plugin's parameters (registered with
 * HumanlikeTrialTypes, static/js/trial_types.js). */
HumanlikeTrialTypes.register("odd_one_out", function oddOneOutTrial(entry, ctx) {
  "use strict";
  var p = HumanlikeTrialTypes.presentationParams(ctx);
  var keys = entry.stimuli || [];
  return {
    type: jsPsychOddOneOut,
    left: ctx.stimulusUrl(keys[0]),
    middle: ctx.stimulusUrl(keys[1]),
    right: ctx.stimulusUrl(keys[2]),
    image_height_px: Math.min(ctx.timeline.presentation.image_height_px, 200),
    presentation: p.presentation,
    duration_ms: p.duration_ms,
    mask: p.mask,
    frame_ms: p.frame_ms,
    prompt: entry.prompt || undefined,
    data: { humanlike_index: entry.index },
    /** @param {any} data */
    on_finish: function (data) {
      // Only what the participant did: the server holds the trial's design (which image was where).
      ctx.send(entry, { choice: data.choice, input_modality: data.input_modality,
                        requested_frames: data.requested_frames }, data);
    },
  };
});

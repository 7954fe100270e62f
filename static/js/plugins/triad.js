// @ts-check
/**
 * jsPsych 8 plugin "triad": an MLDS method-of-triads trial (Maloney & Yang 2003). A reference image
 * in the centre and two comparison images, left and right; the participant chooses the comparison
 * more similar to the reference with F or ArrowLeft (left), J or ArrowRight (right), or by clicking
 * it. No feedback.
 *
 * Keys go through jsPsych's keyboard listener (pluginAPI.getKeyboardResponse), registered at the
 * stimulus onset. Presentation goes through HumanlikePresentation (static/js/presentation.js, shared
 * with `rating`, built on HumanlikeFrameClock): the three images appear together in a
 * requestAnimationFrame callback and, in "duration" mode, are hidden together (each replaced by
 * `mask`, or blank) after a whole number of frames. Times are relative to the onset rAF timestamp,
 * on the performance.now() clock.
 *
 * `sequence`, `s_left`, `s_ref` and `s_right` are not used for display; they are copied into the
 * data (`chosen_level` is the level of the chosen side). The runner sends the server only what the
 * participant did; the server keeps each trial's design (which image was where) itself.
 */
/**
 * A triad trial's parameters as the plugin receives them (jsPsych has applied the defaults).
 * @typedef {object} TriadTrial
 * @property {string} reference
 * @property {string} left
 * @property {string} right
 * @property {number} image_height_px
 * @property {"until_response" | "duration"} presentation
 * @property {number | null} duration_ms
 * @property {string | null} mask
 * @property {number} frame_ms
 * @property {string | null} prompt
 * @property {string | null} sequence
 * @property {number | null} s_left
 * @property {number | null} s_ref
 * @property {number | null} s_right
 */

var jsPsychTriad = (function (jspsych) {
  "use strict";

  var version = "1.0.0";

  /** @type {Record<string, string>} */
  const KEY_TO_CHOICE = { f: "left", arrowleft: "left", j: "right", arrowright: "right" };

  const info = {
    name: "triad",
    version: version,
    parameters: {
      /** URL of the reference image, shown in the centre. */
      reference: { type: jspsych.ParameterType.IMAGE, default: undefined },
      /** URL of the left comparison image. */
      left: { type: jspsych.ParameterType.IMAGE, default: undefined },
      /** URL of the right comparison image. */
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
          "<p>" + _("Which image, left or right, is more similar to the one in the middle?") + "</p>" +
          "<p>" + _("<kbd>F</kbd> or <kbd>&larr;</kbd> for left, <kbd>J</kbd> or <kbd>&rarr;</kbd> " +
          "for right, or click the image.") + "</p>",
      },
      /** Sequence id (passed through to the data). */
      sequence: { type: jspsych.ParameterType.STRING, default: null },
      /** Level of the left image in its sequence (passed through). */
      s_left: { type: jspsych.ParameterType.INT, default: null },
      /** Level of the reference image (passed through). */
      s_ref: { type: jspsych.ParameterType.INT, default: null },
      /** Level of the right image (passed through). */
      s_right: { type: jspsych.ParameterType.INT, default: null },
    },
    data: {
      /** "left" or "right": the comparison chosen as more similar to the reference. */
      choice: { type: jspsych.ParameterType.STRING },
      /** s_left or s_right, whichever was chosen (null if the levels were not given). */
      chosen_level: { type: jspsych.ParameterType.INT },
      /** Stimulus onset (rAF timestamp) -> choice, in ms. */
      rt_ms: { type: jspsych.ParameterType.FLOAT },
      /** Measured time the images were on screen, in ms: hide - onset rAF timestamps in
       * "duration" mode, onset -> choice in "until_response" mode (or if chosen before the hide). */
      presented_ms: { type: jspsych.ParameterType.FLOAT },
      /** Screen refreshes the images were on: round(presented_ms / frame_ms) at a timed hide,
       * ceil(presented_ms / frame_ms) when the response came first (see frame_clock.js). */
      frames: { type: jspsych.ParameterType.INT },
      /** max(1, round(duration_ms / frame_ms)) in "duration" mode; null in "until_response". */
      requested_frames: { type: jspsych.ParameterType.INT },
      /** "keyboard" or "mouse". */
      input_modality: { type: jspsych.ParameterType.STRING },
      /** Copied from the parameters of the same name. */
      sequence: { type: jspsych.ParameterType.STRING },
      s_left: { type: jspsych.ParameterType.INT },
      s_ref: { type: jspsych.ParameterType.INT },
      s_right: { type: jspsych.ParameterType.INT },
      /** URLs of the three images, copied from the parameters. */
      reference: { type: jspsych.ParameterType.STRING },
      left: { type: jspsych.ParameterType.STRING },
      right: { type: jspsych.ParameterType.STRING },
    },
  };

  class TriadPlugin {
    static info = info;

    /** @param {JsPsych} jsPsych */
    constructor(jsPsych) {
      this.jsPsych = jsPsych;
    }

    /**
     * @param {HTMLElement} display_element
     * @param {TriadTrial} trial
     */
    trial(display_element, trial) {
      const P = HumanlikePresentation;
      const duration_ms = P.durationFor(trial, "triad");
      const maskSrc = P.maskFor(trial, duration_ms);

      // ---- display ------------------------------------------------------------------------
      const root = document.createElement("div");
      root.className = "hl-trial hl-triad";
      root.dataset.phase = "loading";
      const row = document.createElement("div");
      row.className = "hl-triad-row";
      /** @type {HTMLImageElement[]} */
      const stimuli = [];
      /** @type {HTMLImageElement[]} */
      const masks = [];
      /** @type {Record<string, HTMLElement>} */
      const slots = {};
      for (const side of ["left", "reference", "right"]) {
        const slot = document.createElement("div");
        slot.className = "hl-triad-slot hl-triad-" + side;
        slot.dataset.side = side;
        slot.style.height = trial.image_height_px + "px";
        if (side !== "reference") {
          slot.classList.add("hl-choosable");
          slot.setAttribute("role", "button");
          slot.setAttribute("aria-label", side === "left" ? _("left image") : _("right image"));
        }
        const img = P.image(trial[/** @type {"left" | "reference" | "right"} */ (side)], "hl-stimulus", trial.image_height_px);
        slot.appendChild(img);
        stimuli.push(img);
        if (maskSrc !== null) {
          const mask = P.image(maskSrc, "hl-mask", trial.image_height_px);
          slot.appendChild(mask);
          masks.push(mask);
        }
        slots[side] = slot;
        row.appendChild(slot);
      }
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
        waiting: _("Which outer image is more similar to the middle one? Press F or " +
          "the left arrow for the left image, J or the right arrow for the right image."),
        finish: (choice, rt_ms, timing, modality) => {
          slots[choice].classList.add("hl-chosen");
          status.textContent = choice === "left" ? _("Left image chosen.") : _("Right image chosen.");
          const chosen = choice === "left" ? trial.s_left : trial.s_right;
          this.jsPsych.finishTrial({
            choice: choice,
            chosen_level: chosen === undefined ? null : chosen,
            rt_ms: rt_ms,
            presented_ms: timing.presented_ms,
            frames: timing.frames,
            requested_frames: timing.requested_frames,
            input_modality: modality,
            sequence: trial.sequence,
            s_left: trial.s_left,
            s_ref: trial.s_ref,
            s_right: trial.s_right,
            reference: trial.reference,
            left: trial.left,
            right: trial.right,
          });
        },
      });
    }

    /**
     * jsPsych simulation: "data-only" finishes with plausible data and shows nothing; "visual"
     * runs the real trial and presses F or J (or clicks the image when
     * `simulation_options.data.input_modality` is "mouse").
     * @param {TriadTrial} trial
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
     * Plausible data for `trial`: a random side, an ex-Gaussian response time, the timing the
     * presentation would report; `simulation_options.data` overrides any field.
     * @param {TriadTrial} trial
     * @param {any} simulation_options
     * @returns {Record<string, any>}
     */
    simulatedData(trial, simulation_options) {
      const random = this.jsPsych.randomization;
      const choice = random.sampleBernoulli(0.5) ? "left" : "right";
      const rt_ms = HumanlikePresentation.round1(random.sampleExGaussian(900, 150, 1 / 300, true));
      const data = this.jsPsych.pluginAPI.mergeSimulationData(
        {
          choice: choice,
          rt_ms: rt_ms,
          input_modality: "keyboard",
          sequence: trial.sequence,
          s_left: trial.s_left,
          s_ref: trial.s_ref,
          s_right: trial.s_right,
          reference: trial.reference,
          left: trial.left,
          right: trial.right,
        },
        simulation_options
      );
      // Fields that follow from the choice and the response time, unless given.
      const chosen = data.choice === "left" ? trial.s_left : trial.s_right;
      const timing = HumanlikePresentation.simulatedTiming(trial, data.rt_ms);
      return Object.assign(
        {
          chosen_level: chosen === undefined ? null : chosen,
          presented_ms: timing.presented_ms,
          frames: timing.frames,
          requested_frames: timing.requested_frames,
        },
        data
      );
    }

    /**
     * @param {TriadTrial} trial
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
            const slot = root.querySelector(`.hl-triad-${data.choice}`);
            if (slot !== null) slot.dispatchEvent(new MouseEvent("click", { bubbles: true, detail: 1 }));
          } else {
            this.jsPsych.pluginAPI.pressKey(data.choice === "left" ? "f" : "j");
          }
        }, Math.max(1, data.rt_ms));
      });
    }
  }

  return TriadPlugin;
})(jsPsychModule);

/* The task page's "triad" trial: a timeline entry of type "triad" as this plugin's parameters
 * (registered with HumanlikeTrialTypes, static/js/trial_types.js). */
HumanlikeTrialTypes.register("triad", function triadTrial(entry, ctx) {
  "use strict";
  var p = HumanlikeTrialTypes.presentationParams(ctx);
  var levels = [entry.s1, entry.s2, entry.s3];
  var keys = entry.stimuli || [];
  var left = entry.swapped ? 2 : 0;
  var right = entry.swapped ? 0 : 2;
  return {
    type: jsPsychTriad,
    reference: ctx.stimulusUrl(keys[1]),
    left: ctx.stimulusUrl(keys[left]),
    right: ctx.stimulusUrl(keys[right]),
    image_height_px: Math.min(ctx.timeline.presentation.image_height_px, 200),
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
      ctx.send(entry, { choice: data.choice, chosen_level: data.chosen_level,
                        input_modality: data.input_modality,
                        requested_frames: data.requested_frames }, data);
    },
  };
});

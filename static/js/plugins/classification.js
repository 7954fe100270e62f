// @ts-check
/**
 * jsPsych 8 plugin "classification": the model-vs-human paradigm (Geirhos et al. 2018, 2021).
 * A fixation cross (`fixation_ms`), the image for `duration_ms` (a whole number of frames, through
 * HumanlikePresentation / HumanlikeFrameClock like `rating` and `triad`), then a full-contrast mask
 * for `mask_ms` (a 1/f noise image drawn here from `mask_seed`, or an image URL), then a K-way
 * response screen: one button per category in a grid, chosen by click or by the category's key.
 * With `response_timeout_ms` set, no answer in time ends the trial with response "na" (incorrect).
 * With `feedback` (practice trials only) and `correct_label`, "Correct" or the right answer shows
 * for `feedback_ms`.
 *
 * Recorded: `response`, `correct` (null without `correct_label`), `rt_ms` (response-screen onset
 * -> answer), `presented_ms` and `frames` of the image (measured rAF timestamps; see
 * frame_clock.js), `requested_frames`, `input_modality`.
 */
/**
 * @typedef {object} ClassificationTrial
 * @property {string} stimulus
 * @property {Array<{label: string, key: string}>} categories
 * @property {number} image_height_px
 * @property {number} fixation_ms
 * @property {number} duration_ms
 * @property {number} mask_ms
 * @property {string} mask "noise" or an image URL
 * @property {number} mask_seed
 * @property {number | null} response_timeout_ms
 * @property {boolean} feedback
 * @property {string | null} correct_label
 * @property {number} feedback_ms
 * @property {number} frame_ms
 * @property {string | null} prompt
 */

var jsPsychClassification = (function (jspsych) {
  "use strict";

  var version = "1.0.0";

  /**
   * mulberry32: a small seeded PRNG (32-bit state), uniform in [0, 1).
   * @param {number} seed
   * @returns {() => number}
   */
  function mulberry32(seed) {
    let a = seed >>> 0;
    return function () {
      a = (a + 0x6d2b79f5) >>> 0;
      let t = a;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }

  /**
   * Greyscale 1/f noise, `size` x `size`, stretched to full contrast (0..255): octaves of
   * bilinearly upsampled white noise, each octave's amplitude proportional to its scale, so the
   * amplitude spectrum falls roughly as 1/f. Same seed, same pixels.
   * @param {number} size
   * @param {number} seed
   * @returns {Float32Array}
   */
  function pinkNoise(size, seed) {
    const random = mulberry32(seed);
    const out = new Float32Array(size * size);
    for (let cells = 2; cells <= size; cells *= 2) {
      const grid = new Float32Array((cells + 1) * (cells + 1));
      for (let i = 0; i < grid.length; i++) grid[i] = random() * 2 - 1;
      const amplitude = 1 / cells; // scale size / cells: amplitude ~ 1 / frequency
      const step = cells / size;
      for (let y = 0; y < size; y++) {
        const gy = y * step, y0 = Math.floor(gy), fy = gy - y0;
        for (let x = 0; x < size; x++) {
          const gx = x * step, x0 = Math.floor(gx), fx = gx - x0;
          const r0 = grid[y0 * (cells + 1) + x0] * (1 - fx) + grid[y0 * (cells + 1) + x0 + 1] * fx;
          const r1 = grid[(y0 + 1) * (cells + 1) + x0] * (1 - fx) + grid[(y0 + 1) * (cells + 1) + x0 + 1] * fx;
          out[y * size + x] += amplitude * (r0 * (1 - fy) + r1 * fy);
        }
      }
    }
    let lo = Infinity, hi = -Infinity;
    for (const v of out) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
    for (let i = 0; i < out.length; i++) out[i] = hi > lo ? ((out[i] - lo) / (hi - lo)) * 255 : 128;
    return out;
  }

  /**
   * The 1/f mask as a PNG data URL (a canvas), `size` pixels square.
   * @param {number} size
   * @param {number} seed
   * @returns {string}
   */
  function noiseMaskUrl(size, seed) {
    const canvas = document.createElement("canvas");
    canvas.width = canvas.height = size;
    const ctx = /** @type {CanvasRenderingContext2D} */ (canvas.getContext("2d"));
    const image = ctx.createImageData(size, size);
    const values = pinkNoise(size, seed);
    for (let i = 0; i < values.length; i++) {
      const v = Math.round(values[i]);
      image.data[4 * i] = image.data[4 * i + 1] = image.data[4 * i + 2] = v;
      image.data[4 * i + 3] = 255;
    }
    ctx.putImageData(image, 0, 0);
    return canvas.toDataURL("image/png");
  }

  const info = {
    name: "classification",
    version: version,
    parameters: {
      /** URL of the image to classify. */
      stimulus: { type: jspsych.ParameterType.IMAGE, default: undefined },
      /** The response categories, in grid order: label shown on the button, key that chooses it. */
      categories: { type: jspsych.ParameterType.COMPLEX, array: true, default: undefined },
      /** Height of the image (and mask) on screen, in CSS pixels. */
      image_height_px: { type: jspsych.ParameterType.INT, default: 224 },
      /** Fixation cross before the image, in ms. */
      fixation_ms: { type: jspsych.ParameterType.INT, default: 300 },
      /** Requested image time in ms (rounded to whole frames). */
      duration_ms: { type: jspsych.ParameterType.INT, default: 200 },
      /** Mask time in ms after the image. */
      mask_ms: { type: jspsych.ParameterType.INT, default: 200 },
      /** "noise": a 1/f noise mask drawn from `mask_seed`; otherwise the URL of a mask image. */
      mask: { type: jspsych.ParameterType.STRING, default: "noise" },
      /** Seed of the noise mask (recorded in the trial's design). */
      mask_seed: { type: jspsych.ParameterType.INT, default: 0 },
      /** Time allowed on the response screen, in ms; null waits for ever. Late = response "na". */
      response_timeout_ms: { type: jspsych.ParameterType.INT, default: null },
      /** Show feedback after the answer (practice trials only). */
      feedback: { type: jspsych.ParameterType.BOOL, default: false },
      /** The true category (for `correct` and feedback); null when not known to the browser. */
      correct_label: { type: jspsych.ParameterType.STRING, default: null },
      /** How long feedback stays, in ms. */
      feedback_ms: { type: jspsych.ParameterType.INT, default: 800 },
      /** Duration of one refresh in ms, as measured by HumanlikeFrameClock.measureRefresh. */
      frame_ms: { type: jspsych.ParameterType.FLOAT, default: 1000 / 60 },
      /** HTML above the response grid; null hides it. */
      prompt: { type: jspsych.ParameterType.HTML_STRING, default: "<p>Which category was it?</p>" },
    },
    data: {
      /** The chosen category label, or "na" when the time ran out. */
      response: { type: jspsych.ParameterType.STRING },
      /** response === correct_label (null when correct_label is null). */
      correct: { type: jspsych.ParameterType.BOOL },
      /** Response-screen onset -> answer, in ms (null at a timeout). */
      rt_ms: { type: jspsych.ParameterType.FLOAT },
      /** Measured image time: hide - onset rAF timestamps, in ms. */
      presented_ms: { type: jspsych.ParameterType.FLOAT },
      /** Refreshes the image was on: round(presented_ms / frame_ms). */
      frames: { type: jspsych.ParameterType.INT },
      /** max(1, round(duration_ms / frame_ms)). */
      requested_frames: { type: jspsych.ParameterType.INT },
      /** "keyboard", "mouse" or null (timeout). */
      input_modality: { type: jspsych.ParameterType.STRING },
      /** Copied from the parameters. */
      mask_seed: { type: jspsych.ParameterType.INT },
    },
  };

  class ClassificationPlugin {
    static info = info;

    /** @param {JsPsych} jsPsych */
    constructor(jsPsych) {
      this.jsPsych = jsPsych;
    }

    /**
     * @param {HTMLElement} display_element
     * @param {ClassificationTrial} trial
     */
    trial(display_element, trial) {
      const P = HumanlikePresentation;
      const root = document.createElement("div");
      root.className = "hl-trial hl-classification";
      root.dataset.phase = "fixation";
      const stage = document.createElement("div");
      stage.className = "hl-classification-stage";
      // Layout inline, so the plugin needs no stylesheet: image, mask and cross share one box.
      stage.style.cssText = "position:relative;margin:2em auto;display:flex;align-items:center;" +
        "justify-content:center;height:" + trial.image_height_px + "px;width:" + trial.image_height_px + "px";
      const fixation = document.createElement("div");
      fixation.className = "hl-fixation";
      fixation.textContent = "+";
      fixation.style.cssText = "font-size:48px;line-height:1;position:absolute";
      stage.appendChild(fixation);
      const img = P.image(trial.stimulus, "hl-stimulus", trial.image_height_px);
      const maskSrc = trial.mask === "noise" ? noiseMaskUrl(256, trial.mask_seed) : trial.mask;
      const mask = P.image(maskSrc, "hl-mask", trial.image_height_px);
      for (const layer of [img, mask]) {
        layer.style.position = "absolute";
        layer.style.width = trial.image_height_px + "px";
        stage.appendChild(layer);
      }
      root.appendChild(stage);
      const screen = document.createElement("div");
      screen.className = "hl-response-screen";
      screen.hidden = true;
      if (trial.prompt !== null) {
        const prompt = document.createElement("div");
        prompt.className = "hl-prompt";
        prompt.innerHTML = trial.prompt;
        screen.appendChild(prompt);
      }
      const grid = document.createElement("div");
      grid.className = "hl-category-grid";
      grid.style.cssText = "display:grid;gap:0.5em;max-width:40em;margin:1em auto";
      grid.style.gridTemplateColumns = "repeat(" + Math.min(5, Math.ceil(Math.sqrt(trial.categories.length))) + ", minmax(6em, 1fr))";
      /** @type {Record<string, string>} key -> label */
      const byKey = {};
      for (const cat of trial.categories) {
        const button = document.createElement("button");
        button.type = "button";
        button.className = "hl-category";
        button.style.cssText = "padding:0.6em 0.8em;font-size:1.1em";
        button.dataset.label = cat.label;
        button.innerHTML = "<span class='hl-category-label'></span> <kbd></kbd>";
        /** @type {HTMLElement} */ (button.querySelector(".hl-category-label")).textContent = cat.label;
        /** @type {HTMLElement} */ (button.querySelector("kbd")).textContent = cat.key.toUpperCase();
        grid.appendChild(button);
        byKey[cat.key.toLowerCase()] = cat.label;
      }
      screen.appendChild(grid);
      const feedback = document.createElement("div");
      feedback.className = "hl-feedback";
      feedback.style.cssText = "min-height:1.5em;font-size:1.2em;margin-top:0.5em";
      screen.appendChild(feedback);
      root.appendChild(screen);
      const status = P.liveRegion(root); // screen readers: the answer is due now
      display_element.innerHTML = "";
      display_element.appendChild(root);

      let finished = false;
      /** @type {any} */
      let keyboardListener = null;
      /** @type {number | null} */
      let responseOnset = null;
      /** @type {{presented_ms: number | null, frames: number | null, requested_frames: number | null}} */
      let timing = { presented_ms: null, frames: null, requested_frames: null };
      /** @type {ReturnType<typeof P.present> | null} */
      let presentation = null;

      /**
       * @param {string} response
       * @param {number | null} t
       * @param {string | null} modality
       */
      const endTrial = (response, t, modality) => {
        if (finished) return;
        finished = true;
        if (keyboardListener !== null) this.jsPsych.pluginAPI.cancelKeyboardResponse(keyboardListener);
        grid.removeEventListener("click", onClick);
        this.jsPsych.pluginAPI.clearAllTimeouts();
        const correct = trial.correct_label === null ? null : response === trial.correct_label;
        const data = {
          response: response,
          correct: correct,
          rt_ms: t === null || responseOnset === null ? null : P.round1(Math.max(0, t - responseOnset)),
          presented_ms: timing.presented_ms,
          frames: timing.frames,
          requested_frames: timing.requested_frames,
          input_modality: modality,
          mask_seed: trial.mask_seed,
        };
        const chosen = grid.querySelector(`[data-label="${CSS.escape(response)}"]`);
        if (chosen !== null) chosen.classList.add("hl-chosen");
        if (trial.feedback && trial.correct_label !== null) {
          root.dataset.phase = "feedback";
          feedback.textContent = correct ? _("Correct") : response === "na"
            ? _("Too slow: it was %(label)s", { label: trial.correct_label })
            : _("Wrong: it was %(label)s", { label: trial.correct_label });
          feedback.className = "hl-feedback " + (correct ? "hl-right" : "hl-wrong");
          this.jsPsych.pluginAPI.setTimeout(() => this.jsPsych.finishTrial(data), trial.feedback_ms);
        } else {
          this.jsPsych.finishTrial(data);
        }
      };

      /** @param {MouseEvent} event */
      const onClick = (event) => {
        /** @type {HTMLElement | null} */
        const button = /** @type {HTMLElement} */ (event.target).closest(".hl-category");
        if (button === null || responseOnset === null) return;
        endTrial(button.dataset.label || "", P.eventTime(event), P.clickModality(event));
      };

      const showResponse = () => {
        if (presentation !== null) timing = presentation.stop(performance.now());
        stage.style.display = "none"; // its inline display would override `hidden`
        screen.hidden = false;
        root.dataset.phase = "response";
        status.textContent = _("Which category was it? Press its key or click it.");
        responseOnset = performance.now();
        grid.addEventListener("click", onClick);
        keyboardListener = this.jsPsych.pluginAPI.getKeyboardResponse({
          callback_function: (/** @type {{key: string}} */ r) =>
            endTrial(byKey[r.key.toLowerCase()], performance.now(), "keyboard"),
          valid_responses: Object.keys(byKey),
          rt_method: "performance",
          persist: false,
          allow_held_key: false,
        });
        if (trial.response_timeout_ms !== null) {
          this.jsPsych.pluginAPI.setTimeout(() => endTrial("na", null, null), trial.response_timeout_ms);
        }
      };

      this.jsPsych.pluginAPI.setTimeout(() => {
        fixation.hidden = true;
        presentation = P.present({
          root: root,
          target: [img],
          mask: [mask],
          duration_ms: trial.duration_ms,
          frame_ms: trial.frame_ms,
          onShow: () => {
            const frames = HumanlikeFrameClock.framesFor(trial.duration_ms, trial.frame_ms);
            this.jsPsych.pluginAPI.setTimeout(showResponse, (frames - 0.5) * trial.frame_ms + trial.mask_ms);
          },
        });
      }, trial.fixation_ms);
    }

    /**
     * jsPsych simulation: "data-only" finishes with plausible data; "visual" runs the trial and
     * presses the category's key (or clicks its button when `input_modality` is "mouse").
     * @param {ClassificationTrial} trial
     * @param {string} simulation_mode
     * @param {any} simulation_options
     * @param {() => void} load_callback
     */
    simulate(trial, simulation_mode, simulation_options, load_callback) {
      const random = this.jsPsych.randomization;
      const cat = trial.categories[Math.floor(Math.random() * trial.categories.length)];
      const data = this.jsPsych.pluginAPI.mergeSimulationData(
        { response: cat.label, rt_ms: HumanlikePresentation.round1(random.sampleExGaussian(700, 120, 1 / 250, true)),
          input_modality: "keyboard", mask_seed: trial.mask_seed },
        simulation_options
      );
      if (simulation_mode === "data-only") {
        load_callback();
        const requested = HumanlikeFrameClock.framesFor(trial.duration_ms, trial.frame_ms);
        this.jsPsych.finishTrial(Object.assign({
          correct: trial.correct_label === null ? null : data.response === trial.correct_label,
          presented_ms: HumanlikePresentation.round1(requested * trial.frame_ms),
          frames: requested, requested_frames: requested,
        }, data));
        return;
      }
      const display_element = this.jsPsych.getDisplayElement();
      this.trial(display_element, trial);
      load_callback();
      const poll = () => {
        const root = display_element.querySelector(".hl-classification");
        if (root === null) return;
        if (/** @type {HTMLElement} */ (root).dataset.phase !== "response") { window.requestAnimationFrame(poll); return; }
        this.jsPsych.pluginAPI.setTimeout(() => {
          const label = data.response;
          if (data.input_modality === "mouse") {
            const button = root.querySelector(`[data-label="${CSS.escape(label)}"]`);
            if (button !== null) button.dispatchEvent(new MouseEvent("click", { bubbles: true, detail: 1 }));
          } else {
            const found = trial.categories.find((c) => c.label === label);
            if (found) this.jsPsych.pluginAPI.pressKey(found.key);
          }
        }, Math.max(1, data.rt_ms));
      };
      poll();
    }
  }

  ClassificationPlugin.pinkNoise = pinkNoise;
  ClassificationPlugin.mulberry32 = mulberry32;
  return ClassificationPlugin;
})(jsPsychModule);

/* The task page's "classification" trial (registered with HumanlikeTrialTypes,
 * static/js/trial_types.js): the timings, mask and categories come from the trial's design; the
 * true class only on practice trials with feedback. */
HumanlikeTrialTypes.register("classification", function classificationTrial(entry, ctx) {
  "use strict";
  var e = /** @type {any} */ (entry);
  var allowed = e.categories || null;
  var categories = ctx.timeline.categories.filter(function (c) {
    return allowed === null || allowed.indexOf(c.label) >= 0;
  });
  return {
    type: jsPsychClassification,
    stimulus: ctx.stimulusUrl(entry.stimulus || ""),
    categories: categories,
    image_height_px: ctx.timeline.presentation.image_height_px,
    fixation_ms: e.fixation_ms,
    duration_ms: e.duration_ms,
    mask_ms: e.mask_ms,
    mask: e.mask === "noise" ? "noise" : ctx.stimulusUrl(e.mask),
    mask_seed: e.mask_seed,
    response_timeout_ms: e.response_timeout_ms === undefined ? null : e.response_timeout_ms,
    feedback: Boolean(e.feedback),
    correct_label: e.feedback ? (e.true_class || null) : null,
    frame_ms: ctx.frame.frame_ms,
    prompt: entry.prompt || "<p>" + _("Which category was it?") + "</p>",
    data: { humanlike_index: entry.index },
    /** @param {any} data */
    on_finish: function (data) {
      ctx.send(entry, { choice: data.response, input_modality: data.input_modality,
                        requested_frames: data.requested_frames }, data);
    },
  };
});

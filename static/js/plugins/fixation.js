// @ts-check
/**
 * jsPsych 8 plugin "fixation": a fixation cross (or a blank screen, for the inter-trial interval)
 * shown for a whole number of frames, frame-locked through HumanlikeFrameClock.present (the mark
 * appears in a requestAnimationFrame callback and the trial ends in the callback that hides it).
 * No response is taken. Data: `presented_ms` (measured), `frames` (whole frames shown) and
 * `requested_frames` (round(duration_ms / frame_ms), at least 1).
 */
/**
 * @typedef {object} FixationTrial
 * @property {string} mark
 * @property {number} duration_ms
 * @property {number} frame_ms
 */

var jsPsychFixation = (function (jspsych) {
  "use strict";

  const info = {
    name: "fixation",
    version: "1.0.0",
    parameters: {
      /** What is shown in the centre: "+" for a fixation cross, "" for a blank inter-trial interval. */
      mark: { type: jspsych.ParameterType.STRING, default: "+" },
      /** Requested duration in ms, rounded to whole frames. */
      duration_ms: { type: jspsych.ParameterType.INT, default: 500 },
      /** Duration of one screen refresh in ms, as measured by HumanlikeFrameClock.measureRefresh. */
      frame_ms: { type: jspsych.ParameterType.FLOAT, default: 1000 / 60 },
    },
    data: {
      /** "fixation" or "iti". */
      screen: { type: jspsych.ParameterType.STRING },
      /** Measured time the mark was on screen, in ms. */
      presented_ms: { type: jspsych.ParameterType.FLOAT },
      /** Whole frames the mark was on screen. */
      frames: { type: jspsych.ParameterType.INT },
      /** Frames asked for: max(1, round(duration_ms / frame_ms)). */
      requested_frames: { type: jspsych.ParameterType.INT },
    },
  };

  class FixationPlugin {
    /** @param {JsPsych} jsPsych */
    constructor(jsPsych) {
      this.jsPsych = jsPsych;
    }

    /**
     * @param {HTMLElement} display_element
     * @param {FixationTrial} trial
     */
    trial(display_element, trial) {
      const box = document.createElement("div");
      box.className = "hl-trial hl-fixation";
      box.dataset.screen = trial.mark ? "fixation" : "iti";
      const mark = document.createElement("div");
      mark.className = "hl-fixation-mark";
      mark.textContent = trial.mark;
      box.appendChild(mark);
      display_element.replaceChildren(box);
      HumanlikeFrameClock.present({
        target: mark,
        duration_ms: trial.duration_ms,
        frame_ms: trial.frame_ms,
        onHide: (timing) => {
          this.jsPsych.finishTrial({
            screen: trial.mark ? "fixation" : "iti",
            presented_ms: timing.presented_ms,
            frames: timing.frames,
            requested_frames: timing.requested_frames,
          });
        },
      });
    }
  }
  FixationPlugin.info = info;
  return FixationPlugin;
})(jsPsychModule);

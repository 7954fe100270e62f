/**
 * jsPsych 8 plugin "triad": an MLDS method-of-triads trial (Maloney & Yang 2003). A reference image
 * in the centre and two comparison images, left and right; the participant chooses the comparison
 * more similar to the reference with F or ArrowLeft (left), J or ArrowRight (right), or by clicking
 * it. No feedback.
 *
 * Keys go through jsPsych's keyboard listener (pluginAPI.getKeyboardResponse), registered at the
 * stimulus onset. Presentation goes through HumanlikeFrameClock (static/js/frame_clock.js): the three
 * images appear together in a requestAnimationFrame callback and, in "duration" mode, are hidden
 * together (each replaced by `mask`, or blank) after a whole number of frames. Times are relative to
 * the onset rAF timestamp, on the performance.now() clock.
 *
 * `sequence`, `s_left`, `s_ref` and `s_right` are not used for display; they are copied into the
 * data so the server can normalise the triad (s1 < s2 < s3, `swapped`) without a lookup.
 */
var jsPsychTriad = (function (jspsych) {
  "use strict";

  var version = "1.0.0";

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
          "<p>Which image, left or right, is more similar to the one in the middle?</p>" +
          "<p><kbd>F</kbd> or <kbd>&larr;</kbd> for left, <kbd>J</kbd> or <kbd>&rarr;</kbd> " +
          "for right, or click the image.</p>",
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

  function round1(x) {
    return Math.round(x * 10) / 10;
  }

  function image(src, className, height_px) {
    const img = document.createElement("img");
    img.className = className;
    img.src = src;
    img.alt = "";
    img.draggable = false;
    img.style.height = height_px + "px";
    img.style.visibility = "hidden";
    return img;
  }

  function decoded(img) {
    return typeof img.decode === "function" ? img.decode().catch(() => undefined) : Promise.resolve();
  }

  class TriadPlugin {
    constructor(jsPsych) {
      this.jsPsych = jsPsych;
    }

    trial(display_element, trial) {
      const duration_ms = trial.presentation === "duration" ? trial.duration_ms : null;
      if (trial.presentation === "duration" && !(trial.duration_ms > 0)) {
        throw new Error('triad: presentation "duration" needs a positive duration_ms');
      }
      const useMask = trial.mask !== null && duration_ms !== null;

      // ---- display ------------------------------------------------------------------------
      const root = document.createElement("div");
      root.className = "hl-trial hl-triad";
      root.dataset.phase = "loading";
      const row = document.createElement("div");
      row.className = "hl-triad-row";
      const stimuli = [];
      const masks = [];
      const slots = {};
      for (const side of ["left", "reference", "right"]) {
        const slot = document.createElement("div");
        slot.className = "hl-triad-slot hl-triad-" + side;
        slot.dataset.side = side;
        slot.style.height = trial.image_height_px + "px";
        if (side !== "reference") {
          slot.classList.add("hl-choosable");
          slot.setAttribute("role", "button");
          slot.setAttribute("aria-label", side + " image");
        }
        const img = image(trial[side], "hl-stimulus", trial.image_height_px);
        slot.appendChild(img);
        stimuli.push(img);
        if (useMask) {
          const mask = image(trial.mask, "hl-mask", trial.image_height_px);
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
      display_element.innerHTML = "";
      display_element.appendChild(root);

      // ---- responses ----------------------------------------------------------------------
      let onset = null;
      let finished = false;
      let clock = null;
      let keyboardListener = null;

      const endTrial = (choice, t, modality) => {
        if (finished) {
          return;
        }
        finished = true;
        if (keyboardListener !== null) {
          this.jsPsych.pluginAPI.cancelKeyboardResponse(keyboardListener);
        }
        root.removeEventListener("click", onClick);
        const timing = clock.stop(t);
        root.dataset.phase = "done";
        slots[choice].classList.add("hl-chosen");
        const chosen = choice === "left" ? trial.s_left : trial.s_right;
        this.jsPsych.finishTrial({
          choice: choice,
          chosen_level: chosen === undefined ? null : chosen,
          rt_ms: round1(Math.max(0, t - onset)),
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
      };

      const onClick = (event) => {
        if (onset === null || finished) {
          return;
        }
        const slot = event.target.closest(".hl-choosable");
        if (slot === null || !root.contains(slot)) {
          return;
        }
        const t = event.timeStamp > 0 ? event.timeStamp : performance.now();
        endTrial(slot.dataset.side, t, event.detail === 0 ? "keyboard" : "mouse");
      };
      root.addEventListener("click", onClick);

      const onKey = (response) => {
        // The listener calls back synchronously inside the keydown dispatch.
        endTrial(KEY_TO_CHOICE[response.key.toLowerCase()], performance.now(), "keyboard");
      };

      // ---- presentation: decode the (preloaded) images, then show in a rAF callback --------
      Promise.all(stimuli.concat(masks).map(decoded)).then(() => {
        if (!root.isConnected) {
          return;
        }
        clock = HumanlikeFrameClock.present({
          target: stimuli,
          mask: masks,
          duration_ms: duration_ms,
          frame_ms: trial.frame_ms,
          onShow: (t) => {
            onset = t;
            root.dataset.phase = "stimulus";
            keyboardListener = this.jsPsych.pluginAPI.getKeyboardResponse({
              callback_function: onKey,
              valid_responses: Object.keys(KEY_TO_CHOICE),
              rt_method: "performance",
              persist: false,
              allow_held_key: false,
            });
          },
          onHide: () => {
            root.dataset.phase = useMask ? "mask" : "blank";
          },
        });
      });
    }
  }
  TriadPlugin.info = info;

  return TriadPlugin;
})(jsPsychModule);

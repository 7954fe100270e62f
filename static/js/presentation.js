// @ts-check
/**
 * HumanlikePresentation: what the trial plugins (rating, triad, classification, odd-one-out) do
 * the same way.
 *
 *   durationFor(trial, plugin)   -> requested ms in "duration" mode, null in "until_response"
 *   maskFor(trial, duration_ms)  -> URL of the mask that replaces the stimulus at the hide, or null
 *   image(src, className, height_px) -> a hidden, non-draggable <img>
 *   present({root, target, mask, duration_ms, frame_ms, onShow}) -> handle with stop(t) -> timing
 *   chooseOne({jsPsych, root, presentation, keys, status, waiting, finish}) -> one image chosen by
 *                                  a click on a choosable slot or a key (triad, odd-one-out)
 *   Modalities                   -> "keyboard" / "mouse" / "both" bookkeeping
 *   clickModality(event)         -> "keyboard" for a click synthesised from a key, else "mouse"
 *   eventTime(event), round1(x)  -> times on the performance.now() clock, rounded to 0.1 ms
 *   simulatedTiming(trial, rt_ms) -> timing data a simulated trial reports (see simulate())
 *   whenShown(root)              -> Promise resolved at the stimulus onset (for visual simulation)
 *
 * `present` decodes the (preloaded) images, then shows them through HumanlikeFrameClock (a
 * requestAnimationFrame callback; in "duration" mode hidden after a whole number of frames) and
 * keeps the trial root's `data-phase` (loading -> stimulus -> mask | blank) that tests wait on.
 */
var HumanlikePresentation = (function () {
  "use strict";

  /**
   * @typedef {object} Timing
   * @property {number | null} presented_ms
   * @property {number | null} frames
   * @property {number | null} requested_frames
   */

  /**
   * @param {number} x
   * @returns {number} x rounded to 0.1
   */
  function round1(x) {
    return Math.round(x * 10) / 10;
  }

  /**
   * Event time on the performance.now() clock (KeyboardEvent/MouseEvent timeStamp).
   * @param {Event | null | undefined} event
   * @returns {number}
   */
  function eventTime(event) {
    var t = event && event.timeStamp;
    return typeof t === "number" && t > 0 ? t : performance.now();
  }

  /**
   * Requested presentation time: `trial.duration_ms` in "duration" mode (must be positive), else null.
   * @param {{presentation: string, duration_ms: number | null}} trial
   * @param {string} plugin name used in the error message
   * @returns {number | null}
   */
  function durationFor(trial, plugin) {
    if (trial.presentation !== "duration") return null;
    var duration_ms = trial.duration_ms;
    if (duration_ms === null || !(duration_ms > 0)) {
      throw new Error(plugin + ': presentation "duration" needs a positive duration_ms');
    }
    return duration_ms;
  }

  /**
   * The mask shown after a timed hide: `trial.mask` in "duration" mode, else none.
   * @param {{mask: string | null}} trial
   * @param {number | null} duration_ms
   * @returns {string | null}
   */
  function maskFor(trial, duration_ms) {
    return duration_ms === null ? null : trial.mask;
  }

  /**
   * A hidden image (shown later by present()).
   * @param {string} src
   * @param {string} className
   * @param {number | null} height_px CSS height, or null to leave it to the stylesheet
   * @returns {HTMLImageElement}
   */
  function image(src, className, height_px) {
    var img = document.createElement("img");
    img.className = className;
    img.src = src;
    img.alt = "";
    img.draggable = false;
    if (height_px !== null) img.style.height = height_px + "px";
    img.style.visibility = "hidden";
    return img;
  }

  /**
   * @param {HTMLImageElement} img
   * @returns {Promise<unknown>} settles once the image is decoded (or failed to)
   */
  function decoded(img) {
    return typeof img.decode === "function" ? img.decode().catch(function () { return undefined; })
      : Promise.resolve();
  }

  /**
   * @typedef {object} PresentOptions
   * @property {HTMLElement} root the trial's root; carries data-phase
   * @property {HTMLImageElement[]} target images shown together at the onset
   * @property {HTMLImageElement[]} mask images shown in their place at a timed hide (may be empty)
   * @property {number | null} duration_ms null: until the response
   * @property {number} frame_ms measured refresh interval
   * @property {(t: number) => void} [onShow] called with the onset rAF timestamp
   */

  /**
   * Decode the images, then show `target` in a rAF callback (and hide it after the requested
   * frames in duration mode). The handle's stop(t) ends the presentation and returns its timing.
   * @param {PresentOptions} options
   * @returns {{onset: () => number | null, stop: (t: number) => Timing}}
   */
  function present(options) {
    var root = options.root;
    root.dataset.phase = "loading";
    /** @type {ReturnType<typeof HumanlikeFrameClock.present> | null} */
    var clock = null;
    /** @type {number | null} */
    var onset = null;
    var images = options.target.concat(options.mask);
    Promise.all(images.map(decoded)).then(function () {
      if (!root.isConnected) {
        return; // the trial was ended from outside before the images were ready
      }
      clock = HumanlikeFrameClock.present({
        target: options.target,
        mask: options.mask,
        duration_ms: options.duration_ms,
        frame_ms: options.frame_ms,
        onShow: function (t) {
          onset = t;
          root.dataset.phase = "stimulus";
          if (options.onShow) options.onShow(t);
        },
        onHide: function () {
          root.dataset.phase = options.mask.length > 0 ? "mask" : "blank";
        },
      });
    });
    return {
      onset: function () { return onset; },
      stop: function (t) {
        root.dataset.phase = "done";
        if (clock === null) return { presented_ms: null, frames: null, requested_frames: null };
        var timing = clock.stop(t);
        return {
          presented_ms: timing.presented_ms,
          frames: timing.frames,
          requested_frames: timing.requested_frames,
        };
      },
    };
  }

  /**
   * @typedef {object} ChooseOptions
   * @property {any} jsPsych the running jsPsych (its keyboard listener)
   * @property {HTMLElement} root the trial's root: a click on one of its `.hl-choosable` elements
   *   chooses that element's `data-side`
   * @property {Omit<PresentOptions, "onShow">} presentation what `present` shows
   * @property {Record<string, string>} keys key (lower case) -> choice, listened for once shown
   * @property {HTMLElement} status the trial's live region
   * @property {string} waiting what the live region says once the stimuli are shown
   * @property {(choice: string, rt_ms: number, timing: Timing, modality: string) => void} finish
   *   called once: the choice, the response time from the onset, the presentation's timing and
   *   the input modality
   */

  /**
   * A trial answered by choosing one of several images (the triad, the odd-one-out triplet): the
   * images are presented, then one click on a choosable slot or one of `keys` ends the trial.
   * @param {ChooseOptions} options
   */
  function chooseOne(options) {
    var root = options.root;
    var finished = false;
    /** @type {any} */
    var keyboardListener = null;
    /** @type {{onset: () => number | null, stop: (t: number) => Timing} | null} */
    var presentation = null;

    /**
     * @param {string} choice
     * @param {number} t
     * @param {string} modality
     */
    var end = function (choice, t, modality) {
      if (finished || presentation === null) {
        return;
      }
      finished = true;
      if (keyboardListener !== null) {
        options.jsPsych.pluginAPI.cancelKeyboardResponse(keyboardListener);
      }
      root.removeEventListener("click", onClick);
      var onset = presentation.onset();
      var timing = presentation.stop(t);
      options.finish(choice, round1(Math.max(0, t - (onset === null ? t : onset))), timing, modality);
    };

    /** @param {MouseEvent} event */
    var onClick = function (event) {
      if (presentation === null || presentation.onset() === null || finished) {
        return;
      }
      /** @type {HTMLElement | null} */
      var slot = /** @type {HTMLElement} */ (event.target).closest(".hl-choosable");
      if (slot === null || !root.contains(slot)) {
        return;
      }
      end(slot.dataset.side || "", eventTime(event), clickModality(event));
    };
    root.addEventListener("click", onClick);

    presentation = present(Object.assign({}, options.presentation, {
      onShow: function () {
        options.status.textContent = options.waiting;
        keyboardListener = options.jsPsych.pluginAPI.getKeyboardResponse({
          // the listener calls back synchronously inside the keydown dispatch
          callback_function: function (/** @type {{key: string}} */ response) {
            end(options.keys[response.key.toLowerCase()], performance.now(), "keyboard");
          },
          valid_responses: Object.keys(options.keys),
          rt_method: "performance",
          persist: false,
          allow_held_key: false,
        });
      },
    }));
  }

  /** Which input devices a participant used: value() is null, "keyboard", "mouse" or "both". */
  class Modalities {
    constructor() {
      /** @type {Set<string>} */
      this.used = new Set();
    }

    /** @param {string} modality "keyboard" or "mouse" */
    add(modality) {
      this.used.add(modality);
    }

    /** @returns {string | null} */
    value() {
      if (this.used.size === 2) return "both";
      if (this.used.size === 1) return this.used.values().next().value || null;
      return null;
    }
  }

  /**
   * A click synthesised from the keyboard (Space or Enter on a focused control) has detail 0.
   * @param {MouseEvent} event
   * @returns {string}
   */
  function clickModality(event) {
    return event.detail === 0 ? "keyboard" : "mouse";
  }

  /**
   * The timing a simulated trial reports: a timed hide after the requested frames, or the image
   * up until the response (rt_ms) in "until_response" mode or when the response came first.
   * @param {{presentation: string, duration_ms: number | null, frame_ms: number}} trial
   * @param {number} rt_ms
   * @returns {Timing}
   */
  function simulatedTiming(trial, rt_ms) {
    var frame_ms = trial.frame_ms > 0 ? trial.frame_ms : HumanlikeFrameClock.DEFAULT_FRAME_MS;
    var duration_ms = trial.presentation === "duration" ? trial.duration_ms : null;
    var requested = duration_ms === null ? null : HumanlikeFrameClock.framesFor(duration_ms, frame_ms);
    if (requested !== null && requested * frame_ms <= rt_ms) {
      return { presented_ms: round1(requested * frame_ms), frames: requested, requested_frames: requested };
    }
    return {
      presented_ms: round1(rt_ms),
      frames: Math.max(1, Math.ceil(rt_ms / frame_ms - 1e-3)),
      requested_frames: requested,
    };
  }

  /**
   * Resolves at the onset of the trial under `container` (its .hl-trial root leaves "loading"),
   * polling once per animation frame; never resolves if the trial goes away first.
   * @param {HTMLElement} container
   * @returns {Promise<HTMLElement>} the trial's root
   */
  function whenShown(container) {
    return new Promise(function (resolve) {
      var poll = function () {
        /** @type {HTMLElement | null} */
        var root = container.querySelector(".hl-trial");
        if (root !== null && root.dataset.phase !== "loading") {
          resolve(root);
        } else if (root === null || root.isConnected) {
          window.requestAnimationFrame(poll);
        }
      };
      poll();
    });
  }

  /**
   * A polite status region, read by screen readers and hidden on screen (class hl-sr-only): the
   * trial announces in it what it now waits for and what the participant changed.
   * @param {HTMLElement} parent
   * @returns {HTMLElement}
   */
  function liveRegion(parent) {
    var el = document.createElement("p");
    el.className = "hl-sr-only hl-live";
    el.setAttribute("role", "status");
    el.setAttribute("aria-live", "polite");
    parent.appendChild(el);
    return el;
  }

  return {
    liveRegion: liveRegion,
    round1: round1,
    eventTime: eventTime,
    durationFor: durationFor,
    maskFor: maskFor,
    image: image,
    present: present,
    chooseOne: chooseOne,
    Modalities: Modalities,
    clickModality: clickModality,
    simulatedTiming: simulatedTiming,
    whenShown: whenShown,
  };
})();

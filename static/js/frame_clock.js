// @ts-check
/**
 * HumanlikeFrameClock: frame-locked stimulus presentation for the humanlike jsPsych plugins.
 *
 * Every visibility change happens inside a requestAnimationFrame (rAF) callback, so it lands on a
 * screen refresh, and every time reported comes from rAF timestamps (the same clock as
 * performance.now() and KeyboardEvent.timeStamp).
 *
 *   framesFor(duration_ms, frame_ms)     -> whole number of frames, max(1, round(duration / frame))
 *   present({target, mask, duration_ms, frame_ms, onShow, onHide}) -> presentation handle
 *   measureRefresh(nFrames = 60, timeout_ms = 5000) -> Promise<{frame_ms, refresh_hz, n_intervals}>
 *
 * A presentation makes `target` visible in the first rAF callback; that callback's timestamp is the
 * onset. In duration mode a rAF loop then runs every frame and, in the first callback whose
 * timestamp is at least (requested_frames - 0.5) frames after the onset, hides `target` and shows
 * `mask` (if any) in the same callback, so the image stays up for the requested whole number of
 * refreshes. Hiding on the elapsed rAF time rather than on the number of callbacks keeps the
 * duration right when the browser skips callbacks (a busy main thread): the screen still shows the
 * image during a skipped refresh, so that refresh counts as one on screen.
 *
 * Reported (all from rAF timestamps, which are aligned to refreshes):
 *   presented_ms  hide timestamp - onset timestamp; if the trial ends first (or in until-response
 *                 mode), t_end - onset, with t_end the response time.
 *   frames        refreshes the image was on screen: round(presented_ms / frame_ms) at a hide;
 *                 ceil(presented_ms / frame_ms) at a response (the refresh in which the response
 *                 fell was shown in full).
 *   callbacks     rAF callbacks seen after the onset (frames - callbacks ~ callbacks skipped);
 *                 a diagnostic, not recorded by the plugins.
 */
var HumanlikeFrameClock = (function () {
  "use strict";

  var DEFAULT_FRAME_MS = 1000 / 60;

  /**
   * @typedef {object} FrameTiming
   * @property {number | null} presented_ms
   * @property {number | null} frames
   * @property {number | null} requested_frames
   * @property {number} callbacks
   */

  /**
   * Number of whole frames for a duration: max(1, round(duration_ms / frame_ms)).
   * @param {number} duration_ms
   * @param {number} frame_ms
   * @returns {number}
   */
  function framesFor(duration_ms, frame_ms) {
    if (!(duration_ms > 0)) {
      throw new Error("duration_ms must be a positive number, got " + duration_ms);
    }
    if (!(frame_ms > 0)) {
      throw new Error("frame_ms must be a positive number, got " + frame_ms);
    }
    return Math.max(1, Math.round(duration_ms / frame_ms));
  }

  /**
   * @param {HTMLElement | HTMLElement[] | null | undefined} elements
   * @returns {HTMLElement[]}
   */
  function asList(elements) {
    if (!elements) {
      return [];
    }
    return Array.isArray(elements) ? elements : [elements];
  }

  /**
   * @param {HTMLElement[]} elements
   * @param {boolean} visible
   */
  function setVisible(elements, visible) {
    elements.forEach(function (element) {
      element.style.visibility = visible ? "visible" : "hidden";
    });
  }

  /**
   * @param {number} x
   * @returns {number}
   */
  function round1(x) {
    return Math.round(x * 10) / 10;
  }

  /**
   * Show `target` in a rAF callback; in duration mode hide it (swap to `mask`) after a whole number
   * of frames. `target` (and `mask`) should start with `visibility: hidden` so the layout does not
   * move at onset. Options:
   *   target       Element, or array of elements, to show (required).
   *   mask         Element(s) shown when `target` is hidden (optional; blank if null).
   *   duration_ms  null for until-response mode, else the requested duration.
   *   frame_ms     Measured duration of one refresh (default 1000/60).
   *   onShow(t)    Called with the onset rAF timestamp, right after the target became visible.
   *   onHide(r)    Called with the timing (below) right after hiding.
   * Returns a handle: {requested_frames, onset() -> timestamp|null, stop(t_end) -> timing}.
   * stop(t_end) cancels the loop and returns the timing {presented_ms, frames, requested_frames,
   * callbacks}: the hide-time values if the target was already hidden, else measured to t_end
   * (default performance.now()).
   * @param {{target: HTMLElement | HTMLElement[], mask?: HTMLElement | HTMLElement[] | null,
   *   duration_ms?: number | null, frame_ms?: number | null, onShow?: ((t: number) => void) | null,
   *   onHide?: ((timing: FrameTiming) => void) | null}} options
   * @returns {{requested_frames: number | null, onset: () => number | null,
   *   stop: (t_end?: number | null) => FrameTiming}}
   */
  function present(options) {
    var target = asList(options.target);
    if (target.length === 0) {
      throw new Error("HumanlikeFrameClock.present needs a target element");
    }
    var mask = asList(options.mask);
    var frame_ms = options.frame_ms == null ? DEFAULT_FRAME_MS : options.frame_ms;
    var duration_ms = options.duration_ms == null ? null : options.duration_ms;
    var requested = duration_ms === null ? null : framesFor(duration_ms, frame_ms);
    var onShow = options.onShow || null;
    var onHide = options.onHide || null;

    /** @type {number | null} */
    var onset = null;
    var callbacks = 0;
    /** @type {FrameTiming | null} set once the target has been hidden or the presentation stopped */
    var result = null;
    /** @type {number | null} */
    var rafId = null;

    setVisible(target, false);
    setVisible(mask, false);

    /** @param {number} t */
    function tick(t) {
      rafId = null;
      if (result !== null) {
        return;
      }
      if (!target[0].isConnected) {
        // The trial was torn down without stop() (e.g. the experiment was aborted).
        result = {
          presented_ms: null,
          frames: null,
          requested_frames: requested,
          callbacks: callbacks,
        };
        return;
      }
      if (onset === null) {
        setVisible(target, true);
        onset = t;
        if (onShow) {
          onShow(t);
        }
      } else {
        callbacks += 1;
        if (requested !== null && t - onset >= (requested - 0.5) * frame_ms) {
          setVisible(target, false);
          setVisible(mask, true);
          result = {
            presented_ms: round1(t - onset),
            frames: Math.round((t - onset) / frame_ms),
            requested_frames: requested,
            callbacks: callbacks,
          };
          if (onHide) {
            onHide(result);
          }
          return;
        }
      }
      rafId = window.requestAnimationFrame(tick);
    }

    rafId = window.requestAnimationFrame(tick);

    return {
      requested_frames: requested,
      onset: function () {
        return onset;
      },
      stop: function (t_end) {
        if (rafId !== null) {
          window.cancelAnimationFrame(rafId);
          rafId = null;
        }
        if (result === null) {
          var end = t_end == null ? performance.now() : t_end;
          var elapsed = onset === null ? null : Math.max(0, end - onset);
          result = {
            presented_ms: elapsed === null ? null : round1(elapsed),
            // 1e-3 frame of slack so a response exactly on a refresh boundary is not a frame more
            frames: elapsed === null ? 0 : Math.max(1, Math.ceil(elapsed / frame_ms - 1e-3)),
            requested_frames: requested,
            callbacks: callbacks,
          };
        }
        return result;
      },
    };
  }

  /**
   * Median interval between `nFrames` + 1 consecutive rAF timestamps. Resolves early after
   * `timeout_ms` (rAF pauses in background tabs) with the intervals seen so far, or with
   * frame_ms = 1000/60 and n_intervals = 0 if none were seen.
   * @param {number} [nFrames]
   * @param {number} [timeout_ms]
   * @returns {Promise<{frame_ms: number, refresh_hz: number, n_intervals: number}>}
   */
  function measureRefresh(nFrames, timeout_ms) {
    var n = nFrames == null ? 60 : nFrames;
    var timeout = timeout_ms == null ? 5000 : timeout_ms;
    if (!(n >= 1)) {
      throw new Error("measureRefresh needs nFrames >= 1, got " + nFrames);
    }
    return new Promise(function (resolve) {
      /** @type {number[]} */
      var stamps = [];
      /** @type {number | null} */
      var rafId = null;
      var done = false;
      var timer = window.setTimeout(finish, timeout);

      function finish() {
        if (done) {
          return;
        }
        done = true;
        window.clearTimeout(timer);
        if (rafId !== null) {
          window.cancelAnimationFrame(rafId);
        }
        var intervals = [];
        for (var i = 1; i < stamps.length; i++) {
          intervals.push(stamps[i] - stamps[i - 1]);
        }
        var frame_ms = DEFAULT_FRAME_MS;
        if (intervals.length > 0) {
          intervals.sort(function (a, b) {
            return a - b;
          });
          var mid = Math.floor(intervals.length / 2);
          frame_ms =
            intervals.length % 2 === 1 ? intervals[mid] : (intervals[mid - 1] + intervals[mid]) / 2;
        }
        resolve({
          frame_ms: Math.round(frame_ms * 1000) / 1000,
          refresh_hz: Math.round((1000 / frame_ms) * 100) / 100,
          n_intervals: intervals.length,
        });
      }

      /** @param {number} t */
      function step(t) {
        rafId = null;
        stamps.push(t);
        if (stamps.length > n) {
          finish();
        } else if (!done) {
          rafId = window.requestAnimationFrame(step);
        }
      }

      rafId = window.requestAnimationFrame(step);
    });
  }

  return {
    DEFAULT_FRAME_MS: DEFAULT_FRAME_MS,
    framesFor: framesFor,
    present: present,
    measureRefresh: measureRefresh,
  };
})();

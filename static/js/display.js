// @ts-check
/**
 * HumanlikeDisplay: what the display can show, decided before the first trial.
 *
 *   pxPerDegree(px_per_mm, distance_mm)  -> px_per_mm * 2 d tan(0.5 deg)   (Li et al. 2020, Sci Rep 10:904)
 *   viewingDistanceMm(blind_spot_px, px_per_mm) -> (s / px_per_mm) / tan(13.5 deg)   (the same)
 *   framesFor(duration_ms, frame_ms)     -> max(1, round half up(duration / frame)): HumanlikeFrameClock's
 *   offWholeFrames(duration_ms, frame_ms) -> |d/f - round(d/f)|, in frames
 *   durations(timeline)                  -> the distinct requested stimulus durations (ms)
 *   check(settings, frame, durations)    -> null, or {reason, detail} when the spec's [display] refuses
 *   sizePx(deg, px_per_deg), fits(px, width, height, across): 90 % of the window, `across` images a row
 *   prepare(timeline, frame, queue)      -> Promise<boolean>: calibration (if the spec asks; the one the
 *       server stored is reused after a reload or resume), the
 *       rendered size (presentation.image_height_px set from image_height_deg), the record POSTed to
 *       /display; false (with the "display not suitable" screen) when the display cannot run the study.
 *
 * The same numbers, limits and rounding as server/participants/display.py (which refuses a record that does not
 * follow from its answers).
 */
var HumanlikeDisplay = (function () {
  "use strict";

  var CARD_WIDTH_MM = 85.6;
  var CARD_HEIGHT_MM = 53.98;
  var BLIND_SPOT_DEG = 13.5;
  var PX_PER_MM_LIMITS = [1.5, 20];
  var DISTANCE_MM_LIMITS = [200, 1500];
  var MAX_ATTEMPTS = 3;
  var FIT_SHARE = 0.9;

  /**
   * @typedef {object} DisplaySettings
   * @property {boolean} [calibration]
   * @property {number[] | null} [refresh_hz]
   * @property {number} [refresh_tolerance_hz]
   * @property {boolean} [whole_frames]
   * @property {number} [whole_frame_tolerance]
   */

  /** @param {number} deg @returns {number} */
  function radians(deg) { return deg * Math.PI / 180; }

  /**
   * Pixels per degree at the screen centre (Li et al. 2020): px_per_mm * 2 d tan(0.5 deg).
   * @param {number} px_per_mm
   * @param {number} distance_mm
   * @returns {number}
   */
  function pxPerDegree(px_per_mm, distance_mm) {
    return px_per_mm * 2 * distance_mm * Math.tan(radians(0.5));
  }

  /**
   * Viewing distance from the blind spot's offset s (px) from fixation: (s / px_per_mm) / tan(13.5 deg).
   * @param {number} blind_spot_px
   * @param {number} px_per_mm
   * @returns {number}
   */
  function viewingDistanceMm(blind_spot_px, px_per_mm) {
    return (blind_spot_px / px_per_mm) / Math.tan(radians(BLIND_SPOT_DEG));
  }

  /**
   * @param {number} duration_ms
   * @param {number} frame_ms
   * @returns {number} whole frames: max(1, round half up(duration / frame))
   */
  function framesFor(duration_ms, frame_ms) {
    return HumanlikeFrameClock.framesFor(duration_ms, frame_ms);
  }

  /**
   * @param {number} duration_ms
   * @param {number} frame_ms
   * @returns {number} distance from a whole number of frames, in frames (0 to 0.5)
   */
  function offWholeFrames(duration_ms, frame_ms) {
    var x = duration_ms / frame_ms;
    return Math.abs(x - Math.floor(x + 0.5));
  }

  /**
   * The distinct stimulus durations the timeline requests: each entry's own duration_ms, and the
   * presentation's in "duration" mode.
   * @param {Timeline} tl
   * @returns {number[]}
   */
  function durations(tl) {
    /** @type {Record<string, number>} */
    var seen = {};
    var p = tl.presentation || {};
    if (p.mode === "duration" && p.duration_ms) seen[String(p.duration_ms)] = p.duration_ms;
    tl.trials.forEach(function (t) {
      var d = /** @type {any} */ (t).duration_ms;
      if (typeof d === "number" && d > 0) seen[String(d)] = d;
    });
    return Object.keys(seen).map(function (k) { return seen[k]; }).sort(function (a, b) { return a - b; });
  }

  /**
   * Whether the spec's [display] refuses this display: its refresh rate, or a duration that is no
   * whole number of frames at it.
   * @param {DisplaySettings} settings
   * @param {{frame_ms: number, refresh_hz: number}} frame
   * @param {number[]} requested
   * @returns {{reason: string, detail: string} | null}
   */
  function check(settings, frame, requested) {
    var rates = settings.refresh_hz || null;
    var tol = settings.refresh_tolerance_hz == null ? 2 : settings.refresh_tolerance_hz;
    if (rates && rates.length && !rates.some(function (hz) { return Math.abs(frame.refresh_hz - hz) <= tol; })) {
      return { reason: "refresh_rate",
               detail: _("refresh rate %(measured)s Hz; accepted: %(accepted)s Hz",
                         { measured: frame.refresh_hz.toFixed(1), accepted: rates.join(", ") }) };
    }
    if (settings.whole_frames) {
      var ftol = settings.whole_frame_tolerance == null ? 0.1 : settings.whole_frame_tolerance;
      for (var i = 0; i < requested.length; i++) {
        if (offWholeFrames(requested[i], frame.frame_ms) > ftol) {
          return { reason: "whole_frames",
                   detail: _("%(ms)s ms is %(frames)s frames at %(hz)s Hz",
                             { ms: requested[i], frames: (requested[i] / frame.frame_ms).toFixed(2),
                               hz: frame.refresh_hz.toFixed(1) }) };
        }
      }
    }
    return null;
  }

  /**
   * @param {number} deg
   * @param {number} px_per_deg
   * @returns {number} whole CSS pixels
   */
  function sizePx(deg, px_per_deg) {
    return Math.round(deg * px_per_deg);
  }

  /**
   * Whether `across` images `px` tall (and wide) side by side fit the window with room around them.
   * @param {number} px
   * @param {number} width
   * @param {number} height
   * @param {number} [across] images in a row (a triad shows three), default 1
   * @returns {boolean}
   */
  function fits(px, width, height, across) {
    var n = across && across > 1 ? across : 1;
    return px <= FIT_SHARE * height && n * px <= FIT_SHARE * width;
  }

  /**
   * @param {Timeline} tl
   * @returns {number} the most images a trial of the timeline shows side by side
   */
  function across(tl) {
    return tl.trials.reduce(function (most, t) {
      return Math.max(most, t.stimuli ? t.stimuli.length : 1);
    }, 1);
  }

  /**
   * Run the calibration plugin in its own jsPsych run; resolves with its data.
   * @returns {Promise<any>}
   */
  function calibrate() {
    return new Promise(function (resolve) {
      var jsPsych = initJsPsych({ display_element: "task" });
      jsPsych.run([{ type: jsPsychCalibration, on_finish: function (/** @type {any} */ data) { resolve(data); } }]);
    });
  }

  /**
   * Before the first trial: check the display against the spec, calibrate, size the stimuli, send
   * the record. Resolves true to go on, false after showing the "display not suitable" screen.
   * @param {Timeline} tl
   * @param {{frame_ms: number, refresh_hz: number, n_intervals?: number}} frame
   * @param {{request: (path: string, body?: any) => Promise<any>}} queue
   * @returns {Promise<boolean>}
   */
  function prepare(tl, frame, queue) {
    var settings = /** @type {DisplaySettings} */ (tl.display || {});
    var p = tl.presentation || /** @type {any} */ ({});
    var deg = p.image_height_deg == null ? null : p.image_height_deg;
    /** @type {any} */
    var record = {
      refresh_hz: frame.refresh_hz, frame_ms: frame.frame_ms, n_intervals: frame.n_intervals || 0,
      calibration: null, image_height_px: p.image_height_px, image_height_deg: null,
      window_width: window.innerWidth, window_height: window.innerHeight,
      device_pixel_ratio: window.devicePixelRatio || 1, suitable: true, reason: null,
    };
    /** @param {string} reason @param {string} detail @returns {Promise<boolean>} */
    function refuse(reason, detail) {
      record.suitable = false;
      record.reason = reason;
      return send().then(function (/** @type {any} */ reply) {
        var target = reply && reply.next;
        HumanlikeScreens.unsuitableScreen(reason, detail, !!target);
        // a declared exit: the server ended the study and names the platform page with its code
        if (target && target.kind === "redirect") window.location.assign(target.url);
        return false;
      });
    }
    function send() {
      return queue.request("/display", record).catch(function (/** @type {any} */ err) {
        console.error("humanlike: display record refused", err);
      });
    }
    var problem = check(settings, frame, durations(tl));
    if (problem) return refuse(problem.reason, problem.detail);
    // a reload or a resume reuses the calibration the server stored (the participant is not asked again)
    var stored = /** @type {any} */ (tl).calibration || null;
    var calibrated = !settings.calibration ? Promise.resolve(null)
      : stored ? Promise.resolve(stored) : calibrate();
    return calibrated.then(function (/** @type {any} */ cal) {
      if (cal && cal.failed) {
        record.calibration = null;
        return refuse("calibration_failed", cal.failed === "card"
          ? _("the screen-size answers stayed outside plausible limits")
          : _("the viewing-distance answers stayed outside plausible limits"));
      }
      if (cal) {
        record.calibration = {
          card_width_px: cal.card_width_px, px_per_mm: cal.px_per_mm, blind_spot_px: cal.blind_spot_px,
          viewing_distance_mm: cal.viewing_distance_mm, px_per_deg: cal.px_per_deg,
          card_attempts: cal.card_attempts, blind_spot_attempts: cal.blind_spot_attempts,
        };
      }
      if (deg !== null && cal) {
        var px = sizePx(deg, cal.px_per_deg);
        record.image_height_px = px;
        record.image_height_deg = px / cal.px_per_deg;
        if (!fits(px, window.innerWidth, window.innerHeight, across(tl))) {
          return refuse("too_small", _("%(deg)s degrees is %(px)s pixels here; the window is %(width)s x %(height)s",
                                       { deg: deg, px: px, width: window.innerWidth, height: window.innerHeight }));
        }
        p.image_height_px = px;
      }
      return send().then(function () { return true; });
    });
  }

  return {
    CARD_WIDTH_MM: CARD_WIDTH_MM, CARD_HEIGHT_MM: CARD_HEIGHT_MM, BLIND_SPOT_DEG: BLIND_SPOT_DEG,
    PX_PER_MM_LIMITS: PX_PER_MM_LIMITS, DISTANCE_MM_LIMITS: DISTANCE_MM_LIMITS, MAX_ATTEMPTS: MAX_ATTEMPTS,
    pxPerDegree: pxPerDegree, viewingDistanceMm: viewingDistanceMm, framesFor: framesFor,
    offWholeFrames: offWholeFrames, durations: durations, check: check, sizePx: sizePx, fits: fits,
    prepare: prepare,
  };
})();

// @ts-check
/* The browser half of the trial-type registry (the server's is humanlike.server.trial_types.registry).
 *
 * Each trial type's file (static/js/plugins/<name>.js) registers, under the type's name, the
 * builder that turns one entry of the participant's timeline into a jsPsych trial; the runner
 * looks the builder up by `entry.type`. This file is loaded before every file that registers.
 *
 * The typedefs below are the timeline the server sends and what a builder gets from the runner.
 */

/**
 * One trial of the participant's timeline, as the server sends it (design fields included).
 * @typedef {object} TimelineEntry
 * @property {number} index
 * @property {string} type
 * @property {string} [stimulus]
 * @property {string[]} [stimuli]
 * @property {string} [prompt]
 * @property {string} [sequence]
 * @property {number} [s1]
 * @property {number} [s2]
 * @property {number} [s3]
 * @property {boolean} [swapped]
 * @property {string} [block]
 * @property {string} [kind]
 * @property {boolean} [practice]
 * @property {boolean} [is_repeat]
 */

/**
 * @typedef {object} Timeline
 * @property {string} status
 * @property {string} consent_html
 * @property {string} instructions_html
 * @property {string} stimulus_base
 * @property {number[]} acknowledged
 * @property {number} [attempt] the block attempt (restarts of a block under the resume policy)
 * @property {string | null} [restarted_block] the block the last return restarted (none of it answered since)
 * @property {TimelineEntry[]} trials
 * @property {Array<{label: string, key: string}>} categories
 * @property {Array<{name: string, text: string, options?: string[] | null}>} debrief
 * @property {{mode: string, duration_ms: number | null, mask: string | null, image_height_px: number,
 *   image_height_deg?: number | null, fixation_ms?: number, iti_ms?: number}} presentation
 * @property {Record<string, any>} [display] the spec's [display] table (server/participants/display.py)
 * @property {Record<string, any> | null} [calibration] the calibration stored earlier, reused on a resume
 * @property {Record<string, {intro: string, trial_type: string, practice_feedback: boolean}>} [blocks]
 * @property {number | null} [break_every]
 * @property {boolean} [fullscreen]
 * @property {number} [estimated_minutes]
 */

/** @typedef {{frame_ms: number, refresh_hz: number, n_intervals?: number}} FrameInfo */

/**
 * What a builder gets from the runner besides its timeline entry.
 * @typedef {object} TrialContext
 * @property {Timeline} timeline the participant's timeline (categories, presentation, debrief, ...)
 * @property {FrameInfo} frame the measured refresh
 * @property {(key: string) => string} stimulusUrl the URL of a stimulus key
 * @property {(entry: TimelineEntry, response: object, data: any) => void} send queue a finished
 *   trial for the server: what the participant did, and the plugin's data (timing)
 */

/** @typedef {(entry: TimelineEntry, ctx: TrialContext) => object} TrialBuilder */

var HumanlikeTrialTypes = (function () {
  "use strict";

  /** @type {Record<string, TrialBuilder>} */
  var builders = {};

  /**
   * @param {string} name
   * @returns {boolean}
   */
  function has(name) { return Object.prototype.hasOwnProperty.call(builders, name); }

  /**
   * Register the builder of the trial type `name` (once per name).
   * @param {string} name the type's name in the server's registry (a timeline entry's `type`)
   * @param {TrialBuilder} builder
   */
  function register(name, builder) {
    if (has(name)) throw new Error("humanlike: trial type " + JSON.stringify(name) + " registered twice");
    builders[name] = builder;
  }

  /**
   * @param {string} name
   * @returns {TrialBuilder | null} the builder of the type `name`, or null if none is registered
   */
  function get(name) { return has(name) ? builders[name] : null; }

  /** @returns {string[]} the registered type names, in the order they were registered */
  function names() { return Object.keys(builders); }

  /**
   * The presentation parameters the rating and triad plugins take, from the timeline and the
   * measured refresh.
   * @param {TrialContext} ctx
   */
  function presentationParams(ctx) {
    var p = ctx.timeline.presentation;
    return {
      presentation: p.mode,
      duration_ms: p.duration_ms,
      mask: p.mask ? ctx.stimulusUrl(p.mask) : null,
      frame_ms: ctx.frame.frame_ms,
    };
  }

  return { register: register, get: get, names: names, presentationParams: presentationParams };
})();

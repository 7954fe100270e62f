/**
 * Test harness for the humanlike jsPsych plugins (used by tests/e2e/test_plugins.py).
 *
 * A timeline is a JSON array of trials whose `type` is a plugin name ("rating", "triad",
 * "preload"). window.runHarness(timeline) runs it and resolves with the trial data
 * (jsPsych.data.get().values()); the result is also left in window.harnessResult.
 * window.simulateHarness(timeline, mode) does the same through jsPsych.simulate(timeline, mode)
 * ("data-only" or "visual").
 * window.harnessPreloadList(timeline) returns what jsPsych's auto_preload would fetch.
 * window.harnessKeys records the `key` of every keydown, to show what the browser delivered.
 */
(function () {
  "use strict";

  var PLUGINS = {
    rating: jsPsychRating,
    triad: jsPsychTriad,
    preload: jsPsychPreload,
  };

  function resolveTypes(timeline) {
    return timeline.map(function (trial) {
      var copy = Object.assign({}, trial);
      if (typeof copy.type === "string") {
        if (!(copy.type in PLUGINS)) {
          throw new Error("harness: unknown plugin type " + copy.type);
        }
        copy.type = PLUGINS[copy.type];
      }
      if (Array.isArray(copy.timeline)) {
        copy.timeline = resolveTypes(copy.timeline);
      }
      return copy;
    });
  }

  window.harnessKeys = [];
  document.addEventListener(
    "keydown",
    function (e) {
      window.harnessKeys.push({ key: e.key, code: e.code, shift: e.shiftKey });
    },
    true
  );

  window.harnessResult = null;
  window.harnessError = null;

  window.runHarness = function (timeline) {
    return runWith(timeline, function (jsPsych, resolved) { return jsPsych.run(resolved); });
  };

  window.simulateHarness = function (timeline, mode) {
    return runWith(timeline, function (jsPsych, resolved) { return jsPsych.simulate(resolved, mode); });
  };

  function runWith(timeline, go) {
    var jsPsych = initJsPsych();
    window.harnessJsPsych = jsPsych;
    return go(jsPsych, resolveTypes(timeline))
      .then(function () {
        window.harnessResult = jsPsych.data.get().values();
        return window.harnessResult;
      })
      .catch(function (err) {
        window.harnessError = String(err && err.stack ? err.stack : err);
        throw err;
      });
  }

  window.harnessPreloadList = function (timeline) {
    var jsPsych = initJsPsych();
    return jsPsych.pluginAPI.getAutoPreloadList(resolveTypes(timeline));
  };

  var query = new URLSearchParams(window.location.search).get("timeline");
  if (query) {
    window.addEventListener("load", function () {
      window.runHarness(JSON.parse(query));
    });
  }
})();

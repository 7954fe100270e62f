// Globals the browser scripts in static/js/ use but do not define: jsPsych's browser build
// (static/vendor/jspsych/jspsych.js) and the official plugins the task page loads. Our own globals
// (HumanlikeFrameClock, HumanlikePresentation, HumanlikeTrialTypes, HumanlikeTrialQueue,
// HumanlikeSession, HumanlikeScreens, HumanlikeConsent, HumanlikeRunner, jsPsychRating, jsPsychTriad,
// jsPsychClassification, jsPsychFixation) are the top-level `var`s of the scripts themselves, and the
// typedefs at the top level of a script (Timeline, TimelineEntry, TrialContext in trial_types.js;
// RunnerConfig, RunnerState in session.js) are global types. Read by `npx tsc` only.

/** jsPsych's module namespace (ParameterType, JsPsych, ...), as the browser build exposes it. */
declare const jsPsychModule: typeof import("jspsych");
declare const initJsPsych: typeof import("jspsych").initJsPsych;
type JsPsych = import("jspsych").JsPsych;

declare const jsPsychPreload: typeof import("@jspsych/plugin-preload").default;
declare const jsPsychHtmlButtonResponse: typeof import("@jspsych/plugin-html-button-response").default;
declare const jsPsychSurveyHtmlForm: typeof import("@jspsych/plugin-survey-html-form").default;

// The runner: one builder per trial type (each trial type's file registers it with
// HumanlikeTrialTypes), triad responses carry only what the participant did, and a trial type the
// browser cannot build stops the study with an error event.
import * as jspsych from "jspsych";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { loadScript, readSource } from "./load_script.js";

globalThis.jsPsychModule = jspsych;
loadScript("i18n.js"); // the pages' strings (`_`), as base.html loads it first
loadScript("frame_clock.js");
loadScript("presentation.js");
loadScript("trial_types.js");
loadScript("plugins/rating.js");
loadScript("plugins/triad.js");
loadScript("plugins/classification.js");
loadScript("plugins/odd_one_out.js");
loadScript("plugins/debrief.js");
loadScript("trial_queue.js");
loadScript("session.js");
loadScript("screens.js");
loadScript("display.js");
loadScript("consent.js");
loadScript("runner.js");
const Runner = globalThis.HumanlikeRunner;
const TrialTypes = globalThis.HumanlikeTrialTypes;
const Session = globalThis.HumanlikeSession;

const TIMELINE = {
  status: "started",
  consent_html: "",
  instructions_html: "",
  stimulus_base: "/stimuli/",
  acknowledged: [],
  categories: [{ label: "cat", key: "c" }],
  debrief: [{ name: "strategy", text: "How?" }],
  presentation: { mode: "until_response", duration_ms: null, mask: null, image_height_px: 256 },
  trials: [],
};

beforeEach(() => {
  window.localStorage.clear();
  document.body.innerHTML = "<div id='sync-status'></div><div id='task'></div>";
});

afterEach(() => {
  vi.restoreAllMocks();
  vi.unstubAllGlobals();
});

describe("the trial-type registry", () => {
  it("holds one builder per trial type, each registered by its own file", () => {
    expect(TrialTypes.names()).toEqual(["rating", "triad", "classification", "odd_one_out", "debrief"]);
    for (const name of TrialTypes.names()) {
      expect(typeof TrialTypes.get(name)).toBe("function");
      expect(readSource(`plugins/${name}.js`)).toContain(`HumanlikeTrialTypes.register("${name}", `);
    }
    expect(readSource("runner.js")).not.toContain("register(");
  });

  it("refuses a second builder for a type, and knows no type it was not given", () => {
    expect(() => TrialTypes.register("triad", () => ({}))).toThrow('trial type "triad" registered twice');
    expect(TrialTypes.get("slider")).toBeNull();
    expect(TrialTypes.get("toString")).toBeNull();
    expect(TrialTypes.names()).toEqual(["rating", "triad", "classification", "odd_one_out", "debrief"]);
  });

  it("buildTrials stops at the first entry whose type has no builder", () => {
    const built = Runner.buildTrials([{ index: 0, type: "slider" }, { index: 1, type: "toString" }]);
    expect(built.unknown).toEqual({ index: 0, type: "slider" });
    expect(Runner.buildTrials([{ index: 1, type: "toString" }]).unknown.type).toBe("toString");
  });

  it("a triad response carries what the participant did and no design field", () => {
    const added = [];
    Object.assign(Session.state, {
      timeline: TIMELINE,
      frame: { frame_ms: 16.7, refresh_hz: 60 },
      queue: { add: (payload) => added.push(payload) },
    });
    const entry = { index: 4, type: "triad", stimuli: ["a.png", "b.png", "c.png"], sequence: "s",
                    s1: 1, s2: 3, s3: 6, swapped: true };
    const trial = TrialTypes.get("triad")(entry, Runner.trialContext());
    expect([trial.left, trial.reference, trial.right]).toEqual(["/stimuli/c.png", "/stimuli/b.png", "/stimuli/a.png"]);
    expect([trial.s_left, trial.s_ref, trial.s_right]).toEqual([6, 3, 1]);
    trial.on_finish({ choice: "left", chosen_level: 6, input_modality: "keyboard", requested_frames: null,
                      rt_ms: 812.4, presented_ms: 812.4, frames: 49, swapped: true, s_left: 6 });
    expect(added).toHaveLength(1);
    expect(added[0]).toMatchObject({ trial_index: 4, trial_type: "triad", rt_ms: 812.4, frames: 49 });
    expect(added[0].response).toEqual({ choice: "left", chosen_level: 6, input_modality: "keyboard",
                                        requested_frames: null });
  });
});

describe("the debrief", () => {
  it("is one form of the spec's questions; its response carries the answers as text", () => {
    const added = [];
    const form = { info: { name: "survey-html-form" } };
    vi.stubGlobal("jsPsychSurveyHtmlForm", form);
    Object.assign(Session.state, {
      timeline: { ...TIMELINE, debrief: [{ name: "strategy", text: "How?" },
                                         { name: "vision", text: "Glasses <b>?</b>", options: ["yes", "it's <no>"] }] },
      frame: { frame_ms: 16.7, refresh_hz: 60 },
      queue: { add: (payload) => added.push(payload) },
    });
    const trial = TrialTypes.get("debrief")({ index: 9, type: "debrief" }, Runner.trialContext());
    expect(trial.type).toBe(form);
    expect(trial.autofocus).toBe("debrief-strategy");
    expect(trial.html).toContain("<textarea id='debrief-strategy' name='strategy'");
    expect(trial.html).toContain("<legend>Glasses &lt;b&gt;?&lt;/b&gt;</legend>");
    expect(trial.html).toContain("id='debrief-vision-1' name='vision' value='it&#39;s &lt;no&gt;'> it's &lt;no&gt;</label>");
    trial.on_finish({ response: { strategy: "looked", vision: "yes" }, rt: 4321 });
    expect(added).toHaveLength(1);
    expect(added[0]).toMatchObject({ trial_index: 9, trial_type: "debrief", rt_ms: 4321,
                                     response: { answers: { strategy: "looked", vision: "yes" } } });
  });
});

describe("an unknown trial type", () => {
  it("is reported as an error event and the participant sees a message; no trial starts", async () => {
    const posted = [];
    vi.stubGlobal("fetch", vi.fn((url, init) => {
      if (init.method === "POST") posted.push({ url, body: JSON.parse(init.body) });
      const body = url.endsWith("/timeline")
        ? { ...TIMELINE, trials: [{ index: 0, type: "rating", stimulus: "x.png" }, { index: 1, type: "slider" }] }
        : {};
      return Promise.resolve(new Response(JSON.stringify(body), { status: 200 }));
    }));
    const initJsPsych = vi.fn();
    vi.stubGlobal("initJsPsych", initJsPsych);
    vi.spyOn(console, "error").mockImplementation(() => {});
    Runner.start({ pid: "p9", token: "t", api: "/api/p9" });
    await vi.waitFor(() => expect(document.getElementById("start-error")).not.toBeNull());
    expect(document.getElementById("task").textContent).toContain("This study cannot run");
    expect(document.getElementById("start-error").textContent).toContain('unknown trial type "slider"');
    await vi.waitFor(() => expect(posted.some((p) => p.body.type === "error")).toBe(true));
    const error = posted.find((p) => p.body.type === "error");
    expect(error.url).toBe("/api/p9/events");
    expect(error.body.value).toEqual({ message: 'unknown trial type "slider"', trial_index: 1 });
    expect(initJsPsych).not.toHaveBeenCalled();
  });
});

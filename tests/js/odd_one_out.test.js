// The odd_one_out plugin's simulate() (jsPsych 8 simulation API) gives every declared data field,
// consistent with its parameters, and its builder turns a timeline entry (stimuli in shown order)
// into the trial and sends only what the participant did.
import * as jspsych from "jspsych";
import { beforeEach, describe, expect, it } from "vitest";
import { loadScript } from "./load_script.js";

globalThis.jsPsychModule = jspsych;
loadScript("i18n.js"); // the pages' strings (`_`), as base.html loads it first
loadScript("frame_clock.js");
loadScript("presentation.js");
loadScript("trial_types.js");
loadScript("plugins/odd_one_out.js");
const { jsPsychOddOneOut, HumanlikeTrialTypes } = globalThis;

function triplet(params) {
  return { type: jsPsychOddOneOut, left: "i/a.png", middle: "i/b.png", right: "i/c.png", ...params };
}

async function simulate(timeline) {
  const display = document.createElement("div");
  document.body.appendChild(display);
  const jsPsych = jspsych.initJsPsych({ display_element: display });
  await jsPsych.simulate(timeline, "data-only");
  return { data: jsPsych.data.get().values(), display };
}

beforeEach(() => {
  document.body.innerHTML = "";
});

describe("odd_one_out simulate('data-only')", () => {
  it("produces every data field the plugin declares and shows nothing", async () => {
    const { data, display } = await simulate([triplet({})]);
    const declared = Object.keys(jsPsychOddOneOut.info.data);
    expect(declared).toEqual(["choice", "chosen", "rt_ms", "presented_ms", "frames", "requested_frames",
                              "input_modality", "left", "middle", "right"]);
    for (const field of declared) {
      expect(data[0][field], field).not.toBeUndefined();
    }
    expect(data[0].trial_type).toBe("odd_one_out");
    expect(display.querySelector(".hl-trial")).toBeNull();
  });

  it("draws every position, and the chosen image is the one at the chosen position", async () => {
    const { data } = await simulate(Array.from({ length: 30 }, () => triplet({})));
    expect([...new Set(data.map((t) => t.choice))].sort()).toEqual(["left", "middle", "right"]);
    const at = { left: "i/a.png", middle: "i/b.png", right: "i/c.png" };
    for (const trial of data) expect(trial.chosen).toBe(at[trial.choice]);
  });

  it("reports whole frames in duration mode and takes fields from simulation_options.data", async () => {
    const { data } = await simulate([
      triplet({ presentation: "duration", duration_ms: 100, frame_ms: 1000 / 60 }),
      triplet({ simulation_options: { data: { choice: "middle", rt_ms: 1234.5 } } }),
    ]);
    expect(data[0]).toMatchObject({ requested_frames: 6, frames: 6 });
    expect(data[1]).toMatchObject({ choice: "middle", chosen: "i/b.png", rt_ms: 1234.5,
                                    frames: Math.ceil(1234.5 / (1000 / 60)), requested_frames: null });
  });
});

describe("odd_one_out builder", () => {
  it("shows the entry's stimuli left to right and sends only what the participant did", () => {
    const sent = [];
    const ctx = {
      timeline: { presentation: { mode: "until_response", duration_ms: null, mask: null, image_height_px: 256 } },
      frame: { frame_ms: 16.7, refresh_hz: 60 },
      stimulusUrl: (key) => "/stimuli/" + key,
      send: (entry, response, data) => sent.push({ entry, response, data }),
    };
    const entry = { index: 7, type: "odd_one_out", triplet: ["a.png", "b.png", "c.png"],
                    stimuli: ["c.png", "a.png", "b.png"] };
    const trial = HumanlikeTrialTypes.get("odd_one_out")(entry, ctx);
    expect([trial.left, trial.middle, trial.right]).toEqual(["/stimuli/c.png", "/stimuli/a.png", "/stimuli/b.png"]);
    expect(trial.image_height_px).toBe(200);
    trial.on_finish({ choice: "right", chosen: "/stimuli/b.png", input_modality: "mouse",
                      requested_frames: null, rt_ms: 1500, left: "/stimuli/c.png" });
    expect(sent).toHaveLength(1);
    expect(sent[0].response).toEqual({ choice: "right", input_modality: "mouse", requested_frames: null });
  });
});

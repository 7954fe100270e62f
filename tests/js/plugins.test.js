// simulate() of the rating and triad plugins (jsPsych 8 simulation API): "data-only" gives every
// data field the plugin declares, with values consistent with its parameters.
import * as jspsych from "jspsych";
import { beforeEach, describe, expect, it } from "vitest";
import { loadScript } from "./load_script.js";

globalThis.jsPsychModule = jspsych;
loadScript("i18n.js"); // the pages' strings (`_`), as base.html loads it first
loadScript("frame_clock.js");
loadScript("presentation.js");
loadScript("trial_types.js");
loadScript("plugins/rating.js");
loadScript("plugins/triad.js");
const { jsPsychRating, jsPsychTriad } = globalThis;

const CATEGORIES = [
  { label: "cat", key: "c" },
  { label: "dog", key: "d" },
  { label: "one", key: "1" },
];

function rating(params) {
  return { type: jsPsychRating, stimulus: "img/stim.png", categories: CATEGORIES, ...params };
}

function triad(params) {
  return {
    type: jsPsychTriad,
    reference: "s/4.png",
    left: "s/2.png",
    right: "s/7.png",
    sequence: "seq-a",
    s_left: 2,
    s_ref: 4,
    s_right: 7,
    ...params,
  };
}

async function simulate(timeline, options) {
  const display = document.createElement("div");
  document.body.appendChild(display);
  const jsPsych = jspsych.initJsPsych({ display_element: display, ...options });
  await jsPsych.simulate(timeline, "data-only");
  return { data: jsPsych.data.get().values(), display };
}

beforeEach(() => {
  document.body.innerHTML = "";
});

describe.each([
  ["rating", jsPsychRating, rating],
  ["triad", jsPsychTriad, triad],
])("%s simulate('data-only')", (name, plugin, make) => {
  it("produces every data field the plugin declares and shows nothing", async () => {
    const { data, display } = await simulate([make({})]);
    expect(data).toHaveLength(1);
    const declared = Object.keys(plugin.info.data);
    expect(declared.length).toBeGreaterThan(5);
    for (const field of declared) {
      expect(data[0], field).toHaveProperty(field);
      expect(data[0][field], field).not.toBeUndefined();
    }
    expect(data[0].trial_type).toBe(name);
    expect(display.querySelector(".hl-trial")).toBeNull();
  });

  it("reports whole requested frames in duration mode, as the real presentation does", async () => {
    const { data } = await simulate([make({ presentation: "duration", duration_ms: 100, frame_ms: 1000 / 60 })]);
    expect(data[0].requested_frames).toBe(6);
    expect(data[0].frames).toBe(6);
    expect(data[0].presented_ms).toBeCloseTo(100, 1);
  });

  it("takes fields from simulation_options.data", async () => {
    const fixed = name === "rating" ? { rt_ms: 1234.5, n_changes: 0 } : { rt_ms: 1234.5, choice: "right" };
    const { data } = await simulate([make({ simulation_options: { data: fixed } })]);
    expect(data[0]).toMatchObject(fixed);
    expect(data[0].frames).toBe(Math.ceil(1234.5 / (1000 / 60)));
    expect(data[0].requested_frames).toBeNull();
  });
});

describe("simulated values", () => {
  it("rating: each category gets one of the levels / 100, and require_change forces a change", async () => {
    const timeline = Array.from({ length: 20 }, () => rating({ require_change: true }));
    const { data } = await simulate(timeline);
    for (const trial of data) {
      expect(Object.keys(trial.ratings)).toEqual(["cat", "dog", "one"]);
      for (const value of Object.values(trial.ratings)) {
        expect([0, 0.25, 0.5, 0.75, 1]).toContain(value);
      }
      expect(trial.n_changes).toBeGreaterThan(0);
      expect(trial.first_rt_ms).toBeLessThanOrEqual(trial.rt_ms);
      expect(trial.stimulus).toBe("img/stim.png");
    }
  });

  it("rating: given ratings imply the number of level steps, one per level from 0 %", async () => {
    const ratings = { cat: 0.5, dog: 0, one: 1 };
    const { data } = await simulate([rating({ simulation_options: { data: { ratings, rt_ms: 1000 } } })]);
    expect(data[0]).toMatchObject({ ratings, n_changes: 6, first_rt_ms: 400 });
  });

  it("triad: the chosen level is the level of the chosen side", async () => {
    const { data } = await simulate(Array.from({ length: 20 }, () => triad({})));
    const choices = new Set(data.map((t) => t.choice));
    expect([...choices].sort()).toEqual(["left", "right"]);
    for (const trial of data) {
      expect(trial.chosen_level).toBe(trial.choice === "left" ? 2 : 7);
      expect(trial).toMatchObject({ sequence: "seq-a", s_left: 2, s_ref: 4, s_right: 7, left: "s/2.png" });
    }
  });

  it("a whole mixed timeline runs through jsPsych.simulate", async () => {
    const { data } = await simulate([rating({}), triad({}), rating({ levels: [0, 50, 100] }), triad({})]);
    expect(data.map((t) => t.trial_type)).toEqual(["rating", "triad", "rating", "triad"]);
    expect(Object.values(data[2].ratings).every((v) => [0, 0.5, 1].includes(v))).toBe(true);
  });
});

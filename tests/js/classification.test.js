// The classification plugin: its seeded 1/f mask is reproducible and full-contrast, and
// simulate("data-only") gives every data field it declares, consistent with its parameters.
import * as jspsych from "jspsych";
import { describe, expect, it } from "vitest";
import { loadScript } from "./load_script.js";

globalThis.jsPsychModule = jspsych;
loadScript("i18n.js"); // the pages' strings (`_`), as base.html loads it first
loadScript("frame_clock.js");
loadScript("presentation.js");
loadScript("trial_types.js");
loadScript("plugins/classification.js");
const { jsPsychClassification } = globalThis;

const CATEGORIES = [{ label: "cat", key: "c" }, { label: "dog", key: "d" }];

describe("classification mask", () => {
  it("is the same for the same seed and different for another", () => {
    const a = jsPsychClassification.pinkNoise(64, 7);
    expect(Array.from(jsPsychClassification.pinkNoise(64, 7))).toEqual(Array.from(a));
    expect(Array.from(jsPsychClassification.pinkNoise(64, 8))).not.toEqual(Array.from(a));
  });

  it("spans the full grey range", () => {
    const a = Array.from(jsPsychClassification.pinkNoise(64, 3));
    expect(Math.min(...a)).toBe(0);
    expect(Math.max(...a)).toBe(255);
  });
});

describe("classification simulate data-only", () => {
  it("declares every field it reports, with whole frames at the requested duration", async () => {
    const jsPsych = jspsych.initJsPsych();
    const trial = { type: jsPsychClassification, stimulus: "x.png", categories: CATEGORIES,
                    correct_label: "cat", duration_ms: 200, frame_ms: 1000 / 60, mask_seed: 5 };
    await jsPsych.simulate([trial], "data-only");
    const data = jsPsych.data.get().values()[0];
    for (const field of Object.keys(jsPsychClassification.info.data)) {
      expect(data).toHaveProperty(field);
    }
    expect(["cat", "dog"]).toContain(data.response);
    expect(data.correct).toBe(data.response === "cat");
    expect(data.frames).toBe(12);
    expect(data.mask_seed).toBe(5);
  });
});

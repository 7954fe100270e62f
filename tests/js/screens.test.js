// The screens around the trials (block intro, practice over, breaks, fixation, ITI) and the token
// handed over in the URL fragment.
import * as jspsych from "jspsych";
import { beforeEach, describe, expect, it } from "vitest";
import { loadScript } from "./load_script.js";

globalThis.jsPsychModule = jspsych;
globalThis.jsPsychHtmlButtonResponse = { info: { name: "html-button-response" } };
loadScript("i18n.js"); // the pages' strings (`_`), as base.html loads it first
loadScript("frame_clock.js");
loadScript("presentation.js");
loadScript("trial_types.js");
loadScript("plugins/rating.js");
loadScript("plugins/triad.js");
loadScript("plugins/fixation.js");
loadScript("trial_queue.js");
loadScript("session.js");
loadScript("screens.js");
loadScript("consent.js");
loadScript("runner.js");
const Session = globalThis.HumanlikeSession;
const Screens = globalThis.HumanlikeScreens;

const trials = [
  { index: 0, type: "rating", block: "r", practice: true },
  { index: 1, type: "rating", block: "r", practice: false },
  { index: 2, type: "rating", block: "r", practice: false },
  { index: 3, type: "triad", block: "t", practice: false },
  { index: 4, type: "rating", block: "r", practice: false, is_repeat: true },
  { index: 5, type: "debrief", block: "debrief", practice: false },
];

function kinds(out) {
  return out.map((t) => (t.data && t.data.screen) || (t.kind || "trial"));
}

beforeEach(() => {
  window.localStorage.clear();
  window.sessionStorage.clear();
  Object.assign(Session.state, {
    timeline: {
      trials, categories: [{ label: "cat", key: "c" }], break_every: 2,
      presentation: { mode: "until_response", fixation_ms: 500, iti_ms: 0, duration_ms: null, mask: null },
      blocks: { r: { intro: "Rate.", trial_type: "rating", practice_feedback: true },
                t: { intro: "", trial_type: "triad", practice_feedback: false } },
    },
    frame: { frame_ms: 16.7, refresh_hz: 60 },
  });
});

describe("withScreens", () => {
  it("puts intros, practice feedback and 'practice over', breaks and fixation where the spec says", () => {
    const built = trials.map((t) => ({ kind: "trial" }));
    const out = Screens.withScreens(trials, built, false);
    expect(kinds(out)).toEqual([
      "intro", "fixation", "trial", "practice_feedback",
      "practice_over", "fixation", "trial",
      "break", "fixation", "trial",
      "intro", "fixation", "trial",
      "break", "intro", "fixation", "trial",
      "trial",
    ]);
  });

  it("never puts a block introduction straight before a break: the break comes first", () => {
    for (const every of [1, 2, 3, 4]) {
      Session.state.timeline.break_every = every;
      const out = kinds(Screens.withScreens(trials, trials.map(() => ({ kind: "trial" })), false));
      out.forEach((screen, i) => {
        if (screen === "intro" || screen === "practice_over") expect(out[i + 1]).not.toBe("break");
      });
      // every break the spec asks for is still shown: one before each trial index divisible by N
      const due = trials.filter((t) => t.type !== "debrief" && t.index > 0 && t.index % every === 0);
      expect(out.filter((s) => s === "break").length).toBe(due.length);
    }
  });

  it("a resume starts with the block intro, not a break", () => {
    const rest = trials.slice(2);
    const out = Screens.withScreens(rest, rest.map(() => ({ kind: "trial" })), true);
    expect(kinds(out).slice(0, 3)).toEqual(["intro", "fixation", "trial"]);
  });

  it("titles each block's introduction by its place: Part 1 of 2, Part 2 of 2 (never 'Next part' first)", () => {
    const out = Screens.withScreens(trials, trials.map(() => ({ kind: "trial" })), false);
    const titles = out.filter((t) => t.data && t.data.screen === "intro")
      .map((t) => /<h2>([^<]*)<\/h2>/.exec(t.stimulus)[1]);
    expect(titles).toEqual(["Part 1 of 2", "Part 2 of 2", "Last part"]);
  });

  it("a study of one block calls its introduction 'The task'", () => {
    const one = trials.filter((t) => t.block !== "t");
    Session.state.timeline.trials = one;
    const out = Screens.withScreens(one, one.map(() => ({ kind: "trial" })), false);
    expect(out[0].stimulus).toContain("<h2>The task</h2>");
  });
});

describe("resolveToken", () => {
  it("takes the token from the fragment once, keeps it per participant and clears the URL", () => {
    window.history.replaceState(null, "", "/run/abc#token=T0k-en_1");
    expect(Session.resolveToken({ pid: "abc", token: null, api: "/api" })).toBe("T0k-en_1");
    expect(window.location.hash).toBe("");
    expect(window.sessionStorage.getItem("humanlike-token:abc")).toBe("T0k-en_1");
    expect(Session.resolveToken({ pid: "abc", token: null, api: "/api" })).toBe("T0k-en_1");
    expect(Session.resolveToken({ pid: "other", token: null, api: "/api" })).toBeNull();
  });
});

// HumanlikeDisplay (static/js/display.js): the virtual chinrest's geometry against independent
// trigonometry, whole frames at 60, 120 and 144 Hz, the spec's refusals, and prepare()'s record.
import * as jspsych from "jspsych";
import { describe, expect, it, vi } from "vitest";
import { loadScript } from "./load_script.js";

globalThis.jsPsychModule = jspsych;
globalThis.jsPsychHtmlButtonResponse = { info: { name: "html-button-response" } };
loadScript("i18n.js"); // the pages' strings (`_`), as base.html loads it first
loadScript("frame_clock.js");
loadScript("trial_queue.js");
loadScript("session.js");
loadScript("screens.js");
loadScript("display.js");
const D = globalThis.HumanlikeDisplay;

describe("geometry (Li et al. 2020)", () => {
  it("px per degree spans exactly one degree at the viewing distance", () => {
    for (const [ppmm, d] of [[3.78, 500], [5.2, 620]]) {
      const ppd = D.pxPerDegree(ppmm, d);
      const deg = (2 * Math.atan(ppd / ppmm / 2 / d) * 180) / Math.PI;
      expect(deg).toBeCloseTo(1, 10);
    }
  });
  it("the blind spot lies 13.5 degrees from fixation at the computed distance", () => {
    const d = D.viewingDistanceMm(480, 3.78);
    expect((Math.atan(480 / 3.78 / d) * 180) / Math.PI).toBeCloseTo(13.5, 10);
  });
  it("a 4-degree image is round(4 * px_per_deg) pixels and must fit 90% of the window", () => {
    expect(D.sizePx(4, 37.6)).toBe(150);
    expect(D.fits(150, 1280, 900)).toBe(true);
    expect(D.fits(820, 1280, 900)).toBe(false);
    expect(D.fits(380, 1280, 900, 3)).toBe(true);   // a triad: three images in a row
    expect(D.fits(400, 1280, 900, 3)).toBe(false);
  });
});

describe("whole frames", () => {
  it("200 ms is 12, 24 and 29 frames at 60, 120 and 144 Hz", () => {
    expect([60, 120, 144].map((hz) => D.framesFor(200, 1000 / hz))).toEqual([12, 24, 29]);
    expect(D.offWholeFrames(200, 1000 / 144)).toBeCloseTo(0.2, 10);
    expect(D.offWholeFrames(200, 1000 / 59.94)).toBeLessThan(0.02);
  });
  it("the spec refuses a rate it does not list, and a duration no whole number of frames", () => {
    const s = { refresh_hz: [60, 120], refresh_tolerance_hz: 2, whole_frames: true, whole_frame_tolerance: 0.1 };
    expect(D.check(s, { refresh_hz: 119.9, frame_ms: 1000 / 119.9 }, [200])).toBe(null);
    expect(D.check(s, { refresh_hz: 144, frame_ms: 1000 / 144 }, [200]).reason).toBe("refresh_rate");
    const any = { whole_frames: true };
    expect(D.check(any, { refresh_hz: 144, frame_ms: 1000 / 144 }, [200]).reason).toBe("whole_frames");
    expect(D.check(any, { refresh_hz: 144, frame_ms: 1000 / 144 }, [250])).toBe(null);
    expect(D.check({}, { refresh_hz: 144, frame_ms: 1000 / 144 }, [200])).toBe(null);
  });
  it("collects the presentation's and the entries' own durations", () => {
    const tl = { presentation: { mode: "duration", duration_ms: 200 },
                 trials: [{ duration_ms: 100 }, { duration_ms: 200 }, {}] };
    expect(D.durations(tl)).toEqual([100, 200]);
    expect(D.durations({ presentation: { mode: "until_response", duration_ms: 300 }, trials: [] })).toEqual([]);
  });
});

describe("prepare", () => {
  it("refuses a 144 Hz display politely and records why, before any trial", async () => {
    document.body.innerHTML = "<div id='task'></div>";
    const sent = [];
    const queue = { request: (path, body) => { sent.push([path, body]); return Promise.resolve({}); } };
    const tl = { presentation: { mode: "duration", duration_ms: 200, image_height_px: 280 }, trials: [],
                 display: { whole_frames: true } };
    const ok = await D.prepare(tl, { refresh_hz: 144, frame_ms: 1000 / 144, n_intervals: 60 }, queue);
    expect(ok).toBe(false);
    expect(sent).toHaveLength(1);
    expect(sent[0][0]).toBe("/display");
    expect(sent[0][1]).toMatchObject({ suitable: false, reason: "whole_frames", refresh_hz: 144 });
    expect(document.querySelector("[data-screen='unsuitable']").dataset.reason).toBe("whole_frames");
    expect(document.getElementById("unsuitable-detail").textContent).toContain("28.80 frames");
  });
  it("goes to the platform page the server names when it ends the study there (a declared exit)", async () => {
    document.body.innerHTML = "<div id='task'></div>";
    const url = "https://app.prolific.com/submissions/complete?cc=SCREEN01";
    const queue = { request: () => Promise.resolve({ stored: true, next: { kind: "redirect", url: url } }) };
    const assign = vi.spyOn(window.location, "assign").mockImplementation(() => {});
    const tl = { presentation: { mode: "duration", duration_ms: 200, image_height_px: 280 }, trials: [],
                 display: { whole_frames: true } };
    expect(await D.prepare(tl, { refresh_hz: 144, frame_ms: 1000 / 144, n_intervals: 60 }, queue)).toBe(false);
    expect(assign).toHaveBeenCalledWith(url);
    expect(document.querySelector("[data-screen='unsuitable']").textContent).toContain("Taking you back");
    assign.mockRestore();
  });
  it("records a suitable display without calibration", async () => {
    const sent = [];
    const queue = { request: (path, body) => { sent.push(body); return Promise.resolve({}); } };
    const tl = { presentation: { mode: "until_response", image_height_px: 280 }, trials: [], display: {} };
    expect(await D.prepare(tl, { refresh_hz: 60, frame_ms: 1000 / 60, n_intervals: 60 }, queue)).toBe(true);
    expect(sent[0]).toMatchObject({ suitable: true, reason: null, calibration: null, image_height_px: 280 });
  });
  it("reuses the calibration stored before a reload, and sizes the image from it", async () => {
    const sent = [];
    const queue = { request: (path, body) => { sent.push(body); return Promise.resolve({}); } };
    let started = 0;
    globalThis.initJsPsych = () => { started += 1; return { run: () => {} }; };
    const stored = { card_width_px: 323, px_per_mm: 323 / 85.6, blind_spot_px: [500],
                     viewing_distance_mm: 600, px_per_deg: 39.5, card_attempts: 1, blind_spot_attempts: 1 };
    const tl = { presentation: { mode: "until_response", image_height_px: 280, image_height_deg: 4 },
                 trials: [], display: { calibration: true }, calibration: stored };
    Object.defineProperty(window, "innerWidth", { value: 1280, configurable: true });
    Object.defineProperty(window, "innerHeight", { value: 900, configurable: true });
    expect(await D.prepare(tl, { refresh_hz: 60, frame_ms: 1000 / 60, n_intervals: 60 }, queue)).toBe(true);
    expect(started).toBe(0);
    expect(tl.presentation.image_height_px).toBe(158);
    expect(sent[0]).toMatchObject({ suitable: true, calibration: stored, image_height_px: 158 });
    expect(sent[0].image_height_deg).toBeCloseTo(158 / 39.5, 12);
  });
  it("refuses a window too small for the size in degrees", async () => {
    const sent = [];
    const queue = { request: (path, body) => { sent.push(body); return Promise.resolve({}); } };
    document.body.innerHTML = "<div id='task'></div>";
    const stored = { px_per_deg: 60 };
    const tl = { presentation: { mode: "until_response", image_height_px: 280, image_height_deg: 12 },
                 trials: [], display: { calibration: true }, calibration: stored };
    Object.defineProperty(window, "innerHeight", { value: 700, configurable: true });
    expect(await D.prepare(tl, { refresh_hz: 60, frame_ms: 1000 / 60, n_intervals: 60 }, queue)).toBe(false);
    expect(sent[0]).toMatchObject({ suitable: false, reason: "too_small", image_height_px: 720 });
    expect(document.querySelector("[data-screen='unsuitable']").dataset.reason).toBe("too_small");
  });
});

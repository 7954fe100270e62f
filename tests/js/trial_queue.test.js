// The trial queue's paths: acknowledgement, retries with backoff, permanent refusals, offline/online,
// drained(), request() and events, all through the one retry policy (fake timers, stubbed fetch).
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { loadScript } from "./load_script.js";

loadScript("i18n.js"); // the pages' strings (`_`), as base.html loads it first

loadScript("trial_queue.js");
const { TrialQueue, backoffDelay, isRetryable } = globalThis.HumanlikeTrialQueue;

const KEY = "humanlike:p1:pending";

/** A fetch stub answering with `statuses` in turn (a number: that status; "net": a network failure). */
function fetchAnswering(...statuses) {
  const calls = [];
  const fn = vi.fn((url, init) => {
    calls.push({ url, method: init.method, body: init.body ? JSON.parse(init.body) : undefined });
    const next = statuses.length > 1 ? statuses.shift() : statuses[0];
    if (next === "net") return Promise.reject(new TypeError("Failed to fetch"));
    const body = next >= 400 && next < 500 ? { error: "bad_trial", detail: "nope" } : { ok: true };
    return Promise.resolve(new Response(JSON.stringify(body), { status: next }));
  });
  fn.calls = calls;
  vi.stubGlobal("fetch", fn);
  return fn;
}

function stored() {
  return JSON.parse(window.localStorage.getItem(KEY) || "{}");
}

function trial(index) {
  return { trial_index: index, trial_type: "rating", response: { ratings: {} }, rt_ms: 1000 };
}

function newQueue(extra) {
  return new TrialQueue({ api: "/api/p1", token: "tok", pid: "p1", ...extra });
}

/** Let pending promise callbacks run without moving the clock. */
async function settle() {
  await vi.advanceTimersByTimeAsync(0);
}

beforeEach(() => {
  vi.useFakeTimers();
  vi.spyOn(Math, "random").mockReturnValue(0.5); // jitter factor 1: delays 500, 1000, 2000, ...
  window.localStorage.clear();
});

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
  vi.unstubAllGlobals();
});

describe("retry policy", () => {
  it("backoff doubles from 0.5 s to a 15 s ceiling with jitter in [0.75, 1.25)", () => {
    expect([0, 1, 2, 3, 4, 5, 6, 10].map(backoffDelay)).toEqual([500, 1000, 2000, 4000, 8000, 15000, 15000, 15000]);
    Math.random.mockReturnValue(0);
    expect(backoffDelay(0)).toBe(375);
    Math.random.mockReturnValue(0.999999);
    expect(backoffDelay(5)).toBeCloseTo(18750, 0);
  });

  it("retries 5xx, 408 and 429 and nothing else", () => {
    expect([500, 502, 503, 408, 429].every(isRetryable)).toBe(true);
    expect([200, 201, 400, 401, 403, 404, 409, 413, 422].some(isRetryable)).toBe(false);
  });
});

describe("trials", () => {
  it("an acknowledged trial (201 or 200) leaves localStorage", async () => {
    const fetch = fetchAnswering(201, 200);
    const statuses = [];
    const q = newQueue({ onStatus: (s) => statuses.push(s) });
    q.add(trial(0));
    expect(Object.keys(stored())).toEqual(["0"]); // stored before it is sent
    await settle();
    q.add(trial(1));
    await settle();
    expect(fetch).toHaveBeenCalledTimes(2);
    expect(fetch.calls.map((c) => [c.url, c.method, c.body.trial_index])).toEqual([
      ["/api/p1/trials", "POST", 0],
      ["/api/p1/trials", "POST", 1],
    ]);
    expect(stored()).toEqual({});
    expect(q.size()).toBe(0);
    expect(statuses.at(-1)).toEqual({ online: true, pending: 0 });
  });

  it.each([[503], [429], [408], ["net"]])(
    "a %s answer keeps the trial in localStorage and retries after 0.5 s, 1 s, 2 s",
    async (failure) => {
      const fetch = fetchAnswering(failure, failure, failure, 201);
      const statuses = [];
      const q = newQueue({ onStatus: (s) => statuses.push(s) });
      q.add(trial(3));
      await settle();
      expect(fetch).toHaveBeenCalledTimes(1);
      expect(statuses.at(-1)).toEqual({ online: false, pending: 1 });
      for (const [wait, calls] of [[500, 2], [1000, 3], [2000, 4]]) {
        expect(Object.keys(stored())).toEqual(["3"]);
        await vi.advanceTimersByTimeAsync(wait - 1);
        expect(fetch).toHaveBeenCalledTimes(calls - 1);
        await vi.advanceTimersByTimeAsync(1);
        expect(fetch).toHaveBeenCalledTimes(calls);
      }
      expect(stored()).toEqual({});
    }
  );

  it("a permanent 4xx keeps the trial locally, reports it through onError and does not block the others", async () => {
    const errors = [];
    const fetch = fetchAnswering(422, 201, 201);
    const q = newQueue({ onError: (e) => errors.push(e) });
    q.add(trial(0));
    q.add(trial(1));
    q.add(trial(2));
    const drained = vi.fn();
    q.drained().then(drained);
    await settle();
    expect(fetch).toHaveBeenCalledTimes(3);
    expect(errors).toEqual([{ error: "bad_trial", detail: "nope", trial_index: 0 }]);
    expect(Object.keys(stored())).toEqual(["0"]); // never dropped
    expect(q.size()).toBe(0);
    expect(drained).toHaveBeenCalledTimes(1);
    await vi.advanceTimersByTimeAsync(60000);
    expect(fetch).toHaveBeenCalledTimes(3); // the refused trial is not sent again
  });

  /** A fetch stub: trial `conflicted` gets a 409 with `error`, every other call a 201. */
  function fetchConflicting(conflicted, error) {
    const calls = [];
    const fn = vi.fn((url, init) => {
      const body = JSON.parse(init.body);
      calls.push({ url, body });
      if (url.endsWith("/trials") && body.trial_index === conflicted) {
        const answer = { error, detail: { trial_index: conflicted, fields: ["rt_ms"] } };
        return Promise.resolve(new Response(JSON.stringify(answer), { status: 409 }));
      }
      return Promise.resolve(new Response(JSON.stringify({ ok: true }), { status: 201 }));
    });
    fn.calls = calls;
    vi.stubGlobal("fetch", fn);
    return fn;
  }

  it("a 409 trial_conflict drops the trial, logs an error event naming its index, and is not retried", async () => {
    const errors = [];
    const fetch = fetchConflicting(1, "trial_conflict");
    const q = newQueue({ onError: (e) => errors.push(e) });
    q.add(trial(0));
    q.add(trial(1));
    q.add(trial(2));
    const drained = vi.fn();
    q.drained().then(drained);
    await settle();
    const trials = fetch.calls.filter((c) => c.url.endsWith("/trials")).map((c) => c.body.trial_index);
    expect(trials).toEqual([0, 1, 2]);
    const events = fetch.calls.filter((c) => c.url.endsWith("/events")).map((c) => c.body);
    expect(events).toHaveLength(1);
    expect(events[0].type).toBe("error");
    expect(events[0].value).toMatchObject({ error: "trial_conflict", trial_index: 1, dropped: trial(1) });
    expect(errors).toEqual([{ error: "trial_conflict", detail: { trial_index: 1, fields: ["rt_ms"] }, trial_index: 1 }]);
    expect(stored()).toEqual({}); // dropped, not kept for ever
    expect(q.size()).toBe(0);
    expect(drained).toHaveBeenCalledTimes(1);
    await vi.advanceTimersByTimeAsync(60000);
    expect(fetch).toHaveBeenCalledTimes(4); // nothing sent again
  });

  it("a trial too large for an event is still dropped on trial_conflict, its event naming only the index", async () => {
    const fetch = fetchConflicting(0, "trial_conflict");
    const q = newQueue();
    q.add({ ...trial(0), response: { ratings: {}, note: "x".repeat(5000) } });
    await settle();
    const events = fetch.calls.filter((c) => c.url.endsWith("/events")).map((c) => c.body);
    expect(events).toHaveLength(1);
    expect(events[0].value).toEqual({ error: "trial_conflict", trial_index: 0, detail: { trial_index: 0, fields: ["rt_ms"] } });
    expect(stored()).toEqual({});
  });

  it("any other 409 (e.g. no_consent) keeps the trial locally as before and logs no event", async () => {
    const errors = [];
    const fetch = fetchConflicting(0, "no_consent");
    const q = newQueue({ onError: (e) => errors.push(e) });
    q.add(trial(0));
    await settle();
    expect(errors.map((e) => e.error)).toEqual(["no_consent"]);
    expect(Object.keys(stored())).toEqual(["0"]);
    expect(fetch.calls.filter((c) => c.url.endsWith("/events"))).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(60000);
    expect(fetch).toHaveBeenCalledTimes(1);
  });

  it("offline then online: the browser's online event sends at once instead of waiting out the backoff", async () => {
    const fetch = fetchAnswering("net");
    const q = newQueue();
    q.add(trial(5));
    await vi.advanceTimersByTimeAsync(500 + 1000 + 2000 + 4000); // four retries, now waiting 8 s
    expect(fetch).toHaveBeenCalledTimes(5);
    fetchAnswering(201);
    window.dispatchEvent(new Event("online"));
    await settle();
    expect(globalThis.fetch).toHaveBeenCalledTimes(1);
    expect(stored()).toEqual({});
  });

  it("drained() resolves only once every trial is acknowledged", async () => {
    fetchAnswering(503, 201, 503, 201);
    const q = newQueue();
    q.add(trial(0));
    q.add(trial(1));
    const drained = vi.fn();
    q.drained().then(drained);
    await settle();
    expect(drained).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(500);
    expect(drained).not.toHaveBeenCalled();
    expect(Object.keys(stored())).toEqual(["1"]);
    await vi.advanceTimersByTimeAsync(500);
    expect(drained).toHaveBeenCalledTimes(1);
    expect(stored()).toEqual({});
  });

  it("trials left in localStorage by an earlier page are sent, and forget() drops those the server holds", async () => {
    window.localStorage.setItem(KEY, JSON.stringify({ 7: trial(7), 8: trial(8) }));
    const fetch = fetchAnswering(201);
    const q = newQueue();
    q.forget([7]);
    expect(q.indices()).toEqual([8]);
    q.flush(true);
    await settle();
    expect(fetch.calls.map((c) => c.body.trial_index)).toEqual([8]);
    expect(stored()).toEqual({});
  });
});

describe("request() and events", () => {
  it("request() retries a 5xx and resolves with the JSON of the 2xx", async () => {
    const fetch = fetchAnswering(502, "net", 200);
    const q = newQueue();
    const result = vi.fn();
    q.request("/timeline").then(result);
    await settle();
    await vi.advanceTimersByTimeAsync(500);
    expect(result).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(1000);
    expect(result).toHaveBeenCalledWith({ ok: true });
    expect(fetch.calls.map((c) => c.method)).toEqual(["GET", "GET", "GET"]);
  });

  it("request() rejects with the body of a 4xx at once", async () => {
    const fetch = fetchAnswering(409);
    const q = newQueue();
    const outcome = q.request("/complete", {}).then(
      () => "resolved",
      (err) => err
    );
    await settle();
    expect(await outcome).toEqual({ error: "bad_trial", detail: "nope" });
    expect(fetch).toHaveBeenCalledTimes(1);
    expect(fetch.calls[0].method).toBe("POST");
  });

  it("an event is retried through the same policy and given up after 4 attempts", async () => {
    const fetch = fetchAnswering(503);
    const q = newQueue();
    const sent = vi.fn();
    q.event("blur").then(sent);
    await vi.advanceTimersByTimeAsync(500 + 1000 + 2000 + 60000);
    expect(fetch).toHaveBeenCalledTimes(4);
    expect(sent).toHaveBeenCalledWith(false);
    expect(fetch.calls[0].url).toBe("/api/p1/events");
    expect(fetch.calls[0].body).toMatchObject({ type: "blur", value: null });
  });

  it("an event the server takes resolves true after one call", async () => {
    const fetch = fetchAnswering(201);
    const q = newQueue();
    await expect(q.event("resize", { width: 800 })).resolves.toBe(true);
    expect(fetch).toHaveBeenCalledTimes(1);
  });
});

describe("a restarted block (resume policy restart_block)", () => {
  /** A server on attempt 1: a trial of attempt 0 gets 409 trial_from_restarted_block, others 201. */
  function fetchOnAttempt(current) {
    const calls = [];
    const fn = vi.fn((url, init) => {
      const body = JSON.parse(init.body);
      calls.push({ url, body });
      if ((body.attempt || 0) < current) {
        const answer = { error: "trial_from_restarted_block", detail: { trial_index: body.trial_index } };
        return Promise.resolve(new Response(JSON.stringify(answer), { status: 409 }));
      }
      return Promise.resolve(new Response(JSON.stringify({ trial_index: body.trial_index }), { status: 201 }));
    });
    fn.calls = calls;
    vi.stubGlobal("fetch", fn);
    return fn;
  }

  it("trials stored from the earlier attempt are handed over first, dropped on the server's 409, and their indices are answered again", async () => {
    window.localStorage.setItem(KEY, JSON.stringify({ 12: trial(12), 13: { ...trial(13), attempt: 0 } }));
    const fetch = fetchOnAttempt(1);
    const q = newQueue();
    q.setAttempt(1);
    expect(q.indices()).toEqual([]); // not answered in this attempt: the runner asks them again
    expect(JSON.parse(window.localStorage.getItem("humanlike:p1:stale")).map((t) => t.trial_index)).toEqual([12, 13]);
    q.add({ ...trial(12), rt_ms: 777 });
    await settle();
    const sent = fetch.calls.map((c) => [c.body.trial_index, c.body.attempt || 0, c.body.rt_ms]);
    expect(sent).toEqual([[12, 0, 1000], [13, 0, 1000], [12, 1, 777]]); // the old ones first
    expect(stored()).toEqual({});
    expect(window.localStorage.getItem("humanlike:p1:stale")).toBeNull();
    expect(q.size()).toBe(0);
  });

  it("an earlier-attempt trial refused for another reason stays stored locally and is not resent", async () => {
    window.localStorage.setItem(KEY, JSON.stringify({ 4: trial(4) }));
    const fetch = fetchAnswering(403);
    const errors = [];
    const q = newQueue({ onError: (e) => errors.push(e) });
    q.setAttempt(2);
    q.flush(true);
    await settle();
    await vi.advanceTimersByTimeAsync(60000);
    expect(fetch).toHaveBeenCalledTimes(1);
    expect(errors.map((e) => e.trial_index)).toEqual([4]);
    expect(JSON.parse(window.localStorage.getItem("humanlike:p1:stale"))).toEqual([trial(4)]);
    expect(q.size()).toBe(0);
  });

  it("trials of the current attempt stay where they are", () => {
    window.localStorage.setItem(KEY, JSON.stringify({ 5: { ...trial(5), attempt: 1 } }));
    fetchAnswering(201);
    const q = newQueue();
    q.setAttempt(1);
    expect(q.indices()).toEqual([5]);
    expect(window.localStorage.getItem("humanlike:p1:stale")).toBeNull();
  });

  it("a trial answered again after a refusal is sent again", async () => {
    const fetch = fetchAnswering(422, 201);
    const q = newQueue();
    q.add(trial(0));
    await settle();
    q.add({ ...trial(0), rt_ms: 5 });
    await settle();
    expect(fetch.calls.map((c) => c.body.rt_ms)).toEqual([1000, 5]);
    expect(stored()).toEqual({});
  });
});

describe("a page another window restarted", () => {
  it("a trial of this page's own attempt refused as restarted is dropped and reported; an older one silently", async () => {
    const errors = [];
    const fetch = vi.fn((url, init) => {
      const body = JSON.parse(init.body);
      const answer = { error: "trial_from_restarted_block", detail: { trial_index: body.trial_index } };
      return Promise.resolve(new Response(JSON.stringify(answer), { status: 409 }));
    });
    vi.stubGlobal("fetch", fetch);
    const q = newQueue({ onError: (e) => errors.push(e) });
    q.add(trial(1)); // before the timeline named the attempt: not this page's verdict yet
    await settle();
    expect(errors).toEqual([]);
    q.setAttempt(0);
    q.add(trial(2));
    await settle();
    expect(errors.map((e) => [e.error, e.trial_index])).toEqual([["trial_from_restarted_block", 2]]);
    expect(stored()).toEqual({});
  });
});

// Input provenance (static/js/provenance.js): counts by isTrusted since the last flush, one "input"
// event per flush, flushes when a trial is sent and when the page is hidden. Synthetic events are
// untrusted, as in a browser; a trusted one is marked by hand (happy-dom does not set isTrusted).
// happy-dom's navigator.webdriver is true; each test sets it.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { loadScript } from "./load_script.js";

loadScript("i18n.js"); // the pages' strings (`_`), as base.html loads it first

loadScript("provenance.js");
loadScript("session.js");
const P = globalThis.HumanlikeProvenance;
const Session = globalThis.HumanlikeSession;

const ZERO = { trusted: 0, untrusted: 0, pointer_moves: 0, clicks: 0, clicks_without_move: 0,
               pastes: 0, webdriver: false };

/** An event of `type` dispatched on `target`, trusted (as a person's) when `trusted`. */
function fire(type, { trusted = false, target = document.body } = {}) {
  const init = { bubbles: true };
  const event = type === "keydown" ? new KeyboardEvent(type, { ...init, key: "a" })
    : type === "paste" ? new Event(type, init)
      : type === "click" ? new MouseEvent(type, init) : new PointerEvent(type, init);
  if (trusted) Object.defineProperty(event, "isTrusted", { value: true });
  target.dispatchEvent(event);
}

let sent, webdriver;
beforeEach(() => {
  sent = [];
  webdriver = vi.spyOn(navigator, "webdriver", "get").mockReturnValue(false); // happy-dom says true
  document.body.innerHTML = "<button id='b'>ok</button>";
  P.watch({ event: (type, value) => sent.push([type, value]) });
});

afterEach(() => {
  P.unwatch();
  vi.restoreAllMocks();
});

describe("input provenance", () => {
  it("counts synthetic events as untrusted, and a click with no pointer move since the last one", () => {
    fire("keydown");
    document.getElementById("b").click();
    fire("click");
    fire("pointermove"); // synthetic: not a move
    fire("pointerdown");
    fire("paste");
    expect(P.flush()).toEqual({ ...ZERO, untrusted: 4, clicks: 2, clicks_without_move: 2, pastes: 1 });
    expect(sent).toEqual([["input", { ...ZERO, untrusted: 4, clicks: 2, clicks_without_move: 2, pastes: 1 }]]);
  });

  it("counts trusted input, and a mouse click after a move is not one without a move", () => {
    fire("pointermove", { trusted: true });
    fire("pointermove", { trusted: true });
    fire("pointerdown", { trusted: true });
    fire("click", { trusted: true }); // the same gesture: moved before it
    fire("click", { trusted: true }); // a second click, no move since the first
    fire("keydown", { trusted: true });
    P.flush();
    expect(sent).toEqual([["input", { ...ZERO, trusted: 4, pointer_moves: 2, clicks: 2,
                                      clicks_without_move: 1 }]]);
  });

  it("counts in the capture phase, before a handler can stop the event", () => {
    document.getElementById("b").addEventListener("click", (e) => e.stopPropagation());
    document.getElementById("b").click();
    expect(P.pending()).toMatchObject({ untrusted: 1, clicks: 1 });
  });

  it("sends deltas; the first flush goes even at zero, later empty ones do not", () => {
    expect(P.flush()).toEqual(ZERO);
    expect(P.flush()).toBeNull();
    fire("keydown");
    P.flush();
    fire("keydown");
    fire("keydown");
    P.flush();
    expect(sent.map(([, v]) => v.untrusted)).toEqual([0, 1, 2]);
    expect(P.flush()).toBeNull();
  });

  it("reports navigator.webdriver", () => {
    webdriver.mockReturnValue(true);
    expect(P.flush()).toEqual({ ...ZERO, webdriver: true });
  });

  it("flushes when the page is hidden, not when it is shown again", () => {
    fire("keydown");
    const state = vi.spyOn(document, "visibilityState", "get").mockReturnValue("visible");
    document.dispatchEvent(new Event("visibilitychange"));
    expect(sent).toEqual([]);
    state.mockReturnValue("hidden");
    document.dispatchEvent(new Event("visibilitychange"));
    expect(sent).toEqual([["input", { ...ZERO, untrusted: 1 }]]);
  });

  it("is flushed by the session right before a finished trial is queued", () => {
    const order = [];
    P.watch({ event: (type, value) => order.push([type, value.untrusted]) });
    Object.assign(Session.state, {
      timeline: { trials: [] },
      queue: { add: (payload) => order.push(["trial", payload.trial_index]) },
    });
    fire("keydown");
    Session.send({ index: 3, type: "rating" }, {}, {});
    fire("keydown");
    fire("keydown");
    Session.send({ index: 4, type: "rating" }, {}, {});
    expect(order).toEqual([["input", 1], ["trial", 3], ["input", 2], ["trial", 4]]);
  });

  it("stops counting and sending once unwatched", () => {
    P.unwatch();
    fire("keydown");
    expect(P.flush()).toBeNull();
    expect(P.pending().untrusted).toBe(0);
  });
});

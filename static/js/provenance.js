// @ts-check
/* Input provenance for the authenticity screen (issue 39): where the page's input came from.
 *
 * Listens on the document in the capture phase (before any plugin can stop an event) and counts,
 * since the last flush: keydown, pointerdown and click events by their `isTrusted` flag (false for
 * events a page script dispatched or `element.click()` made), trusted pointer moves, clicks,
 * clicks with no trusted pointer move since the previous click (a press and its click are one
 * gesture, so a move before the pointerdown counts; keyboard-activated buttons and taps give these
 * too: a supporting signal only), pastes, and whether `navigator.webdriver` is set.
 *
 * `flush()` sends the counts as one "input" event, value
 * {trusted, untrusted, pointer_moves, clicks, clicks_without_move, pastes, webdriver}: deltas since
 * the previous flush; nothing when every count is zero, except the first flush (webdriver is
 * recorded once at least). The session flushes right before it queues a trial; this module flushes
 * when the page is hidden.
 */

/**
 * @typedef {object} InputCounts
 * @property {number} trusted keydown, pointerdown and click events with isTrusted true
 * @property {number} untrusted the same with isTrusted false
 * @property {number} pointer_moves trusted pointermove events
 * @property {number} clicks click events, trusted or not
 * @property {number} clicks_without_move clicks with no trusted pointer move since the previous click
 * @property {number} pastes paste events
 * @property {boolean} webdriver navigator.webdriver === true
 */

var HumanlikeProvenance = (function () {
  "use strict";

  var LISTENED = ["keydown", "pointerdown", "click", "pointermove", "paste"];

  /** @type {{event: (type: string, value?: any) => any} | null} where flushes go (the trial queue) */
  var sink = null;
  var counts = zero();
  var moved = false; // a trusted pointer move since the previous click
  var flushed = false;

  /** @returns {InputCounts} */
  function zero() {
    return { trusted: 0, untrusted: 0, pointer_moves: 0, clicks: 0, clicks_without_move: 0,
             pastes: 0, webdriver: webdriver() };
  }

  /** @returns {boolean} whether the browser says it is driven by automation */
  function webdriver() { return navigator.webdriver === true; }

  /** @param {Event} event */
  function count(event) {
    var trusted = event.isTrusted === true;
    switch (event.type) {
      case "pointermove":
        if (trusted) { counts.pointer_moves += 1; moved = true; }
        return;
      case "paste":
        counts.pastes += 1;
        return;
      case "click":
        counts.clicks += 1;
        if (!moved) counts.clicks_without_move += 1;
        moved = false;
        break;
    }
    if (trusted) counts.trusted += 1;
    else counts.untrusted += 1;
  }

  function onVisibility() {
    if (document.visibilityState === "hidden") flush();
  }

  /**
   * Start counting from zero (the next flush is a first one); flushes go to `queue.event`.
   * @param {{event: (type: string, value?: any) => any}} queue
   */
  function watch(queue) {
    unwatch();
    sink = queue;
    counts = zero();
    moved = false;
    flushed = false;
    LISTENED.forEach(function (type) { document.addEventListener(type, count, true); });
    document.addEventListener("visibilitychange", onVisibility);
  }

  /** Stop counting and sending (the counts so far are kept). */
  function unwatch() {
    LISTENED.forEach(function (type) { document.removeEventListener(type, count, true); });
    document.removeEventListener("visibilitychange", onVisibility);
    sink = null;
  }

  /** @returns {InputCounts} the counts since the last flush */
  function pending() {
    return Object.assign({}, counts, { webdriver: webdriver() });
  }

  /**
   * Send the counts since the last flush as one "input" event and start again from zero; nothing
   * is sent when all are zero (except on the first flush) or before `watch`.
   * @returns {InputCounts | null} what was sent
   */
  function flush() {
    if (sink === null) return null;
    var value = pending();
    var any = value.trusted || value.untrusted || value.pointer_moves || value.clicks || value.pastes;
    if (flushed && !any) return null;
    flushed = true;
    counts = zero();
    sink.event("input", value);
    return value;
  }

  return { watch: watch, unwatch: unwatch, flush: flush, pending: pending, webdriver: webdriver };
})();

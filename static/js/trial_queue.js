// @ts-check
/* humanlike trial queue: every finished trial is kept in localStorage until the server acknowledges it.
 *
 * add(payload) stores the trial under its trial_index and starts sending. A 200/201 acknowledgement
 * removes it; a network failure, a timeout or a 5xx/408/429 keeps it and retries. A permanent 4xx
 * keeps the trial stored locally (never dropped) and reports it through onError; the one exception
 * is 409 `trial_conflict` (the server already holds a different trial under this index and keeps
 * it): that trial is dropped and an `error` event names its index (and carries the local copy).
 *
 * Each trial carries the block attempt it was answered in (`setAttempt`, from the timeline). After
 * a restarted block (resume policy `restart_block`) the trials still stored from the earlier
 * attempt move aside (`humanlike:<pid>:stale`): they are sent first, the server keeps them in a
 * `stale_trial` event and answers 409 `trial_from_restarted_block`, and only then are they dropped;
 * their indices are asked again.
 *
 * One retry policy serves every call (trials, events, request()): `sendWithRetry` sends until a
 * response that is not retryable, waiting `Backoff` delays in between (0.5 s doubling to 15 s, each
 * times a jitter factor in [0.75, 1.25)). Events stop after a bounded number of attempts.
 */
var HumanlikeTrialQueue = (function () {
  "use strict";

  var FIRST_DELAY_MS = 500;
  var MAX_DELAY_MS = 15000;
  var REQUEST_TIMEOUT_MS = 10000;
  var EVENT_ATTEMPTS = 4;
  var EVENT_VALUE_CHARS = 3500; // the server refuses event values of 4000 characters or more

  /**
   * True for answers worth retrying: 5xx, 408 (timeout) and 429 (too many requests).
   * @param {number} status
   * @returns {boolean}
   */
  function isRetryable(status) {
    return status >= 500 || status === 408 || status === 429;
  }

  /**
   * Delay before retry `n` (0-based): min(500 * 2^n, 15000) ms times a jitter factor in [0.75, 1.25).
   * @param {number} n
   * @returns {number}
   */
  function backoffDelay(n) {
    return Math.min(FIRST_DELAY_MS * Math.pow(2, n), MAX_DELAY_MS) * (0.75 + 0.5 * Math.random());
  }

  /** The waiting half of the retry policy: successive delays from backoffDelay; wake() cuts a wait short. */
  class Backoff {
    constructor() {
      /** @type {number} retries waited for since the last reset */
      this.retries = 0;
      /** @type {ReturnType<typeof setTimeout> | null} */
      this.timer = null;
      /** @type {(() => void) | null} */
      this.resume = null;
    }

    /** Start again from the first delay. */
    reset() {
      this.retries = 0;
    }

    /**
     * Resolves after the next delay (or at once on wake()).
     * @returns {Promise<void>}
     */
    wait() {
      var self = this;
      var delay = backoffDelay(this.retries);
      this.retries += 1;
      return new Promise(function (resolve) {
        self.resume = function () {
          if (self.timer !== null) clearTimeout(self.timer);
          self.timer = null;
          self.resume = null;
          resolve();
        };
        self.timer = setTimeout(self.resume, delay);
      });
    }

    /** Reset the delays and end the current wait now (e.g. the browser came back online). */
    wake() {
      this.reset();
      if (this.resume) this.resume();
    }
  }

  /**
   * @typedef {object} RetryOptions
   * @property {Backoff} [backoff] the delays to wait (a fresh Backoff if absent)
   * @property {number} [maxAttempts] give up after this many attempts (no limit if absent)
   * @property {(response: Response | null) => void} [onRetry] called before each wait
   */

  /**
   * Call `send` until it resolves with a response that is not retryable (returned: a 2xx or a
   * permanent 4xx); a rejection (network failure, timeout) and a 5xx/408/429 are retried after
   * the backoff. Resolves with null once `maxAttempts` attempts have failed.
   * @param {() => Promise<Response>} send
   * @param {RetryOptions} [options]
   * @returns {Promise<Response | null>}
   */
  async function sendWithRetry(send, options) {
    var opts = options || {};
    var backoff = opts.backoff || new Backoff();
    for (var attempt = 1; ; attempt++) {
      /** @type {Response | null} */
      var response = null;
      try {
        response = await send();
      } catch (e) {
        response = null;
      }
      if (response !== null && !isRetryable(response.status)) {
        backoff.reset();
        return response;
      }
      if (opts.maxAttempts !== undefined && attempt >= opts.maxAttempts) return null;
      if (opts.onRetry) opts.onRetry(response);
      await backoff.wait();
    }
  }

  /**
   * The JSON body of a response, or `fallback` if it has none.
   * @param {Response} response
   * @param {any} fallback
   * @returns {Promise<any>}
   */
  function jsonOr(response, fallback) {
    return response.json().catch(function () { return fallback; });
  }

  /**
   * @typedef {object} TrialPayload
   * @property {number} trial_index
   * @property {string} trial_type
   * @property {object} response
   * @property {number | null} [rt_ms]
   * @property {number | null} [first_rt_ms]
   * @property {number | null} [presented_ms]
   * @property {number | null} [frames]
   * @property {number} [client_time]
   * @property {number} [attempt] the block attempt it was answered in (absent: 0)
   */

  /** @typedef {{online: boolean, pending: number}} SyncStatus */
  /** @typedef {{error: string, detail?: any, trial_index?: number}} QueueError */

  /**
   * @typedef {object} QueueOptions
   * @property {string} api base URL of the participant API
   * @property {string} token the participant's write token
   * @property {string} pid participant id (names the localStorage key)
   * @property {(status: SyncStatus) => void} [onStatus]
   * @property {(error: QueueError) => void} [onError]
   */

  class TrialQueue {
    /** @param {QueueOptions} opts */
    constructor(opts) {
      this.api = opts.api;
      this.token = opts.token;
      this.key = "humanlike:" + opts.pid + ":pending";
      this.staleKey = "humanlike:" + opts.pid + ":stale";
      this.onStatus = opts.onStatus || function () {};
      this.onError = opts.onError || function () {};
      /** @type {Record<string, TrialPayload>} */
      this.pending = this._load(this.key);
      /** @type {TrialPayload[]} trials of an earlier attempt of a restarted block, to hand over */
      this.stale = this._load(this.staleKey, []);
      /** @type {Set<TrialPayload>} earlier-attempt trials the server refused otherwise: kept, not resent */
      this.staleRefused = new Set();
      /** @type {number} the attempt new trials are answered in */
      this.attempt = 0;
      /** @type {boolean} whether the timeline has named the attempt yet (setAttempt) */
      this.attemptSet = false;
      /** @type {Record<string, any>} trial index -> the server's refusal */
      this.rejected = {};
      this.backoff = new Backoff();
      this.sending = false;
      /** @type {Array<() => void>} */
      this.waiters = [];
      var self = this;
      window.addEventListener("online", function () { self.flush(true); });
    }

    /**
     * @param {string} key
     * @param {any} [empty] what an absent or unreadable entry reads as ({} if absent)
     * @returns {any}
     */
    _load(key, empty) {
      var fallback = empty === undefined ? {} : empty;
      try {
        return JSON.parse(window.localStorage.getItem(key) || "null") || fallback;
      } catch (e) {
        return fallback;
      }
    }

    _save() {
      try {
        window.localStorage.setItem(this.key, JSON.stringify(this.pending));
        if (this.stale.length) window.localStorage.setItem(this.staleKey, JSON.stringify(this.stale));
        else window.localStorage.removeItem(this.staleKey);
      } catch (e) {
        this.onError({ error: "local_storage_failed", detail: String(e) });
      }
    }

    /**
     * The attempt the timeline names: new trials carry it, and stored trials of another attempt
     * move aside (sent, kept by the server, not counted as answered).
     * @param {number} attempt
     */
    setAttempt(attempt) {
      this.attempt = attempt;
      this.attemptSet = true;
      var moved = false;
      for (var key of Object.keys(this.pending)) {
        if ((this.pending[key].attempt || 0) !== attempt) {
          this.stale.push(this.pending[key]);
          delete this.pending[key];
          moved = true;
        }
      }
      if (moved) this._save();
    }

    /** @returns {number[]} indices of the trials kept locally, ascending */
    indices() {
      return Object.keys(this.pending).map(Number).sort(function (a, b) { return a - b; });
    }

    /** @returns {number} trials still to be acknowledged or handed over (rejected ones excluded) */
    size() {
      var rejected = this.rejected;
      var refused = this.staleRefused;
      var stale = this.stale.filter(function (t) { return !refused.has(t); }).length;
      return this.indices().filter(function (i) { return !(i in rejected); }).length + stale;
    }

    /**
     * Drop local copies the server already holds (after a reload).
     * @param {number[]} acknowledged
     */
    forget(acknowledged) {
      var changed = false;
      for (var i = 0; i < acknowledged.length; i++) {
        if (acknowledged[i] in this.pending) { delete this.pending[acknowledged[i]]; changed = true; }
      }
      if (changed) this._save();
    }

    /** @param {TrialPayload} payload */
    add(payload) {
      payload.attempt = this.attempt;
      delete this.rejected[payload.trial_index]; // an answer given again is sent again
      this.pending[payload.trial_index] = payload;
      this._save();
      this.flush(true);
    }

    /**
     * One HTTP call with the bearer token, aborted after 10 s.
     * @param {string} method
     * @param {string} path
     * @param {any} [body]
     * @returns {Promise<Response>}
     */
    _send(method, path, body) {
      var controller = new AbortController();
      var timer = setTimeout(function () { controller.abort(); }, REQUEST_TIMEOUT_MS);
      /** @type {Record<string, string>} */
      var headers = { "Authorization": "Bearer " + this.token };
      if (body !== undefined) headers["Content-Type"] = "application/json";
      return fetch(this.api + path, {
        method: method,
        headers: headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: controller.signal,
        credentials: "omit",
      }).finally(function () { clearTimeout(timer); });
    }

    _offline() {
      this.onStatus({ online: false, pending: this.size() });
    }

    /**
     * Send the waiting trials in index order; `now` cuts a backoff wait short and restarts the
     * delays from 0.5 s (a new trial, the browser back online).
     * @param {boolean} [now]
     */
    flush(now) {
      if (now) this.backoff.wake();
      if (this.sending) return;
      this._drain();
    }

    /** The one sending loop: each trial through sendWithRetry with the queue's shared backoff. */
    async _drain() {
      this.sending = true;
      var self = this;
      try {
        await this._handOverStale();
        for (;;) {
          var rejected = this.rejected;
          var todo = this.indices().filter(function (i) { return !(i in rejected); });
          if (todo.length === 0) break;
          var index = todo[0];
          var payload = this.pending[index];
          var response = await sendWithRetry(function () { return self._send("POST", "/trials", payload); },
            { backoff: this.backoff, onRetry: function () { self._offline(); } });
          if (response === null) continue; // not reached: trials have no attempt limit
          if (response.ok) {
            if (this.pending[index] === payload) delete this.pending[index];
            this._save();
            this.onStatus({ online: true, pending: this.size() });
          } else {
            var body = await jsonOr(response, {});
            if (response.status === 409 && body.error === "trial_conflict") {
              this._dropConflict(index, payload, body);
              continue;
            }
            if (response.status === 409 && body.error === "trial_from_restarted_block") {
              // the server kept it; a trial of this page's own attempt means another window
              // restarted the block since (this page is out of date)
              if (this.pending[index] === payload) delete this.pending[index];
              this._save();
              if (this.attemptSet && (payload.attempt || 0) === this.attempt) {
                this.onError({ error: body.error, detail: body.detail, trial_index: index });
              }
              continue;
            }
            this.rejected[index] = body;
            this.onError({ error: body.error || "rejected", detail: body.detail, trial_index: index });
          }
        }
      } finally {
        this.sending = false;
      }
      this._settled();
    }

    /**
     * Send the trials of an earlier attempt: a 409 `trial_from_restarted_block` (kept aside by the
     * server) or a 2xx (an identical replay of a kept trial) drops one; any other permanent
     * refusal keeps it stored locally, not sent again from this page.
     */
    async _handOverStale() {
      var self = this;
      var refused = this.staleRefused;
      for (;;) {
        var next = this.stale.find(function (t) { return !refused.has(t); });
        if (next === undefined) return;
        var payload = next;
        var response = await sendWithRetry(function () { return self._send("POST", "/trials", payload); },
          { backoff: this.backoff, onRetry: function () { self._offline(); } });
        if (response === null) continue; // not reached: trials have no attempt limit
        var body = response.ok ? {} : await jsonOr(response, {});
        if (response.ok || (response.status === 409 && body.error === "trial_from_restarted_block")) {
          this.stale = this.stale.filter(function (t) { return t !== payload; });
          this._save();
        } else {
          refused.add(payload);
          this.onError({ error: body.error || "rejected", detail: body.detail, trial_index: payload.trial_index });
        }
        this.onStatus({ online: true, pending: this.size() });
      }
    }

    /**
     * The server keeps another trial under this index: drop ours (retrying cannot help) and log an
     * `error` event naming the index, with our copy when it fits in an event.
     * @param {number} index
     * @param {TrialPayload} payload
     * @param {any} body the server's 409 answer
     */
    _dropConflict(index, payload, body) {
      if (this.pending[index] === payload) delete this.pending[index];
      this._save();
      /** @type {Record<string, any>} */
      var value = { error: "trial_conflict", trial_index: index, detail: body.detail, dropped: payload };
      var size = JSON.stringify(value).replace(/[^\x00-\x7f]/g, "\\uXXXX").length; // as the server counts
      if (size > EVENT_VALUE_CHARS) delete value.dropped;
      this.event("error", value);
      this.onError({ error: "trial_conflict", detail: body.detail, trial_index: index });
      this.onStatus({ online: true, pending: this.size() });
    }

    _settled() {
      if (this.size() === 0) {
        var waiters = this.waiters;
        this.waiters = [];
        waiters.forEach(function (resolve) { resolve(); });
      }
    }

    /**
     * Resolves once every trial is acknowledged (rejected trials stay local and do not block).
     * @returns {Promise<void>}
     */
    drained() {
      var self = this;
      return new Promise(function (resolve) {
        self.waiters.push(resolve);
        self.flush(true);
        self._settled();
      });
    }

    /**
     * Record a browser event (best effort: at most 4 attempts, same retry policy).
     * @param {string} type
     * @param {any} [value]
     * @returns {Promise<boolean>} whether the server took it
     */
    event(type, value) {
      var body = { type: type, value: value === undefined ? null : value, client_time: Date.now() };
      var self = this;
      return sendWithRetry(function () { return self._send("POST", "/events", body); },
        { maxAttempts: EVENT_ATTEMPTS }).then(function (response) {
        return response !== null && response.ok;
      });
    }

    /**
     * A request retried until a 2xx (resolves with its JSON) or a permanent 4xx (rejects with its
     * JSON body); a GET when `body` is undefined, else a POST.
     * @param {string} path
     * @param {any} [body]
     * @returns {Promise<any>}
     */
    request(path, body) {
      var self = this;
      var method = body === undefined ? "GET" : "POST";
      return sendWithRetry(function () { return self._send(method, path, body); },
        { onRetry: function () { self._offline(); } }).then(function (response) {
        if (response === null) throw { error: "unreachable" }; // not reached: no attempt limit
        if (response.ok) return response.json();
        return jsonOr(response, { error: "http_" + response.status }).then(function (err) { throw err; });
      });
    }
  }

  return {
    TrialQueue: TrialQueue,
    Backoff: Backoff,
    sendWithRetry: sendWithRetry,
    backoffDelay: backoffDelay,
    isRetryable: isRetryable,
  };
})();

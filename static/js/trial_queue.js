/* humanlike trial queue: every finished trial is kept in localStorage until the server acknowledges it.
 *
 * add(payload) stores the trial under its trial_index and starts sending. A 200/201 acknowledgement
 * removes it; a network failure, a timeout or a 5xx/408/429 keeps it and retries with exponential
 * backoff (0.5 s doubling to 15 s, with jitter). A permanent 4xx keeps the trial stored locally
 * (never dropped) and reports it through onError. Events go the same way, best effort.
 */
var HumanlikeTrialQueue = (function () {
  "use strict";

  function TrialQueue(opts) {
    this.api = opts.api;
    this.token = opts.token;
    this.key = "humanlike:" + opts.pid + ":pending";
    this.onStatus = opts.onStatus || function () {};
    this.onError = opts.onError || function () {};
    this.pending = this._load();
    this.rejected = {};
    this.delay = 500;
    this.sending = false;
    this.timer = null;
    this.waiters = [];
    var self = this;
    window.addEventListener("online", function () { self.flush(true); });
  }

  TrialQueue.prototype._load = function () {
    try {
      return JSON.parse(window.localStorage.getItem(this.key) || "{}") || {};
    } catch (e) {
      return {};
    }
  };

  TrialQueue.prototype._save = function () {
    try {
      window.localStorage.setItem(this.key, JSON.stringify(this.pending));
    } catch (e) {
      this.onError({ error: "local_storage_failed", detail: String(e) });
    }
  };

  TrialQueue.prototype.indices = function () {
    return Object.keys(this.pending).map(Number).sort(function (a, b) { return a - b; });
  };

  TrialQueue.prototype.size = function () {
    return this.indices().filter(function (i) { return !(i in this.rejected); }, this).length;
  };

  /* Drop local copies the server already holds (after a reload). */
  TrialQueue.prototype.forget = function (acknowledged) {
    var changed = false;
    for (var i = 0; i < acknowledged.length; i++) {
      if (acknowledged[i] in this.pending) { delete this.pending[acknowledged[i]]; changed = true; }
    }
    if (changed) this._save();
  };

  TrialQueue.prototype.add = function (payload) {
    this.pending[payload.trial_index] = payload;
    this._save();
    this.flush(true);
  };

  TrialQueue.prototype._send = function (method, path, body) {
    var controller = window.AbortController ? new AbortController() : null;
    var timer = controller ? setTimeout(function () { controller.abort(); }, 10000) : null;
    var headers = { "Authorization": "Bearer " + this.token };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    return fetch(this.api + path, {
      method: method,
      headers: headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: controller ? controller.signal : undefined,
      credentials: "omit",
    }).finally(function () { if (timer) clearTimeout(timer); });
  };

  TrialQueue.prototype._post = function (path, body) { return this._send("POST", path, body); };

  TrialQueue.prototype.flush = function (now) {
    var self = this;
    if (now) { this.delay = 500; if (this.timer) { clearTimeout(this.timer); this.timer = null; } }
    if (this.sending) return;
    var todo = this.indices().filter(function (i) { return !(i in self.rejected); });
    if (todo.length === 0) { this._settled(); return; }
    this.sending = true;
    var index = todo[0];
    this._post("/trials", this.pending[index]).then(function (resp) {
      if (resp.status === 200 || resp.status === 201) {
        delete self.pending[index];
        self._save();
        self.delay = 500;
        self.onStatus({ online: true, pending: self.size() });
        return "next";
      }
      if (resp.status >= 500 || resp.status === 408 || resp.status === 429) return "retry";
      return resp.json().catch(function () { return {}; }).then(function (body) {
        self.rejected[index] = body;
        self.onError({ error: body.error || "rejected", detail: body.detail, trial_index: index });
        return "next";
      });
    }, function () { return "retry"; }).then(function (outcome) {
      self.sending = false;
      if (outcome === "next") { self.flush(false); return; }
      self.onStatus({ online: false, pending: self.size() });
      var wait = self.delay * (0.75 + 0.5 * Math.random());
      self.delay = Math.min(self.delay * 2, 15000);
      self.timer = setTimeout(function () { self.timer = null; self.flush(false); }, wait);
    });
  };

  TrialQueue.prototype._settled = function () {
    if (this.size() === 0) {
      var waiters = this.waiters;
      this.waiters = [];
      waiters.forEach(function (resolve) { resolve(); });
    }
  };

  /* Resolves once every trial is acknowledged (rejected trials stay local and do not block). */
  TrialQueue.prototype.drained = function () {
    var self = this;
    return new Promise(function (resolve) {
      self.waiters.push(resolve);
      self.flush(true);
      self._settled();
    });
  };

  TrialQueue.prototype.event = function (type, value) {
    var body = { type: type, value: value === undefined ? null : value, client_time: Date.now() };
    var self = this;
    var attempt = function (n) {
      self._post("/events", body).catch(function () {
        if (n < 3) setTimeout(function () { attempt(n + 1); }, 2000 * (n + 1));
      });
    };
    attempt(0);
  };

  /* A request retried with backoff until a 2xx (resolves with its JSON) or a permanent 4xx
   * (rejects with its JSON body); a GET when ``body`` is undefined, else a POST. */
  TrialQueue.prototype.request = function (path, body) {
    var self = this;
    var delay = 500;
    return new Promise(function (resolve, reject) {
      var attempt = function () {
        self._send(body === undefined ? "GET" : "POST", path, body).then(function (resp) {
          if (resp.ok) return resp.json().then(resolve);
          if (resp.status >= 500 || resp.status === 408 || resp.status === 429) throw new Error("retry");
          return resp.json().then(reject, function () { reject({ error: "http_" + resp.status }); });
        }).catch(function () {
          self.onStatus({ online: false, pending: self.size() });
          setTimeout(attempt, delay);
          delay = Math.min(delay * 2, 15000);
        });
      };
      attempt();
    });
  };

  return { TrialQueue: TrialQueue };
})();

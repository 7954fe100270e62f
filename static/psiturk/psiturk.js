/*
 * humanlike's psiturk.js: the psiTurk 3 task API (PsiTurk(uniqueId, adServerLoc, mode)) for psiTurk
 * projects served by `humanlike serve --psiturk`. Written for humanlike; it needs jQuery, Underscore
 * and Backbone, which psiTurk projects ship in their static/lib.
 *
 * Beyond psiTurk's behaviour: every change is also kept in localStorage, so a reload or a failed save
 * loses nothing (a newer local copy is sent again on the next load); a failed save is retried when the
 * browser comes back online; leaving the page saves with navigator.sendBeacon, which outlives the page.
 */
/* global Backbone, _, $ */
(function () {
  "use strict";

  Backbone.Notifications = {};
  _.extend(Backbone.Notifications, Backbone.Events);

  var storageKey = function (id) { return "humanlike.psiturk:" + id; };

  var readBackup = function (id) {
    try {
      var text = window.localStorage.getItem(storageKey(id));
      return text ? JSON.parse(text) : null;
    } catch (e) {
      return null;
    }
  };

  var writeBackup = function (model) {
    try {
      window.localStorage.setItem(storageKey(model.id), JSON.stringify(model.toJSON()));
    } catch (e) { /* storage full or blocked: the server copy is what there is */ }
  };

  window.PsiTurk = function (uniqueId, adServerLoc, mode) {
    mode = mode || "live";
    // psiTurk's own file is sloppy-mode code: `PsiTurk(...)` without `new` runs with `this` the
    // window, so the API lands on the window and the call returns it (the older example's
    // `var psiturk = PsiTurk(uniqueId, adServerLoc);`). This file is strict, so it does that itself.
    var self = (this === undefined || this === null) ? window : this;
    var instructionController;

    var TaskData = Backbone.Model.extend({
      urlRoot: "/sync",
      adServerLoc: adServerLoc,
      mode: mode,

      defaults: function () {
        return {
          condition: 0, counterbalance: 0, assignmentId: 0, workerId: 0, hitId: 0,
          currenttrial: 0, bonus: 0, data: [], questiondata: {}, eventdata: [],
          useragent: "", mode: ""
        };
      },

      initialize: function () {
        this.set({ useragent: navigator.userAgent, mode: this.mode });
        this.addEvent("initialized", null);
        this.addEvent("window_resize", [window.innerWidth, window.innerHeight]);
        this.listenTo(Backbone.Notifications, "_psiturk_lostfocus", function () { this.addEvent("focus", "off"); });
        this.listenTo(Backbone.Notifications, "_psiturk_gainedfocus", function () { this.addEvent("focus", "on"); });
        this.listenTo(Backbone.Notifications, "_psiturk_windowresize", function (size) { this.addEvent("window_resize", size); });
      },

      addTrialData: function (trialdata) {
        var record = { uniqueid: this.id, current_trial: this.get("currenttrial"),
          dateTime: new Date().getTime(), trialdata: trialdata };
        var data = this.get("data");
        data.push(record);
        this.set("data", data);
        this.set({ currenttrial: this.get("currenttrial") + 1 });
        writeBackup(this);
      },

      addUnstructuredData: function (field, response) {
        var qd = this.get("questiondata");
        qd[field] = response;
        this.set("questiondata", qd);
        writeBackup(this);
      },

      getTrialData: function () { return this.get("data"); },
      getEventData: function () { return this.get("eventdata"); },
      getQuestionData: function () { return this.get("questiondata"); },

      addEvent: function (eventtype, value) {
        var ed = this.get("eventdata");
        var timestamp = new Date().getTime();
        var interval = (eventtype === "initialized" || ed.length === 0) ? 0 : timestamp - ed[ed.length - 1].timestamp;
        ed.push({ eventtype: eventtype, value: value, timestamp: timestamp, interval: interval });
        this.set("eventdata", ed);
      }
    });

    // the default instruction player: pages shown in turn, .continue and .previous buttons
    var Instructions = function (parent, pages, callback) {
      var player = this;
      var current = 0;
      var shownAt;

      var loadPage = function () {
        parent.showPage(pages[current]);
        if (current !== 0) {
          $(".instructionsnav").on("click.psiturk.instructionsnav.prev", ".previous", function () { previous(); });
        }
        $(".instructionsnav").on("click.psiturk.instructionsnav.next", ".continue", function () { next(); });
        shownAt = new Date().getTime();
      };

      var previous = function () {
        var rt = new Date().getTime() - shownAt;
        var viewed = current;
        if (current - 1 < 0) { return; }
        current -= 1;
        parent.recordTrialData({ phase: "INSTRUCTIONS", template: pages[viewed], indexOf: viewed, action: "PrevPage", viewTime: rt });
        loadPage();
      };

      var next = function () {
        var rt = new Date().getTime() - shownAt;
        var viewed = current;
        current += 1;
        if (current === pages.length) {
          parent.recordTrialData({ phase: "INSTRUCTIONS", template: pages[viewed], indexOf: viewed, action: "FinishInstructions", viewTime: rt });
          $(".continue").unbind("click.psiturk.instructionsnav.next");
          $(".previous").unbind("click.psiturk.instructionsnav.prev");
          parent.finishInstructions();
          callback();
        } else {
          parent.recordTrialData({ phase: "INSTRUCTIONS", template: pages[viewed], indexOf: viewed, action: "NextPage", viewTime: rt });
          loadPage();
        }
      };

      player.getIndicator = function () {
        return { currently_viewing: { indexOf: current, template: pages[current] },
          instruction_deck: { total_pages: pages.length, templates: pages } };
      };
      player.loadFirstPage = function () { loadPage(); };
      parent.recordTrialData({ phase: "INSTRUCTIONS", templates: pages, action: "Begin" });
      return player;
    };

    self.pages = {};

    self.preloadImages = function (names) {
      $(names).each(function () { var image = new Image(); image.src = this; });
    };

    self.preloadPages = function (names) {
      return Promise.all($.map(names, function (name) {
        return $.ajax({ url: name, dataType: "html" }).then(function (html) { self.pages[name] = html; });
      }));
    };

    self.getPage = function (name) {
      if (!(name in self.pages)) {
        throw new Error("Attemping to load page before preloading: " + name);
      }
      return self.pages[name];
    };

    self.recordTrialData = function (trialdata) { taskdata.addTrialData(trialdata); };
    self.recordUnstructuredData = function (field, value) { taskdata.addUnstructuredData(field, value); };
    self.getTrialData = function () { return taskdata.getTrialData(); };
    self.getEventData = function () { return taskdata.getEventData(); };
    self.getQuestionData = function () { return taskdata.getQuestionData(); };

    self.computeBonus = function (url, callback) {
      $.ajax(url, { type: "GET", data: { uniqueId: self.taskdata.id }, success: callback });
    };

    var saveFailed = false;
    self.saveData = function (callbacks) {
      callbacks = callbacks || {};
      writeBackup(taskdata);
      taskdata.save(undefined, {
        success: function () {
          saveFailed = false;
          if (callbacks.success) { callbacks.success.apply(this, arguments); }
        },
        error: function () {
          saveFailed = true;
          if (callbacks.error) { callbacks.error.apply(this, arguments); }
        }
      });
    };

    // a save that failed offline is sent again as soon as the browser is back online
    $(window).on("online", function () { if (saveFailed) { self.saveData(); } });

    var beacon = function (url, body) {
      if (navigator.sendBeacon) {
        try { return navigator.sendBeacon(url, body); } catch (e) { return false; }
      }
      return false;
    };

    self.startTask = function () {
      self.saveData();
      $.ajax("inexp", { type: "POST", data: { uniqueId: self.taskdata.id } });
      if (self.taskdata.mode !== "debug") {
        $(window).on("beforeunload", function () {
          writeBackup(taskdata);
          var form = new FormData();
          form.append("uniqueId", self.taskdata.id);
          if (!beacon(taskdata.url(), new Blob([JSON.stringify(taskdata.toJSON())], { type: "text/plain" }))) {
            self.saveData();
          }
          if (!beacon("quitter", form)) {
            $.ajax("quitter", { type: "POST", data: { uniqueId: self.taskdata.id } });
          }
          return "By leaving or reloading this page, you opt out of the experiment.  Are you sure you want to leave the experiment?";
        });
      }
    };

    self.finishInstructions = function (message) {
      Backbone.Notifications.trigger("_psiturk_finishedinstructions", message);
    };

    self.teardownTask = function (message) {
      Backbone.Notifications.trigger("_psiturk_finishedtask", message);
    };

    self.completeHIT = function () {
      self.teardownTask();
      window.location = self.taskdata.adServerLoc + "?uniqueId=" + encodeURIComponent(self.taskdata.id) +
        "&mode=" + encodeURIComponent(self.taskdata.mode);
    };

    self.doInstructions = function (pages, callback) {
      instructionController = new Instructions(self, pages, callback);
      instructionController.loadFirstPage();
    };

    self.getInstructionIndicator = function () {
      if (instructionController !== undefined) { return instructionController.getIndicator(); }
    };

    var replaceBody = function (html) { $("body").html(html); };
    self.showPage = _.compose(replaceBody, self.getPage);

    var taskdata = new TaskData({ id: uniqueId });
    taskdata.fetch({ async: false });
    // a local copy holding more than the server (a save lost in a reload or offline) wins
    var backup = readBackup(uniqueId);
    if (backup && backup.data && backup.data.length > taskdata.get("data").length) {
      taskdata.set(_.omit(backup, "id"));
      self.saveData();
    }
    self.taskdata = taskdata;

    Backbone.Notifications.on("_psiturk_finishedinstructions", self.startTask);
    Backbone.Notifications.on("_psiturk_finishedtask", function () { $(window).off("beforeunload"); });

    $(window).blur(function () { Backbone.Notifications.trigger("_psiturk_lostfocus"); });
    $(window).focus(function () { Backbone.Notifications.trigger("_psiturk_gainedfocus"); });
    var resizeTimer = false;
    $(window).resize(function () {
      if (resizeTimer !== false) { clearTimeout(resizeTimer); }
      resizeTimer = setTimeout(function () {
        Backbone.Notifications.trigger("_psiturk_windowresize", [window.innerWidth, window.innerHeight]);
      }, 200);
    });

    return self;
  };
})();

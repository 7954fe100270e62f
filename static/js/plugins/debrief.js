// @ts-check
/* The trial type "debrief": the spec's last questions on one form, through jsPsych's own
 * survey-html-form plugin (static/vendor/plugins/plugin-survey-html-form.js). A question with
 * options is a group of radio buttons (the first required), one without a text box. Registered
 * with HumanlikeTrialTypes (static/js/trial_types.js); escapes text with HumanlikeScreens. Above
 * the questions, the page header's "withdraw and delete my data" link again (server/web/withdraw.py). */
HumanlikeTrialTypes.register("debrief", function debriefTrial(entry, ctx) {
  "use strict";
  var escapeHtml = HumanlikeScreens.escapeHtml;
  var questions = ctx.timeline.debrief;
  /** @returns {string} the page header's withdrawal link again, in plain words (none: empty) */
  function withdrawNote() {
    var link = document.getElementById("withdraw-link");
    var href = link ? link.getAttribute("href") : null;
    return href ? "<p class='withdraw-note'>" + _("Rather not have your answers used?") + " " +
      "<a id='debrief-withdraw' href='" + escapeHtml(href) + "'>" + _("Withdraw and delete my data") + "</a>.</p>" : "";
  }
  var html = questions.map(function (q) {
    if (q.options && q.options.length) {
      var choices = q.options.map(function (option, i) {
        var id = "debrief-" + q.name + (i === 0 ? "" : "-" + i);
        return "<label class='debrief-choice' for='" + id + "'><input type='radio' id='" + id +
          "' name='" + q.name + "' value='" + escapeHtml(option).replace(/'/g, "&#39;") + "'" +
          (i === 0 ? " required" : "") + "> " + escapeHtml(option) + "</label>";
      }).join("");
      return "<fieldset class='debrief-options'><legend>" + escapeHtml(q.text) + "</legend>" +
        choices + "</fieldset>";
    }
    return "<p><label for='debrief-" + q.name + "'>" + escapeHtml(q.text) + "</label><br>" +
      "<textarea id='debrief-" + q.name + "' name='" + q.name + "' rows='3' cols='60' maxlength='2000'></textarea></p>";
  }).join("");
  return {
    type: jsPsychSurveyHtmlForm,
    preamble: "<h2>" + _("A few last questions") + "</h2>" + withdrawNote(),
    html: html,
    button_label: _("Finish"),
    autofocus: questions.length ? "debrief-" + questions[0].name : "",
    data: { humanlike_index: entry.index },
    /** @param {any} data */
    on_finish: function (data) {
      /** @type {Record<string, string>} */
      var answers = {};
      Object.keys(data.response || {}).forEach(function (k) { answers[k] = String(data.response[k]); });
      ctx.send(entry, { answers: answers }, { rt: data.rt });
    },
  };
});

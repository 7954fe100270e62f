// @ts-check
/* Consent and instructions: the consent page (a plain page with the estimated duration, the
 * answer recorded through the API), the page that ends the study when the participant declines,
 * and the instructions screen that opens the trials on a first visit.
 */
var HumanlikeConsent = (function () {
  "use strict";

  var el = HumanlikeScreens.el;

  /**
   * Show the consent page; resolves with the participant's new status.
   * @param {Timeline} tl
   * @returns {Promise<string>}
   */
  function showConsent(tl) {
    return new Promise(function (resolve) {
      var root = HumanlikeScreens.taskRoot();
      var page = el("div", { "class": "consent page" });
      page.appendChild(el("section", {}, tl.consent_html));
      if (tl.estimated_minutes) {
        page.appendChild(el("p", { id: "duration-estimate", "class": "duration-estimate" },
          _("This study takes about %(minutes)s minutes.", { minutes: tl.estimated_minutes })));
      }
      var agree = /** @type {HTMLButtonElement} */ (el("button", { id: "consent-agree", type: "button" }, _("I agree")));
      var decline = /** @type {HTMLButtonElement} */ (
        el("button", { id: "consent-decline", type: "button", "class": "secondary" }, _("I do not agree")));
      var row = el("p", { "class": "consent-buttons" });
      row.appendChild(agree);
      row.appendChild(decline);
      page.appendChild(row);
      root.appendChild(page);
      agree.focus();
      /** @param {boolean} yes */
      var choose = function (yes) {
        agree.disabled = decline.disabled = true;
        HumanlikeSession.state.queue.request("/consent", { agree: yes }).then(function (res) {
          root.removeChild(page);
          declinedTarget = res.next || null;
          resolve(res.status);
        });
      };
      agree.addEventListener("click", function () { choose(true); });
      decline.addEventListener("click", function () { choose(false); });
    });
  }

  /** @type {{kind: string, url: string} | null} where the server sends a participant who declined */
  var declinedTarget = null;

  /** The study ends here: the participant did not consent. Where the spec declares this exit, the
   * server's answer names the platform's page with its no-consent code, and the page goes there. */
  function showDeclined() {
    var target = declinedTarget;
    HumanlikeScreens.taskRoot().innerHTML =
      "<div class='page' role='status'><h2>" + _("Thank you") + "</h2><p>" +
      _("You did not consent, so the study has ended.") + " " +
      (target ? _("Taking you back to the recruitment site&hellip;") + "</p></div>"
              : _("Please return the study on your recruitment platform.") + "</p></div>");
    if (target && target.kind === "redirect") window.location.assign(target.url);
  }

  /**
   * @param {Timeline} tl
   * @returns {object} a jsPsych trial: the spec's instructions, before the first trial of a first visit
   */
  function instructionsScreen(tl) {
    return HumanlikeScreens.buttonScreen("<div class='instructions'>" + tl.instructions_html + "</div>",
                                         _("Start"), "instructions");
  }

  return { showConsent: showConsent, showDeclined: showDeclined, instructionsScreen: instructionsScreen };
})();

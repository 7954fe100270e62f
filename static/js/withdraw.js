// @ts-check
/* The withdrawal page: puts the participant's write token (kept by static/js/session.js in this
 * browser's storage, or in the URL fragment) into the confirmation form, and once the data are
 * deleted removes what this browser still holds for the participant (token and unsent trials). */
(function () {
  "use strict";
  /** @param {string} pid @returns {string[]} the storage keys this browser uses for a participant */
  function keys(pid) { return ["humanlike-token:" + pid, "humanlike:" + pid + ":pending"]; }

  /** @returns {Storage[]} the storages this page may use (a sandboxed frame may refuse them) */
  function stores() {
    try { return [window.sessionStorage, window.localStorage]; } catch (e) { return []; }
  }

  document.addEventListener("DOMContentLoaded", function () {
    var form = document.getElementById("withdraw-form");
    var field = /** @type {HTMLInputElement | null} */ (document.getElementById("withdraw-token"));
    if (form && field) {
      var pid = form.getAttribute("data-pid") || "";
      var match = /(?:^#|&)token=([A-Za-z0-9_-]+)/.exec(window.location.hash || "");
      var token = match ? match[1] : "";
      stores().forEach(function (store) {
        try { token = token || store.getItem(keys(pid)[0]) || ""; } catch (e) { /* blocked */ }
      });
      field.value = token;
    }
    var done = document.getElementById("withdraw-done");
    if (done) {
      var gone = done.getAttribute("data-pid") || "";
      stores().forEach(function (store) {
        keys(gone).forEach(function (key) {
          try { store.removeItem(key); } catch (e) { /* blocked */ }
        });
      });
    }
  });
})();

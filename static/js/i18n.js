// @ts-check
/* The participant pages' strings: `_(msgid, params)` returns the translation the server put into the
 * page (`<script id="humanlike-strings">`, from the catalogue of the language the experiment's spec
 * sets: server/web/i18n.py) or the English msgid itself; `%(name)s` takes params.name (gettext's
 * Python format, as in the templates). The msgids are extracted from these scripts by Babel's
 * JavaScript extractor (server/study/languages.py), so every call names its msgid literally.
 */
var HumanlikeI18n = (function () {
  "use strict";

  /** @type {Record<string, string> | null} */
  var table = null;

  /** @returns {Record<string, string>} */
  function strings() {
    if (table === null) {
      var node = typeof document !== "undefined" ? document.getElementById("humanlike-strings") : null;
      try { table = node ? JSON.parse(node.textContent || "{}") : {}; } catch (e) { table = {}; }
    }
    return /** @type {Record<string, string>} */ (table);
  }

  /**
   * @param {string} msgid
   * @param {Record<string, string | number>} [params]
   * @returns {string}
   */
  function gettext(msgid, params) {
    var text = strings()[msgid] || msgid;
    if (!params) return text;
    return text.replace(/%\((\w+)\)s/g, function (whole, name) {
      return Object.prototype.hasOwnProperty.call(params, name) ? String(params[name]) : whole;
    });
  }

  /** @param {Record<string, string>} given  Replace the table (tests). */
  function use(given) { table = given; }

  return { gettext: gettext, use: use };
})();
var _ = HumanlikeI18n.gettext;

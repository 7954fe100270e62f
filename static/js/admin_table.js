// The experiment page's live participants table and its analysis section (no inline script: the
// admin pages run under a nonce CSP).
// - Every few seconds the rows fragment is fetched and merged into the table in place: a row that
//   is already shown keeps its element and its tick box, only its other cells are replaced when
//   they changed; new rows are added in the server's order; a row that left the view is removed
//   unless it is ticked (then it stays, greyed, so a bulk action still acts on it).
// - "Tick" selects the rows of a status, failing / passing QC, or a QC reason (the reasons on the
//   page are offered as they appear).
// - The analysis section remembers whether it was open (localStorage); its live panel is fetched
//   only while it is open.
(function () {
  "use strict";

  /** @param {HTMLTableSectionElement} body */
  function liveTable(body) {
    const counter = document.getElementById("ticked-count");
    const chooser = document.getElementById("tick-by");
    /** @returns {HTMLTableRowElement[]} */
    const rowsOf = (/** @type {ParentNode} */ node) =>
      Array.from(node.querySelectorAll("tr[data-participant]"));
    /** @returns {HTMLInputElement | null} */
    const boxOf = (/** @type {HTMLTableRowElement} */ row) =>
      row.querySelector("input[name=participant]");

    function count() {
      if (counter) {
        counter.textContent = String(body.querySelectorAll("input[name=participant]:checked").length);
      }
    }

    /** @param {HTMLTableSectionElement} fresh */
    function merge(fresh) {
      /** @type {Map<string, HTMLTableRowElement>} */
      const shown = new Map();
      for (const row of rowsOf(body)) shown.set(row.dataset.participant || "", row);
      const incoming = rowsOf(fresh);
      /** @type {HTMLTableRowElement | null} */
      let previous = null;
      for (const row of incoming) {
        const id = row.dataset.participant || "";
        let target = shown.get(id);
        if (target) {
          shown.delete(id);
          for (let i = 1; i < row.cells.length; i += 1) {
            const now = row.cells[i];
            const old = target.cells[i];
            if (!old) target.appendChild(now.cloneNode(true));
            else if (old.outerHTML !== now.outerHTML) target.replaceChild(now.cloneNode(true), old);
          }
          for (const name of ["class", "data-status", "data-qc", "data-qc-reasons"]) {
            const value = row.getAttribute(name) || "";
            if (target.getAttribute(name) !== value) target.setAttribute(name, value);
          }
          target.classList.remove("gone");
        } else {
          target = row;
        }
        /** @type {ChildNode | null} */
        const place = previous ? previous.nextSibling : body.firstChild;
        if (place !== target) body.insertBefore(target, place);
        previous = target;
      }
      for (const row of shown.values()) {
        const box = boxOf(row);
        if (box && box.checked) row.classList.add("gone");
        else row.remove();
      }
      const empty = body.querySelector("tr.empty");
      if (incoming.length && empty) empty.remove();
      if (!incoming.length && !rowsOf(body).length && !empty) {
        const placeholder = fresh.querySelector("tr.empty");
        if (placeholder) body.appendChild(placeholder);
      }
    }

    let busy = false;
    async function refresh() {
      if (busy || document.hidden) return;
      busy = true;
      try {
        const response = await fetch(body.dataset.rowsUrl || "", { credentials: "same-origin" });
        if (!response.ok) return;
        const fresh = document.createElement("tbody");
        fresh.innerHTML = await response.text();
        merge(fresh);
        if (chooser instanceof HTMLSelectElement) offerReasons(chooser);
        body.dataset.refreshes = String(Number(body.dataset.refreshes || 0) + 1);
        count();
      } catch (error) {
        // offline for a moment: the next tick tries again
      } finally {
        busy = false;
      }
    }

    /** @returns {string[]} */
    const reasonsOf = (/** @type {HTMLTableRowElement} */ row) =>
      (row.dataset.qcReasons || "").split(";").map((r) => r.trim()).filter(Boolean);

    /** @param {HTMLSelectElement} chooser */
    function offerReasons(chooser) {
      const offered = new Set(Array.from(chooser.options).map((o) => o.value));
      for (const row of rowsOf(body)) {
        for (const reason of reasonsOf(row)) {
          if (offered.has(`reason:${reason}`)) continue;
          offered.add(`reason:${reason}`);
          const option = document.createElement("option");
          option.value = `reason:${reason}`;
          option.textContent = `QC reason: ${reason}`;
          chooser.appendChild(option);
        }
      }
    }

    /** @param {string} choice */
    function tickBy(choice) {
      for (const row of rowsOf(body)) {
        const box = boxOf(row);
        if (!box) continue;
        if (choice === "none") box.checked = false;
        else if (choice === "all") box.checked = true;
        else if (choice.startsWith("status:") && row.dataset.status === choice.slice(7)) box.checked = true;
        else if (choice.startsWith("qc:") && row.dataset.qc === choice.slice(3)) box.checked = true;
        else if (choice.startsWith("reason:") && reasonsOf(row).includes(choice.slice(7))) box.checked = true;
      }
      count();
    }

    body.addEventListener("change", count);
    window.setInterval(refresh, Number(body.dataset.every || 2000));
    if (chooser instanceof HTMLSelectElement) {
      offerReasons(chooser);
      chooser.addEventListener("change", () => {
        if (chooser.value) tickBy(chooser.value);
        chooser.value = "";
      });
    }
    count();
  }

  /**
   * The live panel is fetched only while its section is open (at once when it opens, then every
   * few seconds while the tab is visible); the server answers 304 while the stored result is
   * unchanged, and an unchanged panel is not re-drawn.
   * @param {HTMLDetailsElement} details
   * @param {HTMLElement} panel
   */
  function livePanel(details, panel) {
    /** @type {string | null} */
    let tag = null;
    let busy = false;
    /** @type {number | undefined} */
    let timer;

    async function load() {
      if (busy || !details.open || document.hidden) return;
      busy = true;
      try {
        /** @type {Record<string, string>} */
        const headers = tag ? { "If-None-Match": tag } : {};
        const response = await fetch(panel.dataset.panelUrl || "", {
          credentials: "same-origin", cache: "no-store", headers,
        });
        if (response.status === 200) {
          tag = response.headers.get("ETag");
          panel.innerHTML = await response.text();
        }
        panel.dataset.loads = String(Number(panel.dataset.loads || 0) + 1);
      } catch (error) {
        // offline for a moment: the next tick tries again
      } finally {
        busy = false;
      }
    }

    function follow() {
      window.clearInterval(timer);
      timer = undefined;
      if (!details.open) return;
      load();
      timer = window.setInterval(load, Number(panel.dataset.every || 5000));
    }

    details.addEventListener("toggle", follow);
    document.addEventListener("visibilitychange", () => { if (!document.hidden) load(); });
    follow();
  }

  const rows = document.getElementById("participant-rows");
  if (rows instanceof HTMLTableSectionElement) liveTable(rows);

  const analysis = document.getElementById("analysis");
  const panel = document.getElementById("panel");
  if (analysis instanceof HTMLDetailsElement && panel instanceof HTMLElement) {
    livePanel(analysis, panel);
  }
  if (analysis instanceof HTMLDetailsElement && analysis.dataset.remember) {
    const key = analysis.dataset.remember;
    try {
      if (window.localStorage.getItem(key) === "1") analysis.open = true;
    } catch (error) {
      // storage blocked: the section starts closed
    }
    analysis.addEventListener("toggle", () => {
      try {
        window.localStorage.setItem(key, analysis.open ? "1" : "0");
      } catch (error) {
        // storage blocked: not remembered
      }
    });
  }
})();

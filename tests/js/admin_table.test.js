// The experiment page's live table (static/js/admin_table.js): rows merged in place so ticks
// survive, ticked rows that leave the view kept, "Tick" by status / QC / QC reason, and the
// analysis section remembered.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { loadScript } from "./load_script.js";

function row(id, { status = "completed", qc = "passes", reasons = "", bonus = "–" } = {}) {
  return `<tr data-participant="${id}" data-status="${status}" data-qc="${qc}" data-qc-reasons="${reasons}" class="">
    <td><input type="checkbox" name="participant" value="${id}"></td>
    <td><code>${id}</code></td><td data-col="bonus">${bonus}</td></tr>`;
}

let served = "";

function page(rows) {
  document.body.innerHTML = `
    <select id="tick-by"><option value="">…</option><option value="all">all</option>
      <option value="none">none</option><option value="status:submitted">submitted</option>
      <option value="qc:fails">failing QC</option></select>
    <span id="ticked-count">0</span>
    <details id="analysis" data-remember="test.analysis"><summary>Analysis</summary></details>
    <table><tbody id="participant-rows" data-rows-url="/rows" data-every="2000">${rows}</tbody></table>`;
}

async function tick() {
  await vi.advanceTimersByTimeAsync(2000);
  await vi.runAllTicks();
}

const body = () => document.getElementById("participant-rows");
const ticked = () => Array.from(body().querySelectorAll("input:checked")).map((b) => b.value);
const choose = (value) => {
  const chooser = document.getElementById("tick-by");
  chooser.value = value;
  chooser.dispatchEvent(new Event("change"));
};

describe("the live participants table", () => {
  beforeEach(() => {
    vi.useFakeTimers();
    globalThis.fetch = vi.fn(async () => ({ ok: true, text: async () => served }));
    window.localStorage.clear();
  });
  afterEach(() => vi.useRealTimers());

  it("keeps ticks and rows through refreshes and updates the numbers in place", async () => {
    page(row("a") + row("b") + row("c"));
    loadScript("admin_table.js");
    const first = body().querySelector('tr[data-participant="a"]');
    first.querySelector("input").checked = true;
    body().querySelector('tr[data-participant="c"] input').checked = true;
    served = row("a", { bonus: "2.00" }) + row("b", { status: "submitted" }) + row("d");
    await tick();
    await tick();
    await tick();
    expect(body().dataset.refreshes).toBe("3");
    expect(body().querySelector('tr[data-participant="a"]')).toBe(first); // the same element
    expect(first.querySelector('td[data-col="bonus"]').textContent).toBe("2.00");
    expect(ticked()).toEqual(["a", "c"]); // c left the view but is ticked: kept, greyed
    expect(body().querySelector('tr[data-participant="c"]').classList.contains("gone")).toBe(true);
    expect(body().querySelector('tr[data-participant="d"]')).not.toBeNull();
    expect(Array.from(body().querySelectorAll("tr")).map((r) => r.dataset.participant))
      .toEqual(["a", "b", "d", "c"]);
    expect(body().querySelector('tr[data-participant="b"]').dataset.status).toBe("submitted");
    expect(document.getElementById("ticked-count").textContent).toBe("2");
  });

  it("ticks by status, QC and a QC reason offered from the rows", () => {
    page(row("a", { status: "submitted" }) + row("b", { qc: "fails", reasons: "catch accuracy 40%;too fast" })
      + row("c", { qc: "fails", reasons: "too fast" }));
    loadScript("admin_table.js");
    choose("status:submitted");
    expect(ticked()).toEqual(["a"]);
    choose("none");
    const reasons = Array.from(document.getElementById("tick-by").options).map((o) => o.value);
    expect(reasons).toContain("reason:too fast");
    expect(reasons).toContain("reason:catch accuracy 40%");
    choose("reason:catch accuracy 40%");
    expect(ticked()).toEqual(["b"]);
    choose("reason:too fast");
    expect(ticked()).toEqual(["b", "c"]);
    expect(document.getElementById("tick-by").value).toBe("");
  });

  it("remembers whether the analysis section was opened", () => {
    page(row("a"));
    loadScript("admin_table.js");
    const analysis = document.getElementById("analysis");
    expect(analysis.open).toBe(false);
    analysis.open = true;
    analysis.dispatchEvent(new Event("toggle"));
    page(row("a"));
    loadScript("admin_table.js");
    expect(document.getElementById("analysis").open).toBe(true);
  });
});

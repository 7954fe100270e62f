// Loads a browser script of static/js/ the way a <script> tag does: its top-level `var`s become globals.
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** The text of `static/js/<rel>`. */
export function readSource(rel) {
  return readFileSync(resolve(REPO, "static", "js", rel), "utf8");
}

/** Evaluate `static/js/<rel>` in the global scope (indirect eval, sloppy mode like a classic script). */
export function loadScript(rel) {
  (0, eval)(readSource(rel) + "\n//# sourceURL=static/js/" + rel);
}

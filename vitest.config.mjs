// Unit tests of the browser scripts in static/js/ (tests/js/), in a happy-dom window.
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    environment: "happy-dom",
    include: ["tests/js/**/*.test.js"],
  },
});

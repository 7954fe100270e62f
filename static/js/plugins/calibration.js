// @ts-check
/**
 * jsPsych 8 plugin "calibration": the virtual chinrest (Li, Joo, Yeatman & Reinecke 2020, Sci Rep
 * 10:904), with retries and plausibility limits.
 *
 * 1. Card: the participant holds a bank card (ID-1, 85.6 mm wide) to the screen and resizes the
 *    card on screen until it matches (slider, drag of the corner, or the arrow keys).
 *    px_per_mm = card width (CSS px) / 85.6. Outside HumanlikeDisplay.PX_PER_MM_LIMITS: asked again.
 * 2. Blind spot: right eye covered, left eye on the black square; a red ball moves left from the
 *    square; Space when it disappears. Each of `reps` sweeps records s, the square-to-ball distance
 *    (px); d = (mean s / px_per_mm) / tan(13.5 deg). Outside DISTANCE_MM_LIMITS: asked again.
 * Either phase refused MAX_ATTEMPTS times ends the trial with `failed` = "card" | "blind_spot".
 * px_per_deg = px_per_mm * 2 d tan(0.5 deg).
 *
 * jsPsych's own @jspsych/plugin-virtual-chinrest was not used: it has no plausibility limits or
 * card retries, does not record the blind-spot positions it averages, types px2deg as an integer
 * and lays its screens in a fixed 900 px column (docs/display-and-timing.md).
 *
 * The ball advances `speed_px` per animation frame (requestAnimationFrame), so its position
 * at a key press is a whole number of frames from its start.
 */
/**
 * @typedef {object} CalibrationTrial
 * @property {number} card_init_px
 * @property {number} reps
 * @property {number} speed_px
 */

var jsPsychCalibration = (function (jspsych) {
  "use strict";

  const info = {
    name: "calibration",
    version: "1.0.0",
    parameters: {
      /** Initial width of the card on screen, CSS px. */
      card_init_px: { type: jspsych.ParameterType.INT, default: 300 },
      /** Blind-spot sweeps averaged per attempt. */
      reps: { type: jspsych.ParameterType.INT, default: 5 },
      /** Ball movement per animation frame, CSS px. */
      speed_px: { type: jspsych.ParameterType.FLOAT, default: 2 },
    },
    data: {
      /** Width of the matched card, CSS px. */
      card_width_px: { type: jspsych.ParameterType.FLOAT },
      /** card_width_px / 85.6. */
      px_per_mm: { type: jspsych.ParameterType.FLOAT },
      /** Square-to-ball distance at each Space of the accepted attempt, CSS px. */
      blind_spot_px: { type: jspsych.ParameterType.FLOAT, array: true },
      /** (mean blind_spot_px / px_per_mm) / tan(13.5 deg), mm. */
      viewing_distance_mm: { type: jspsych.ParameterType.FLOAT },
      /** px_per_mm * 2 * viewing_distance_mm * tan(0.5 deg). */
      px_per_deg: { type: jspsych.ParameterType.FLOAT },
      /** Card answers given (the last one accepted unless failed). */
      card_attempts: { type: jspsych.ParameterType.INT },
      /** Blind-spot attempts made. */
      blind_spot_attempts: { type: jspsych.ParameterType.INT },
      /** null, or the phase whose answers stayed implausible: "card" or "blind_spot". */
      failed: { type: jspsych.ParameterType.STRING },
    },
  };

  class CalibrationPlugin {
    /** @param {JsPsych} jsPsych */
    constructor(jsPsych) {
      this.jsPsych = jsPsych;
    }

    /**
     * @param {HTMLElement} display_element
     * @param {CalibrationTrial} trial
     */
    trial(display_element, trial) {
      const D = HumanlikeDisplay;
      const aspect = D.CARD_WIDTH_MM / D.CARD_HEIGHT_MM;
      /** @type {any} */
      const data = { card_width_px: null, px_per_mm: null, blind_spot_px: [], viewing_distance_mm: null,
                     px_per_deg: null, card_attempts: 0, blind_spot_attempts: 0, failed: null };
      /** @type {number | null} */
      let raf = null;
      /** @type {((e: KeyboardEvent) => void) | null} */
      let keyHandler = null;

      const setKeys = (/** @type {((e: KeyboardEvent) => void) | null} */ handler) => {
        if (keyHandler) document.removeEventListener("keydown", keyHandler);
        keyHandler = handler;
        if (handler) document.addEventListener("keydown", handler);
      };
      const finish = () => {
        setKeys(null);
        if (raf !== null) window.cancelAnimationFrame(raf);
        display_element.innerHTML = "";
        this.jsPsych.finishTrial(data);
      };

      /* ---- phase 1: the card ---- */
      const cardPhase = (/** @type {string} */ notice) => {
        display_element.innerHTML =
          "<div class='hl-trial hl-calibration' data-phase='card'>" +
          "<h2>" + _("Screen size") + "</h2>" +
          "<p>" + _("Hold a bank card (or any card of that size: a library or ID card) flat against the screen " +
          "over the grey card below, and change the size of the grey card until it matches yours " +
          "exactly. Drag the slider or the card's red corner, or use the <kbd>&larr;</kbd> " +
          "<kbd>&rarr;</kbd> keys.") + "</p>" +
          "<p class='hl-calibration-notice' id='card-notice' role='alert'></p>" +
          "<div class='hl-card' id='calibration-card'><div class='hl-card-handle' id='card-handle'></div></div>" +
          "<p><input type='range' id='card-size' min='100' max='1500' step='1' aria-label='" + _("Card size") + "'></p>" +
          "<button type='button' class='jspsych-btn' id='card-done'>" + _("The card matches") + "</button></div>";
        const card = /** @type {HTMLElement} */ (display_element.querySelector("#calibration-card"));
        const slider = /** @type {HTMLInputElement} */ (display_element.querySelector("#card-size"));
        const noticeEl = /** @type {HTMLElement} */ (display_element.querySelector("#card-notice"));
        noticeEl.textContent = notice;
        const resize = (/** @type {number} */ w) => {
          const width = Math.max(100, Math.min(1500, Math.round(w)));
          card.style.width = width + "px";
          card.style.height = Math.round(width / aspect) + "px";
          slider.value = String(width);
        };
        resize(data.card_width_px || trial.card_init_px);
        slider.addEventListener("input", () => resize(Number(slider.value)));
        const handle = /** @type {HTMLElement} */ (display_element.querySelector("#card-handle"));
        handle.addEventListener("pointerdown", (down) => {
          down.preventDefault();
          const x0 = down.clientX;
          const w0 = card.getBoundingClientRect().width;
          const move = (/** @type {PointerEvent} */ e) => resize(w0 + 2 * (e.clientX - x0));
          const up = () => { document.removeEventListener("pointermove", move); document.removeEventListener("pointerup", up); };
          document.addEventListener("pointermove", move);
          document.addEventListener("pointerup", up);
        });
        setKeys((e) => {
          if (e.key === "ArrowRight" || e.key === "ArrowLeft") {
            e.preventDefault();
            resize(Number(slider.value) + (e.key === "ArrowRight" ? 1 : -1) * (e.shiftKey ? 10 : 1));
          }
        });
        /** @type {HTMLElement} */ (display_element.querySelector("#card-done")).addEventListener("click", () => {
          data.card_attempts += 1;
          const width = card.getBoundingClientRect().width;
          const ppmm = width / D.CARD_WIDTH_MM;
          data.card_width_px = width;
          if (ppmm < D.PX_PER_MM_LIMITS[0] || ppmm > D.PX_PER_MM_LIMITS[1]) {
            if (data.card_attempts >= D.MAX_ATTEMPTS) { data.failed = "card"; finish(); return; }
            cardPhase(_("That size is unlikely for a screen: please check the card covers the grey " +
                        "card exactly, edge to edge, and try again."));
            return;
          }
          data.px_per_mm = ppmm;
          blindSpotPhase("");
        });
      };

      /* ---- phase 2: the blind spot ---- */
      const blindSpotPhase = (/** @type {string} */ notice) => {
        data.blind_spot_attempts += 1;
        /** @type {number[]} */
        const positions = [];
        display_element.innerHTML =
          "<div class='hl-trial hl-calibration' data-phase='blind_spot'>" +
          "<h2>" + _("Viewing distance") + "</h2>" +
          "<ol class='hl-calibration-steps'><li>" + _("Sit as you will during the study and put your left hand on the " +
          "<kbd>Space</kbd> bar.") + "</li><li>" + _("Cover your <strong>right</strong> eye with your right hand.") + "</li>" +
          "<li>" + _("Look at the black square with your left eye, and keep looking at it.") + "</li>" +
          "<li>" + _("Press <kbd>Space</kbd> to start the red ball. It moves left; press <kbd>Space</kbd> " +
          "as soon as it <strong>disappears</strong>.") + "</li></ol>" +
          "<p class='hl-calibration-notice' id='blind-notice' role='alert'></p>" +
          "<div class='hl-blind-field' id='blind-field'><div class='hl-ball' id='blind-ball'></div>" +
          "<div class='hl-square' id='blind-square'></div></div>" +
          "<p>" + _("Measurements left:") + " <span id='blind-left'></span></p></div>";
        const field = /** @type {HTMLElement} */ (display_element.querySelector("#blind-field"));
        const ball = /** @type {HTMLElement} */ (display_element.querySelector("#blind-ball"));
        const square = /** @type {HTMLElement} */ (display_element.querySelector("#blind-square"));
        const left = /** @type {HTMLElement} */ (display_element.querySelector("#blind-left"));
        /** @type {HTMLElement} */ (display_element.querySelector("#blind-notice")).textContent = notice;
        const size = 30;
        const width = field.getBoundingClientRect().width;
        const squareX = width - size;
        square.style.left = squareX + "px";
        const startX = squareX - 0.15 * width;  // the ball starts 15% of the field left of the square
        let x = startX;
        let moving = false;
        const place = () => { ball.style.left = x + "px"; field.dataset.ballOffset = String(squareX - x); };
        const reset = () => { x = startX; moving = false; place(); field.dataset.state = "ready"; };
        left.textContent = String(trial.reps);
        reset();
        const step = () => {
          raf = null;
          if (!moving) return;
          x -= trial.speed_px;
          if (x < 0) { reset(); return; }  // no press before the edge: this sweep again
          place();
          raf = window.requestAnimationFrame(step);
        };
        setKeys((e) => {
          if (e.key !== " " || e.repeat) return;
          e.preventDefault();
          if (!moving) {
            moving = true;
            field.dataset.state = "moving";
            raf = window.requestAnimationFrame(step);
            return;
          }
          if (raf !== null) window.cancelAnimationFrame(raf);
          raf = null;
          positions.push(squareX - x);
          left.textContent = String(trial.reps - positions.length);
          if (positions.length < trial.reps) { reset(); return; }
          const mean = positions.reduce((a, b) => a + b, 0) / positions.length;
          const distance = D.viewingDistanceMm(mean, data.px_per_mm);
          data.blind_spot_px = positions;
          if (distance < D.DISTANCE_MM_LIMITS[0] || distance > D.DISTANCE_MM_LIMITS[1]) {
            if (data.blind_spot_attempts >= D.MAX_ATTEMPTS) { data.failed = "blind_spot"; finish(); return; }
            blindSpotPhase(_("Those answers put you %(cm)s cm from the screen, " +
                             "which is unlikely. Please keep looking at the square and try again.",
                             { cm: Math.round(distance / 10) }));
            return;
          }
          data.viewing_distance_mm = distance;
          data.px_per_deg = D.pxPerDegree(data.px_per_mm, distance);
          finish();
        });
      };

      cardPhase("");
    }
  }
  CalibrationPlugin.info = info;
  return CalibrationPlugin;
})(jsPsychModule);

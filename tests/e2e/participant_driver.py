"""Drives the participant task page with the keyboard only, as a participant would."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

STATE_JS = """() => {
  if (document.querySelector('#consent-agree') && !document.querySelector('#consent-agree').disabled) return 'consent';
  const r = document.querySelector('.hl-rating');
  if (r) return r.dataset.phase === 'loading' || r.dataset.phase === 'done' ? 'busy' : 'rating';
  const t = document.querySelector('.hl-triad');
  if (t) return t.dataset.phase === 'loading' || t.dataset.phase === 'done' ? 'busy' : 'triad';
  const o = document.querySelector('.hl-odd');
  if (o) return o.dataset.phase === 'loading' || o.dataset.phase === 'done' ? 'busy' : 'odd_one_out';
  const c = document.querySelector('.hl-classification');
  if (c) return c.dataset.phase === 'response' ? 'classification' : 'busy';
  if (document.querySelector('#jspsych-survey-html-form')) return 'debrief';
  if (document.querySelector('#jspsych-html-button-response-btngroup button')) return 'instructions';
  if (document.querySelector('#saving')) return 'saving';
  return 'busy';
}"""


TRIAD_LEVELS_JS = """() => ['left', 'reference', 'right'].map(side => {
  const src = document.querySelector('.hl-triad-' + side + ' img.hl-stimulus').getAttribute('src');
  return Number(src.match(/level_(\\d+)/)[1]);
})"""


def observer_prefers_left(levels: list[int], k: int, sigma: float = 0.1) -> bool:
    """A simulated MLDS observer with psi = ((level - 1) / 6) ** 2 and Gaussian decision noise:
    it picks the side whose perceived difference from the reference is smaller."""
    import numpy as np

    left, ref, right = (((np.array(levels) - 1) / 6.0) ** 2).tolist()
    noise = np.random.default_rng(1000 + k).normal(0, sigma)
    return abs(left - ref) - abs(right - ref) + noise < 0


@dataclass
class Played:
    """What the driver answered, in the order the trials were shown."""

    ratings: list[dict[str, float]] = field(default_factory=list)
    rating_stimuli: list[str] = field(default_factory=list)
    triads: list[str] = field(default_factory=list)
    classifications: list[str] = field(default_factory=list)
    odd_one_out: list[tuple[list[str], str]] = field(default_factory=list)
    """Each odd-one-out trial's image URLs (left, middle, right) and the position chosen."""
    phases: set[str] = field(default_factory=set)
    screenshot_dir: Path | None = None
    """Where to save a screenshot of the first response screen of each trial type (if set)."""


def rating_plan(k: int) -> tuple[str, int, bool]:
    """Trial k: the digit key to press, how many presses up, and whether to step one down after."""
    presses = k % 4 + 1
    return str(k % 10), presses, presses >= 3


def press_button_screen(page) -> None:
    """Press Enter on the button screen shown now and wait until that screen (not merely its id,
    which the next button screen reuses) is gone."""
    page.eval_on_selector("#jspsych-html-button-response-btngroup", "el => { el.dataset.answered = '1'; }")
    page.keyboard.press("Enter")
    page.wait_for_selector("#jspsych-html-button-response-btngroup[data-answered]", state="detached")


def play(page, played: Played, *, until: str = "done", max_trials: int | None = None,
         timeout_ms: int = 20000) -> Played:
    """Answer trials with the keyboard until the page leaves for `until` (a URL prefix) or
    `max_trials` more trials have been answered."""
    answered = 0
    while True:
        if until != "done" and page.url.startswith(until):
            return played
        if max_trials is not None and answered >= max_trials:
            return played
        page.wait_for_function(
            # a function, not an expression string: the task page's CSP forbids eval
            f"() => (() => {{ const s = ({STATE_JS})(); return s !== 'busy' && s !== 'saving'; }})()"
            f" || location.href.startsWith({until!r})",
            timeout=timeout_ms,
        )
        if page.url.startswith(until):
            return played
        state = page.evaluate(STATE_JS)
        if state == "consent":
            page.keyboard.press("Enter")
            page.wait_for_selector("#consent-agree", state="detached")
        elif state == "instructions":
            press_button_screen(page)
        elif state == "rating":
            k = len(played.ratings)
            key, presses, down = rating_plan(k)
            src = page.eval_on_selector(".hl-rating img.hl-stimulus", "img => img.getAttribute('src')")
            for _ in range(presses):
                page.keyboard.press(key)
            if down:
                page.keyboard.press(f"Shift+{key}")
            level = min(presses, 4) - (1 if down else 0)
            expected = {str(d): 0.0 for d in range(10)} | {key: level / 4}
            page.eval_on_selector(".hl-rating", "el => { el.dataset.answered = '1'; }")
            page.keyboard.press("Enter")
            page.wait_for_selector(".hl-rating[data-answered]", state="detached")
            played.ratings.append(expected)
            played.rating_stimuli.append(src)
            answered += 1
        elif state == "triad":
            levels = page.evaluate(TRIAD_LEVELS_JS)
            choice = "f" if observer_prefers_left(levels, len(played.triads)) else "j"
            page.eval_on_selector(".hl-triad", "el => { el.dataset.answered = '1'; }")
            page.keyboard.press(choice)
            page.wait_for_selector(".hl-triad[data-answered]", state="detached")
            played.triads.append("left" if choice == "f" else "right")
            answered += 1
        elif state == "classification":
            # the digit in the file name, wrong on every fifth trial; keys and clicks alternate
            k = len(played.classifications)
            src = page.eval_on_selector(".hl-classification img.hl-stimulus",
                                        "img => img.getAttribute('src')")
            digit = src.rsplit("/", 1)[-1].split("_")[0].removeprefix("digit")
            answer = str((int(digit) + 1) % 10) if k % 5 == 4 else digit
            if k == 0 and played.screenshot_dir is not None:
                played.screenshot_dir.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(played.screenshot_dir / "classification-response.png"))
            page.eval_on_selector(".hl-classification", "el => { el.dataset.answered = '1'; }")
            if k % 2:
                page.click(f".hl-category[data-label='{answer}']")
            else:
                page.keyboard.press(answer)
            page.wait_for_selector(".hl-classification[data-answered]", state="detached")
            played.classifications.append(answer)
            answered += 1
        elif state == "odd_one_out":
            # the image whose digit class the other two share (keys 1-3), else the middle one;
            # every third trial by a click
            k = len(played.odd_one_out)
            srcs = page.eval_on_selector_all(".hl-odd img.hl-stimulus",
                                             "imgs => imgs.map(i => i.getAttribute('src'))")
            classes = [src.rsplit("/", 1)[-1].split("_")[0] for src in srcs]
            lonely = [i for i, c in enumerate(classes) if classes.count(c) == 1]
            at = lonely[0] if len(lonely) == 1 else 1
            position = ("left", "middle", "right")[at]
            if k < 2 and played.screenshot_dir is not None:  # the practice trial and the first main one
                played.screenshot_dir.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(played.screenshot_dir / f"odd-one-out-response-{k}.png"))
            page.eval_on_selector(".hl-odd", "el => { el.dataset.answered = '1'; }")
            if k % 3 == 2:
                page.click(f".hl-odd-{position}")
            else:
                page.keyboard.press(str(at + 1))
            page.wait_for_selector(".hl-odd[data-answered]", state="detached")
            played.odd_one_out.append((srcs, position))
            answered += 1
        elif state == "debrief":
            page.keyboard.type("I looked at the shapes.")
            page.keyboard.press("Tab")
            page.keyboard.type("Nothing went wrong.")
            page.keyboard.press("Tab")
            page.keyboard.press("Enter")
            page.wait_for_selector("#jspsych-survey-html-form", state="detached")

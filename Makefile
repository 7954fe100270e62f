# humanlike: `make demo` sets up and serves the demo; `make test` sets up and runs the whole suite.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
HUMANLIKE := $(VENV)/bin/humanlike
VENDOR := static/vendor
# the official jsPsych plugins a page loads (templates/task.html, the plugin test harness)
JSPSYCH_PLUGINS := plugin-preload plugin-html-button-response plugin-survey-html-form
PYTEST_ARGS ?=

.PHONY: demo test js-test setup venv npm chromium demo-data lint bench clean

setup: venv npm

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip setuptools wheel
	$(PIP) install -q -e '.[test,torch]'
	touch $@

npm: $(VENDOR)/.installed

$(VENDOR)/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	rm -rf $(VENDOR) && mkdir -p $(VENDOR)/jspsych $(VENDOR)/plugins
	cp node_modules/jspsych/dist/index.browser.min.js $(VENDOR)/jspsych/jspsych.js
	cp node_modules/jspsych/css/jspsych.css $(VENDOR)/jspsych/jspsych.css
	for p in $(JSPSYCH_PLUGINS); do \
	  cp node_modules/@jspsych/$$p/dist/index.browser.min.js $(VENDOR)/plugins/$$p.js; done
	touch $@

chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium for the browser tests"; \
	  (apt-get update -qq || true) && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

demo-data: setup
	$(HUMANLIKE) demo --prepare-only

demo: setup
	$(HUMANLIKE) demo

test: setup chromium js-test
	$(VENV)/bin/ruff check humanlike analysis server stimuli deploy tests bench
	$(PY) -m pytest $(PYTEST_ARGS)

# the browser scripts: JSDoc types checked by TypeScript, unit tests in tests/js/ (vitest, happy-dom)
js-test: npm
	npx tsc -p tsconfig.json
	npx vitest run

lint: setup
	$(VENV)/bin/ruff check humanlike analysis server stimuli deploy tests bench

bench: setup
	$(PY) bench/ingest.py
	$(PY) bench/export.py --participants 500
	$(PY) bench/ec_bootstrap.py
	$(PY) bench/ratings.py
	$(PY) bench/mlds.py
	$(PY) bench/kernel_analysis.py
	$(PY) bench/controversial.py

clean:
	rm -rf $(VENV) node_modules $(VENDOR) build dist *.egg-info instance

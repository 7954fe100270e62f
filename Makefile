# humanlike: `make demo` sets up and serves the demo; `make test` sets up and runs the whole suite.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
HUMANLIKE := $(VENV)/bin/humanlike
VENDOR := static/vendor
# the official jsPsych plugins a page loads (templates/task.html, the plugin test harness)
JSPSYCH_PLUGINS := plugin-preload plugin-html-button-response plugin-survey-html-form
# pytest-xdist workers, one more than the cores (browser and server tests wait on sockets and
# timers, so an extra worker uses the idle time: 618 s against about 760 s with one per core on 2
# cores), one test file per unit (module fixtures built once), the longest files first
# (tests/conftest.py LONGEST_FIRST). `make test PYTEST_ARGS=` runs serially.
PYTEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))
PYTEST_ARGS ?= -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder
# where `make demo` serves: `make demo PORT=5055` (HOST=0.0.0.0 to reach it from another machine)
HOST ?= 127.0.0.1
PORT ?= 5000

.PHONY: demo test js-test setup venv npm chromium caddy demo-data lint bench clean psiturk-example

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
	mkdir -p $(VENDOR)/htmx && cp node_modules/htmx.org/dist/htmx.min.js $(VENDOR)/htmx/htmx.js
	mkdir -p $(VENDOR)/axe && cp node_modules/axe-core/axe.min.js $(VENDOR)/axe/axe.js
	for p in $(JSPSYCH_PLUGINS); do \
	  cp node_modules/@jspsych/$$p/dist/index.browser.min.js $(VENDOR)/plugins/$$p.js; done
	touch $@

chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium for the browser tests"; \
	  (apt-get update -qq || true) && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# the reverse proxy of deploy/Caddyfile, started on loopback by tests/deploy (HTTPS in production)
caddy:
	@command -v caddy >/dev/null 2>&1 || { \
	  echo "installing Debian's caddy for the production-serving tests"; \
	  (apt-get update -qq || true) && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq caddy >/dev/null; }

demo-data: setup
	$(HUMANLIKE) demo --prepare-only

demo: setup
	$(HUMANLIKE) demo --host $(HOST) --port $(PORT)

# pytest with bytecode caching back on (this environment sets PYTHONDONTWRITEBYTECODE=1): each
# xdist worker and each server process the tests start would otherwise compile every module again
test: setup chromium caddy js-test psiturk-example
	$(VENV)/bin/ruff check humanlike analysis server stimuli deploy tests bench
	env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest $(PYTEST_ARGS)

# psiTurk 3.3.1's wheel (its example Stroop project; tests/psiturk/), downloaded, never committed
PSITURK_WHEEL := build/psiturk/PsiTurk-3.3.1-py3-none-any.whl
psiturk-example: $(PSITURK_WHEEL)

$(PSITURK_WHEEL): | venv
	$(PIP) download -q --no-deps psiturk==3.3.1 -d build/psiturk

# the browser scripts: JSDoc types checked by TypeScript, unit tests in tests/js/ (vitest, happy-dom)
js-test: npm
	npx tsc -p tsconfig.json
	npx vitest run

lint: setup
	$(VENV)/bin/ruff check humanlike analysis server stimuli deploy tests bench

bench: setup psiturk-example
	$(PY) bench/ingest.py
	$(PY) bench/psiturk_sync.py
	$(PY) bench/export.py --participants 500
	$(PY) bench/dashboard.py --participants 300
	$(PY) bench/ec_bootstrap.py
	$(PY) bench/ratings.py
	$(PY) bench/mlds.py
	$(PY) bench/kernel_analysis.py
	$(PY) bench/controversial.py

clean:
	rm -rf $(VENV) node_modules $(VENDOR) build dist *.egg-info instance

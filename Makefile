# Attention Lab. Quick start: `make run` (the app), `make test` (the whole suite) and
# `make test-fast` (unit tests only: no browser, no AppTest, nothing marked slow).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
RUNTIME_STAMP := $(VENV)/.runtime-installed
DEV_STAMP := $(VENV)/.dev-installed
PORT ?= 8501
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false
export STREAMLIT_BROWSER_GATHER_USAGE_STATS ?= false

.PHONY: run test test-fast lint bench checkpoints chromium clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(RUNTIME_STAMP): requirements.txt | $(PY)
	$(PY) -m pip install -q -r requirements.txt
	touch $@

$(DEV_STAMP): requirements.txt requirements-dev.txt | $(PY)
	$(PY) -m pip install -q -r requirements-dev.txt
	touch $(RUNTIME_STAMP) $@

run: $(RUNTIME_STAMP)
	$(PY) -m streamlit run app.py --server.port $(PORT) --server.headless true

# Debian's chromium for the browser tests: installed when missing and apt-get is usable.
chromium:
	@if [ -x /usr/bin/chromium ]; then :; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	  echo "installing Debian's chromium for the browser tests"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else echo "chromium missing and apt-get not usable: browser tests will be skipped"; fi

lint: $(DEV_STAMP)
	$(PY) -m ruff check .

test: $(DEV_STAMP) chromium
	$(PY) -m ruff check .
	$(PY) -m pytest -q

# The fast tier (markers in pyproject.toml; AppTest tests are marked by tests/conftest.py).
FAST_TIER := not browser and not slow and not app
test-fast: $(DEV_STAMP)
	$(PY) -m ruff check .
	$(PY) -m pytest -q -m "$(FAST_TIER)"

bench: $(DEV_STAMP)
	$(PY) -m bench

checkpoints: $(RUNTIME_STAMP)
	$(PY) -m viz_core.training.train --task dates --out checkpoints/dates --steps 3500
	$(PY) -m viz_core.training.train --task en-fr --out checkpoints/en-fr --steps 4000
	$(PY) -m viz_core.training.train --task lm --out checkpoints/lm --steps 1500
	$(PY) -m viz_core.training.train --task lm --out checkpoints/lm-rope --name lm-rope --steps 1500 \
		--positional rope --kv-heads 2 --norm rmsnorm --compare checkpoints/lm

clean:
	rm -rf $(VENV) tests/artifacts bench/results.json

# Attention Lab. Quick start: `make run` (the app), `make test` (the whole suite) and
# `make test-fast` (tests/unit only). Test tiers are folders: tests/README.md.
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

.PHONY: run test test-fast test-kernels soak load lint bench checkpoints system-deps chromium clean messages

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# pip compiles the installed files to bytecode on one core; compileall does it on every core
# (the dev install: 81 s with pip's own compile, 28 + 22 s so, on 2 cores). Left to first
# imports instead, the compiling lands in the tests, Ray's workers compiling the same files
# at once. A file that is not Python (a template) fails to compile: pip ignores those too.
COMPILE = $(PY) -m compileall -q -j 0 $$($(PY) -c "import sysconfig; print(sysconfig.get_paths()['purelib'])") >/dev/null || true
$(RUNTIME_STAMP): requirements.txt | $(PY)
	$(PY) -m pip install -q --no-compile -r requirements.txt
	$(COMPILE)
	touch $@

$(DEV_STAMP): requirements.txt requirements-dev.txt | $(PY)
	$(PY) -m pip install -q --no-compile -r requirements-dev.txt
	$(COMPILE)
	touch $(RUNTIME_STAMP) $@

# No file watcher (also in .streamlit/config.toml): it costs most of a served app's CPU.
run: $(RUNTIME_STAMP)
	$(PY) -m attention_lab.server run app.py --server.port $(PORT) --server.headless true \
		--server.fileWatcherType none

# Debian packages the tests use: chromium (browser tier), fonts-noto-cjk (CJK text in the
# screenshots and overlap checks) and nginx (the deploy config's check). Installed when missing
# and apt-get is usable (root); otherwise says so, and the tests that need them skip.
SYSTEM_DEPS := chromium fonts-noto-cjk nginx
system-deps:
	@missing=""; for p in $(SYSTEM_DEPS); do \
	  { command -v $$p >/dev/null 2>&1 || dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed"; } \
	    || missing="$$missing $$p"; \
	done; \
	if [ -z "$$missing" ]; then :; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	  echo "installing Debian packages for the tests:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	else echo "missing Debian packages:$$missing (apt-get not usable here): the tests that need them will be skipped"; fi
chromium: system-deps

lint: $(DEV_STAMP)
	$(PY) -m ruff check .

# The whole suite, two workers more than the cores (pytest-xdist; work units in
# tests/conftest.py): the browser tier runs on two workers and waits on Chromium's renderer
# thread and on its servers, and the other workers wait on their subprocesses (Ray, servers),
# which left cores idle with fewer (a fresh clone on 28 Nov: 25 min 19 s with 2 workers, 22 min
# 41 s with 3; later, 21 min 39 s with 3 and 19 min 55 s with 4, the same tree, 14% of the
# CPU still idle; the browser tier split over two workers was no faster, 25 min 0 s, then).
# The browser tier alone waits far more than it computes (10 min 31 s for 5 min 24 s of CPU,
# 2 Dec), so it is now two units on two workers: a fresh clone 14 min 5 s against 15 min 49 s
# the same hour with one.
# Budget: 15 minutes on a 2-core machine from a fresh clone, installs included (README); the
# 15 slowest tests are listed at the end.
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 2 )))
test: $(DEV_STAMP) system-deps
	$(PY) -m ruff check .
	$(PY) -m pytest -q -n $(TEST_WORKERS) --durations=15

# The unit tier (tests/unit): a contributor's quick check.
test-fast: $(DEV_STAMP)
	$(PY) -m ruff check .
	$(PY) -m pytest -q -n $(TEST_WORKERS) tests/unit

# Long profiles; `make test` runs their short ones (tests/app/test_soak.py,
# tests/browser/test_load_browser.py). soak: 300 reruns of one session (memory growth); load:
# the classroom load test, 30 sessions on one server (bench/load), then the failover test
# with 12 sessions (make test: 6).
soak: $(DEV_STAMP)
	ATTENTION_LAB_SOAK_RERUNS=300 $(PY) -m pytest -q -s tests/app/test_soak.py
load: $(DEV_STAMP) system-deps
	$(PY) -m bench.load
	ATTENTION_LAB_FAILOVER_SESSIONS=12 $(PY) -m pytest -q -s tests/browser/test_failover.py

# The cross-kernel comparisons (ours vs Hugging Face eager, vs nn.MultiheadAttention, pooled vs
# exact, ...) again under other CPU code paths, the way a machine with another BLAS rounds:
# OpenBLAS's Haswell and Sandybridge kernels (numpy), then torch (ATen, MKL, oneDNN) held to
# AVX2. Not part of `make test`; about three runs of these files.
KERNEL_TESTS := tests/unit/test_hf_backend.py tests/unit/test_hf_tiny_models.py tests/unit/test_capture.py \
	tests/unit/test_model.py tests/unit/test_model_rope.py tests/unit/test_long_inputs.py tests/unit/test_block.py \
	tests/unit/test_native_backend.py tests/unit/test_modern_models.py tests/unit/test_encoders_albert_electra.py \
	tests/unit/test_inside_softcap.py tests/unit/test_figures_native.py
KERNEL_PATHS := "OPENBLAS_CORETYPE=Haswell" "OPENBLAS_CORETYPE=Sandybridge" \
	"OPENBLAS_CORETYPE=Haswell ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2"
test-kernels: $(DEV_STAMP)
	@for e in $(KERNEL_PATHS); do echo "== $$e"; env $$e $(PY) -m pytest -q $(KERNEL_TESTS) || exit 1; done

bench: $(DEV_STAMP)
	$(PY) -m bench

checkpoints: $(RUNTIME_STAMP)
	$(PY) -m viz_core.training.train --task dates --out checkpoints/dates --steps 3500
	$(PY) -m viz_core.training.train --task en-fr --out checkpoints/en-fr --steps 6000
	$(PY) -m viz_core.training.train --task zh-en --out checkpoints/zh-en --steps 6000
	$(PY) -m viz_core.training.train --task lm --out checkpoints/lm --steps 1500
	$(PY) -m viz_core.training.train --task lm --out checkpoints/lm-rope --name lm-rope --steps 1500 \
		--positional rope --kv-heads 2 --norm rmsnorm --compare checkpoints/lm
	$(PY) -m viz_core.training.train --task induction --out checkpoints/induction --steps 3000 --seed 2 \
		--n-test 0
	$(PY) -m viz_core.training.train --task induction --init checkpoints/induction \
		--out checkpoints/induction --curriculum --rope-base 10000 --steps 3000 --lr 0.003 \
		--warmup 100 --seed 2 --eval-every 500
	$(PY) -m viz_core.training.distil --out checkpoints/minilm-student

# The interface's message catalogue (viz_core/i18n): extract every _() / N_() / ngettext()
# string into locale/attention_lab.pot and merge it into each language's .po (new strings
# come in untranslated; tests/unit/test_catalogue.py fails until they are translated). The
# app reads the .po itself: there is no compile step.
messages: $(DEV_STAMP)
	$(PY) -m babel.messages.frontend -q extract -F babel.cfg -k N_ --no-location --sort-output \
		--project "Attention Lab" -o locale/attention_lab.pot .
	$(PY) -m babel.messages.frontend -q update -i locale/attention_lab.pot -d locale -D attention_lab \
		--no-fuzzy-matching --ignore-obsolete

clean:
	rm -rf $(VENV) tests/artifacts bench/results.json

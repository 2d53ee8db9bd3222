# Thin wrapper over CMake. `make` builds ./build/hbmlab; `make run` opens it on the default lesson;
# `make install` copies it to $(PREFIX)/bin (default ~/.local/bin; no root); `make test` runs every test;
# `make test PRESET=ci` is CI's release build, where any compiler warning fails the build (PRESET=ci
# does the same to the sanitizer, fuzz and page builds below);
# `make docs-update` rewrites the outputs the Markdown pages show from real runs; `make test-sanitize` runs
# the tests under AddressSanitizer and UBSan (build-debug/, clang); `make fuzz` fuzzes the file loaders
# with clang's libFuzzer in that same build, FUZZ_SECONDS each; `make web` builds the page (build-web/:
# index.html, hbmlab.js, hbmlab.wasm, and hbmlab.html, the same page in one file that opens from disk)
# and `make test-web` opens both in headless Chromium.
PRESET ?= default
# With PRESET=ci (what .ci/run passes), the sanitizer, fuzz and page builds also fail on any compiler
# warning in hbmlab's code, as the `ci` preset's release build does.
WARNINGS_AS_ERRORS := -DHBMLAB_WARNINGS_AS_ERRORS=$(if $(filter ci,$(PRESET)),ON,OFF)
BUILD  := build
JOBS   ?= $(shell nproc)
FUZZ_SECONDS ?= 30
PREFIX ?= $(HOME)/.local
DOC_PAGES := README.md sim/README.md gpu/README.md assets/measurements/README.md $(wildcard docs/*.md)

.PHONY: all run install test docs-update test-sanitize fuzz build deps configure clean web test-web deps-web

all: build

deps:
	@bash .ci/install-deps

configure: deps
	@cmake --preset $(PRESET) >/dev/null

build: configure
	@cmake --build --preset $(PRESET) -j $(JOBS)

run: build
	@./$(BUILD)/hbmlab

install: build
	@cmake --install $(BUILD) --prefix "$(PREFIX)"
	@case ":$$PATH:" in *":$(PREFIX)/bin:"*) ;; \
	  *) echo "hbmlab: $(PREFIX)/bin is not on PATH; add it, e.g. echo 'export PATH=\"$(PREFIX)/bin:\$$PATH\"' >> ~/.bashrc";; esac

test: build
	@ctest --preset $(PRESET) -j $(JOBS)

# For maintainers: run every example of the pages and write what it prints into the page (marks kept);
# then read `git diff` and fix the prose that quotes the figures.
docs-update: build
	@python3 tests/docs/check_examples.py --hbmlab $(BUILD)/hbmlab --update $(DOC_PAGES)

# The CMake preset `debug` (clang): -fsanitize=address,undefined with no recovery, no GUI, no CUDA, and
# hbmlab's code instrumented for libFuzzer too, so that the tests and the fuzz harnesses share one build.
# The test preset sets ASAN_OPTIONS and UBSAN_OPTIONS so that any finding fails its test, and leaves out
# the tests whose code under test it does not instrument (labels docs, web, scripts: Python, the page).
test-sanitize: deps
	@cmake --preset debug $(WARNINGS_AS_ERRORS) >/dev/null
	@cmake --build --preset debug -j $(JOBS)
	@ctest --preset debug -j $(JOBS)

# The harnesses of tests/fuzz/, linked with -fsanitize=fuzzer in build-debug/ (only they and the
# library are built here; after `make test-sanitize` nothing is). CTest replays their corpora first,
# then tests/fuzz/run.sh fuzzes each for FUZZ_SECONDS, JOBS harnesses at a time.
fuzz: deps
	@cmake --preset debug $(WARNINGS_AS_ERRORS) >/dev/null
	@cmake --build --preset fuzz -j $(JOBS)
	@ctest --preset fuzz -j $(JOBS)
	@HBMLAB_FUZZ_JOBS=$(JOBS) bash tests/fuzz/run.sh $(FUZZ_SECONDS)

# The page: Emscripten and Dear ImGui's Debian source package (viz/web/page.cmake). Emscripten's
# JavaScript tools need Debian's node modules (node-acorn) also when another Node.js comes first.
deps-web: deps
	@bash .ci/install-deps web

web: deps-web
	@viz/web/imgui-source.sh build-web/imgui
	@NODE_PATH=/usr/share/nodejs cmake --preset web $(WARNINGS_AS_ERRORS) >/dev/null
	@NODE_PATH=/usr/share/nodejs cmake --build --preset web -j $(JOBS)

# The page in headless Chromium (tests/web/), served and in one file from disk, from CTest in build/: label web.
test-web: web build
	@ctest --test-dir $(BUILD) -L web --output-on-failure

clean:
	@rm -rf build build-debug build-core build-fuzz build-web

# The front door. Two commands matter: `make quickstart` and `make test`.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
SERVICES ?= postgres postgres-replica mariadb mariadb-nobinlog kafka postgres-tls mariadb-tls kafka-tls redis mongodb

.PHONY: quickstart test build bootstrap bench bench-quick docs format format-check tidy clean services-stop \
        test-sanitizers test-asan test-tsan test-assertions test-fuzz fuzz soak

bootstrap:
	@scripts/bootstrap

$(BUILD_DIR)/build.ninja:
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)

build: bootstrap $(BUILD_DIR)/build.ninja
	ninja -C $(BUILD_DIR) -j $(JOBS)

# Installs dependencies, builds, and runs the embedded quickstart pipeline (generator → SQLite).
quickstart: build
	$(BUILD_DIR)/sluice run

# Installs dependencies, builds, starts the servers the tests need on loopback, runs the whole suite,
# then a short bounded run of every fuzz target from its seed corpus.
test: build
	@set -e; \
	for s in $(SERVICES); do eval "$$(scripts/services start $$s)"; done; \
	cd $(BUILD_DIR) && rc=0 && ctest --output-on-failure --timeout 600 -j $(JOBS) || rc=$$?; \
	$(CURDIR)/scripts/fault-summary fault-results.tsv || true; exit $$rc
	$(MAKE) test-fuzz

# The long fault suite: the fault_suite cases with 100 kill -9 per pipeline and 40 s outages
# (SLUICE_FAULT_SOAK=1; SLUICE_FAULT_SEED=N replays a run); its summary goes to benchmarks/.
soak: build
	@set -e; \
	for s in $(SERVICES); do eval "$$(scripts/services start $$s)"; done; \
	cd $(BUILD_DIR) && rm -f fault-results.tsv && rc=0 && \
	for b in ./sluice_fault_fault_suite_*_test; do SLUICE_FAULT_SOAK=1 $$b || rc=1; done; \
	$(CURDIR)/scripts/fault-summary fault-results.tsv | tee $(CURDIR)/benchmarks/fault-soak.txt || true; \
	exit $$rc

bench: build
	bench/run $(BENCH_ARGS)

bench-quick: build
	bench/run --quick

# Regenerates docs/connectors.md from the connectors' settings tables.
docs: build
	$(BUILD_DIR)/sluice connectors --markdown > docs/connectors.md
	$(BUILD_DIR)/sluice connectors --pipeline-file > docs/pipeline-file.md

# Style (.clang-format): `format` rewrites every tracked C++ file, `format-check` only lists them.
CLANG_FORMAT ?= clang-format-14
format:
	$(CLANG_FORMAT) -i $$(git ls-files '*.cc' '*.h')

format-check:
	$(CLANG_FORMAT) --dry-run --Werror $$(git ls-files '*.cc' '*.h')

# clang-tidy-14 with .clang-tidy over build/compile_commands.json; every finding is an error.
tidy: bootstrap $(BUILD_DIR)/build.ninja
	scripts/tidy $(BUILD_DIR)

# Unit and e2e tests (no servers) under ASan+UBSan, TSan, and with assertions on, each in its own
# build directory, building only what `ctest -L 'unit|e2e'` runs (target unit_e2e_tests).
# Optimised (-O1) so the builds stay cheap; see docs/development/tooling.md for the timings.
SANITIZER_FLAGS = -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" \
                  -DSLUICE_BUILD_BENCH=OFF
SANITIZER_JOBS ?= $(JOBS)
test-sanitizers: test-asan test-tsan test-assertions

define sanitizer_build
	cmake -S . -B build-$(1) $(SANITIZER_FLAGS) $(2)
	ninja -C build-$(1) -j $(SANITIZER_JOBS) unit_e2e_tests
	cd build-$(1) && $(3) ctest -L 'unit|e2e' --output-on-failure --timeout 600 -j $(SANITIZER_JOBS)
endef

test-asan: bootstrap
	$(call sanitizer_build,asan,-DSLUICE_SANITIZE=address,\
	  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1)

test-tsan: bootstrap
	$(call sanitizer_build,tsan,-DSLUICE_SANITIZE=thread,\
	  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$(CURDIR)/scripts/tsan.supp")

test-assertions: bootstrap
	$(call sanitizer_build,assert,-DSLUICE_ASSERTIONS=ON,)

# libFuzzer targets (fuzz/, clang-14): `test-fuzz` runs each for FUZZ_SECONDS from its seed corpus;
# `fuzz FUZZ_TARGET=binlog FUZZ_SECONDS=600` runs one longer. Crashes land in build-fuzz/fuzz-artifacts/.
FUZZ_SECONDS ?= 20
FUZZ_TARGET ?= pgoutput
build-fuzz/build.ninja:
	CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" -DSLUICE_FUZZ=ON -DSLUICE_BUILD_TESTS=OFF \
	  -DSLUICE_BUILD_BENCH=OFF

test-fuzz: bootstrap build-fuzz/build.ninja
	cmake -B build-fuzz -DSLUICE_FUZZ_SECONDS=$(FUZZ_SECONDS)
	ninja -C build-fuzz -j $(JOBS) fuzz_targets
	cd build-fuzz && ctest -L fuzz --output-on-failure -j $(JOBS)

fuzz: bootstrap build-fuzz/build.ninja
	ninja -C build-fuzz -j $(JOBS) fuzz_$(FUZZ_TARGET)
	mkdir -p build-fuzz/fuzz-work/$(FUZZ_TARGET) build-fuzz/fuzz-artifacts
	build-fuzz/fuzz_$(FUZZ_TARGET) -max_total_time=$(FUZZ_SECONDS) -timeout=10 \
	  -artifact_prefix=build-fuzz/fuzz-artifacts/$(FUZZ_TARGET)- \
	  build-fuzz/fuzz-work/$(FUZZ_TARGET) fuzz/corpus/$(FUZZ_TARGET)

services-stop:
	scripts/services stop

clean:
	rm -rf $(BUILD_DIR) build-asan build-tsan build-assert build-fuzz

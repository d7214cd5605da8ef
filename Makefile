# The front door. Two commands matter: `make quickstart` and `make test`.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
SERVICES ?= postgres postgres-replica mariadb mariadb-nobinlog kafka

.PHONY: quickstart test build bootstrap bench bench-quick docs format clean services-stop

bootstrap:
	@scripts/bootstrap

$(BUILD_DIR)/build.ninja:
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)

build: bootstrap $(BUILD_DIR)/build.ninja
	ninja -C $(BUILD_DIR) -j $(JOBS)

# Installs dependencies, builds, and runs the embedded quickstart pipeline (generator → SQLite).
quickstart: build
	$(BUILD_DIR)/sluice run

# Installs dependencies, builds, starts the servers the tests need on loopback, runs the whole suite.
test: build
	@set -e; \
	for s in $(SERVICES); do eval "$$(scripts/services start $$s)"; done; \
	cd $(BUILD_DIR) && ctest --output-on-failure --timeout 600 -j $(JOBS)

bench: build
	bench/run $(BENCH_ARGS)

bench-quick: build
	bench/run --quick

# Regenerates docs/connectors.md from the connectors' settings tables.
docs: build
	$(BUILD_DIR)/sluice connectors --markdown > docs/connectors.md

format:
	clang-format -i $$(git ls-files '*.cc' '*.h')

services-stop:
	scripts/services stop

clean:
	rm -rf $(BUILD_DIR)

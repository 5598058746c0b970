# upsert-kafka-ops: the two set-up commands are `make demo` and `make test` (see README.md).
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 || command -v python3)
export PYTHON
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
PIP_VERSION := 26.3
UV_VERSION := 0.13.9
EXTRAS := airflow,dagster,schema-registry,connect,delta,s3,iceberg,dev
LINT_PATHS := src tests benchmarks dags dagster_defs
TIMED := scripts/timed.sh
# Helm is built from the Go module proxy with the machine's Go (tests/helm fail without it), once per
# machine into the user cache (every clone shares it), and linked as .tools/bin/helm.
HELM_VERSION := v3.22.0
TOOLS_DIR ?= $(HOME)/.cache/upsert-kafka-ops/tools
HELM_BUILT := $(TOOLS_DIR)/helm-$(HELM_VERSION)/helm
HELM := .tools/bin/helm
GO ?= $(shell command -v go || echo /usr/local/go/bin/go)
# MinIO, the real S3 server of the tests of tables on S3 (tests/devservices/s3.py): built the same
# way (its module has no tags the proxy lists: the pseudo-version is its @latest, pinned), linked as
# .tools/bin/minio.
MINIO_VERSION := v0.0.0-20260212201848-7aac2a2c5b7c
MINIO_BUILT := $(TOOLS_DIR)/minio-$(MINIO_VERSION)/minio
# Prometheus, promtool and the Pushgateway: Debian's packages, downloaded with apt-get and extracted
# (no root, no service) once per machine into the user cache, linked into .tools/bin. The chart tests
# check the alert rules with promtool; the monitoring test runs both servers.
PROMETHEUS_DEB := 2.42.0+ds-5+deb12u1
PUSHGATEWAY_DEB := 1.5.1-2+b5
PROMETHEUS_BUILT := $(TOOLS_DIR)/prometheus-$(PROMETHEUS_DEB)/.extracted
# nginx, the TLS proxy in front of the chart's Spark Connect server: the integration test runs the
# chart's own proxy config with it. Debian's package, fetched like Prometheus (unpinned: the security
# archive keeps only its newest build), linked as .tools/bin/nginx.
NGINX_BUILT := $(TOOLS_DIR)/nginx/.extracted
# Kerberos (GSSAPI) for the librdkafka clients: confluent-kafka built from source against a librdkafka
# with Cyrus SASL (scripts/build-librdkafka.sh), once per machine into the user cache. make test needs
# it (a real MIT KDC and a GSSAPI listener); make demo keeps the wheel.
LIBRDKAFKA_BUILT := $(TOOLS_DIR)/librdkafka-2.15.1-gssapi
KERBEROS_STAMP := $(VENV)/.kerberos-stamp
# Real Flink, the conformance tests' oracle: PyFlink in its own virtualenv (its pins clash with
# pyspark's world), Flink's Kafka connector jar through the project's jar fetcher.
FLINK_VENV := .venv-flink
FLINK_STAMP := $(FLINK_VENV)/.installed-stamp
FLINK_VERSION := 2.2.1

.PHONY: lanes wheel-check help toolchain test-costs-reset test-quick install jars flink flink-venv flink-jars yarn lake-jars kerberos registry lint unit check helm minio prometheus nginx chart integration test demo bench constraints clean

help:
	@echo "make demo   - install, fetch jars, run the main job on a local Kafka broker and local Spark"
	@echo "make test   - install, fetch jars, lint, run the whole test suite against real Kafka and Spark"
	@echo "make check  - lint and unit tests only (no JVM; under a minute): the quickest loop"
	@echo "make test-quick - make check, the chart and a slice of each suite with real components (under 8 minutes)"
	@echo "make jars   - resolve the JVM jars from Maven Central (a no-op when up to date)"
	@echo "make lanes  - the other Spark lines (3.5 on Python 3.11, 4.0 on 3.12), each in its own virtualenv"
	@echo "make wheel-check - build the wheel, install it into clean Python 3.13 and 3.10 virtualenvs, run the demo from it"
	@echo "make bench  - engine throughput next to Kafka's perf tools, Spark's raw read and Flink's job"

toolchain:
	@scripts/ensure-toolchain.sh

# uv installs the pinned set into the virtualenv (the same versions pip would: constraints.txt); in
# CI's new checkout with warm caches the install took 21-27 s where pip took 43. pip stays in the
# virtualenv for the Kerberos build below and for users' own installs. --compile-bytecode writes the
# .pyc files pip would (uv does not by default), so that no process compiles its imports from source:
# with PYTHONDONTWRITEBYTECODE set, as on CI's machine, every new process did (import airflow 4.1 s
# -> 1.7 s, dagster 1.9 s -> 1.0 s; the install 32 s -> 43 s).
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q "pip==$(PIP_VERSION)" "uv==$(UV_VERSION)"
	$(BIN)/uv pip install -q --compile-bytecode --python $(BIN)/python -c constraints.txt -e ".[$(EXTRAS)]"
	@touch $@

install: toolchain
	@$(TIMED) install $(MAKE) --no-print-directory $(STAMP)

jars: install
	@$(TIMED) jars $(BIN)/upsert-kafka-ops jars fetch

$(LIBRDKAFKA_BUILT)/.built:
	@$(TIMED) "librdkafka build" scripts/build-librdkafka.sh $(LIBRDKAFKA_BUILT)

$(KERBEROS_STAMP): $(STAMP) $(LIBRDKAFKA_BUILT)/.built
	env C_INCLUDE_PATH=$(LIBRDKAFKA_BUILT)/include LIBRARY_PATH=$(LIBRDKAFKA_BUILT)/lib \
	  LDFLAGS="-Wl,-rpath,$(LIBRDKAFKA_BUILT)/lib" $(BIN)/pip install -q --no-cache-dir --no-deps \
	  --force-reinstall --no-binary confluent-kafka -c constraints.txt confluent-kafka
	@touch $@

kerberos: install
	@scripts/ensure-toolchain.sh kerberos
	@$(TIMED) kerberos $(MAKE) --no-print-directory $(KERBEROS_STAMP)

$(FLINK_STAMP): constraints-flink.txt
	$(PYTHON) -m venv $(FLINK_VENV)
	$(FLINK_VENV)/bin/pip install -q "pip==$(PIP_VERSION)" "uv==$(UV_VERSION)"
	$(FLINK_VENV)/bin/uv pip install -q --compile-bytecode --python $(FLINK_VENV)/bin/python -c constraints-flink.txt "apache-flink==$(FLINK_VERSION)"
	@touch $@

flink: flink-venv flink-jars

flink-venv:
	@$(TIMED) "flink oracle" $(MAKE) --no-print-directory $(FLINK_STAMP)

flink-jars: jars
	@$(TIMED) "flink jars" $(BIN)/upsert-kafka-ops jars fetch --group flink

# Hadoop's ResourceManager and NodeManager for the YARN cluster-mode tests (LocalYarn), fetched once
# before the suites that use it start side by side
yarn: jars
	@$(TIMED) "yarn jars" $(BIN)/upsert-kafka-ops jars fetch --group yarn

# S3A and Iceberg's runtime, for tables on S3 and Iceberg targets: fetched once before the suites that
# load them start side by side (each would otherwise resolve its own copy into the same cache folder)
lake-jars: jars
	@$(TIMED) "s3 jars" $(BIN)/upsert-kafka-ops jars fetch --group s3
	@$(TIMED) "iceberg jars" $(BIN)/upsert-kafka-ops jars fetch --group iceberg

lint: install
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/ruff format --check $(LINT_PATHS)
	$(BIN)/mypy

# a few unit tests read the jars' paths (a session's conf, the Connect server's command): fetched
# first, once per machine (a no-op check after that)
unit: install jars lake-jars
	@$(TIMED) "unit tests" $(BIN)/pytest tests/unit

check: lint unit

$(HELM_BUILT):
	@test -x "$(GO)" || { echo "ERROR: Go is needed to build helm $(HELM_VERSION) with go install (set GO=/path/to/go)." >&2; exit 1; }
	@$(TIMED) "helm build" env GOBIN=$(dir $(HELM_BUILT)) $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

$(HELM): $(HELM_BUILT)
	@mkdir -p $(dir $(HELM)) && ln -sf $(HELM_BUILT) $(HELM)

helm: $(HELM)

$(MINIO_BUILT):
	@test -x "$(GO)" || { echo "ERROR: Go is needed to build MinIO with go install (set GO=/path/to/go)." >&2; exit 1; }
	@$(TIMED) "minio build" env GOBIN=$(dir $(MINIO_BUILT)) $(GO) install github.com/minio/minio@$(MINIO_VERSION)

minio: $(MINIO_BUILT)
	@mkdir -p .tools/bin && ln -sf $(MINIO_BUILT) .tools/bin/minio

$(PROMETHEUS_BUILT):
	@command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || { echo "ERROR: apt-get and dpkg-deb (Debian) fetch Prometheus $(PROMETHEUS_DEB); or put prometheus, promtool and pushgateway on UKO_PROMETHEUS_BIN." >&2; exit 1; }
	@rm -rf $(dir $@) && mkdir -p $(dir $@)/debs && chmod 777 $(dir $@)/debs
	@$(TIMED) "prometheus download" bash -c 'cd $(dir $@)/debs && apt-get download -q "prometheus=$(PROMETHEUS_DEB)" "prometheus-pushgateway=$(PUSHGATEWAY_DEB)" 2>&1 | grep -v "^W: Download is performed unsandboxed" || true'
	@for deb in $(dir $@)/debs/*.deb; do dpkg-deb -x $$deb $(dir $@); done
	@test -x $(dir $@)/usr/bin/prometheus -a -x $(dir $@)/usr/bin/promtool -a -x $(dir $@)/usr/bin/prometheus-pushgateway || { echo "ERROR: the Prometheus packages did not download" >&2; exit 1; }
	@rm -rf $(dir $@)/debs && touch $@

prometheus: $(PROMETHEUS_BUILT)
	@mkdir -p .tools/bin
	@ln -sf $(dir $(PROMETHEUS_BUILT))usr/bin/prometheus .tools/bin/prometheus
	@ln -sf $(dir $(PROMETHEUS_BUILT))usr/bin/promtool .tools/bin/promtool
	@ln -sf $(dir $(PROMETHEUS_BUILT))usr/bin/prometheus-pushgateway .tools/bin/pushgateway

$(NGINX_BUILT):
	@command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || { echo "ERROR: apt-get and dpkg-deb (Debian) fetch nginx; or put nginx on UKO_NGINX." >&2; exit 1; }
	@rm -rf $(dir $@) && mkdir -p $(dir $@)/debs && chmod 777 $(dir $@)/debs
	@$(TIMED) "nginx download" bash -c 'cd $(dir $@)/debs && apt-get download -q nginx 2>&1 | grep -v "^W: Download is performed unsandboxed" || true'
	@for deb in $(dir $@)/debs/*.deb; do dpkg-deb -x $$deb $(dir $@); done
	@test -x $(dir $@)/usr/sbin/nginx || { echo "ERROR: the nginx package did not download" >&2; exit 1; }
	@rm -rf $(dir $@)/debs && touch $@

nginx: $(NGINX_BUILT)
	@mkdir -p .tools/bin && ln -sf $(dir $(NGINX_BUILT))usr/sbin/nginx .tools/bin/nginx

# The chart: helm lint/template over a values matrix, kubernetes-validate, overlays, hadolint.
chart: install $(HELM) prometheus
	@$(TIMED) "chart tests" env UKO_HELM=$(CURDIR)/$(HELM) UKO_PROMETHEUS_BIN=$(CURDIR)/.tools/bin $(BIN)/pytest tests/helm

# The local Schema Registry (Apicurio with its Confluent API, built with Maven into the jar cache once),
# built before the suites start: the integration and conformance suites both use it.
registry: jars
	@$(TIMED) "schema registry" $(BIN)/python -c "from upsert_kafka_ops.local.schema_registry import build; build()"

# The suites with real services, side by side in their own pytest processes (scripts/run-suites.sh);
# the conformance suite compares the engine with real Flink.
integration: jars flink kerberos registry yarn lake-jars prometheus minio nginx $(HELM)
	@$(TIMED) "integration, conformance, airflow, dagster and monitoring tests" env UKO_FLINK_PYTHON=$(CURDIR)/$(FLINK_VENV)/bin/python UKO_PROMETHEUS_BIN=$(CURDIR)/.tools/bin UKO_MINIO=$(CURDIR)/.tools/bin/minio UKO_NGINX=$(CURDIR)/.tools/bin/nginx UKO_HELM=$(CURDIR)/$(HELM) scripts/run-suites.sh $(BIN)/pytest build/test-logs

# every pytest process of make test records where its time went (tests/costs.py); the suites' end
# prints the top files and writes build/test-logs/costs.md (scripts/test_costs.py).
# Before the suites, two lanes side by side (each is mostly one core's work): what Maven resolves, one
# at a time (Maven's local repository takes one writer; its output is printed when it ends; in a new
# checkout the driver's class archive is built there too, about a minute), and the checks with the
# rest. Kerberos' client build comes first: it reinstalls confluent-kafka, which the unit tests import.
# The unit tests come after both lanes: a few read the jars' paths (on a new machine they had started
# before the jars were fetched, and failed).
test: export UKO_TEST_COSTS := $(CURDIR)/build/test-logs/costs
test: test-costs-reset kerberos
	@mkdir -p build/test-logs
	@$(MAKE) --no-print-directory jars flink-jars registry yarn lake-jars >build/test-logs/prepare.log 2>&1 & maven=$$!; \
	  $(MAKE) --no-print-directory lint chart flink-venv prometheus minio nginx; checks=$$?; \
	  wait $$maven; resolved=$$?; cat build/test-logs/prepare.log; [ $$checks -eq 0 ] && [ $$resolved -eq 0 ]
	@$(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory integration

test-costs-reset:
	@rm -rf build/test-logs/costs build/test-logs/costs.md

# the inner loop with real components, under 8 minutes (CONTRIBUTING.md): make check, the chart, and a
# slice of the integration, Airflow and Dagster suites side by side (scripts/run-suites.sh quick)
test-quick: jars check chart nginx
	@rm -rf build/test-logs/quick
	@$(TIMED) "quick suites" scripts/run-suites.sh $(BIN)/pytest build/test-logs/quick quick

# The other supported Spark lines, each in its own virtualenv (scripts/lanes.sh; .ci/run runs it after
# make test, whose Flink oracle and jar cache it uses): Spark 3.5 on Python 3.11, Spark 4.0 on 3.12.
lanes: flink-venv
	@$(TIMED) "spark line lanes" env UKO_FLINK_PYTHON=$(CURDIR)/$(FLINK_VENV)/bin/python scripts/lanes.sh $(PIP_VERSION) $(UV_VERSION) $(EXTRAS) $(LANES)

# The package as users install it: sdist and wheel built and twine-checked, the wheel installed into
# clean Python 3.13 virtualenvs with the airflow and the dagster extra (their CLIs load the provider and
# the Component), on Python 3.10, and the demo run from the installed wheel (scripts/wheel-check.sh).
wheel-check: jars
	@$(TIMED) "wheel check" scripts/wheel-check.sh $(PIP_VERSION) $(UV_VERSION)

demo: jars
	$(BIN)/upsert-kafka-ops demo

# Throughput next to Kafka's perf tools, Spark's raw read and Flink's job, and incremental runs at
# scale next to a hand-written foreachBatch MERGE (never part of the tests); results in build/bench/.
bench: jars flink lake-jars minio
	@$(BIN)/pip install -q -c constraints.txt -e ".[bench]"
	@$(TIMED) bench env UKO_FLINK_PYTHON=$(CURDIR)/$(FLINK_VENV)/bin/python $(BIN)/python benchmarks/bench_engine.py
	@$(TIMED) "lag bench" $(BIN)/python benchmarks/bench_lag.py
	@$(TIMED) "memory bench" $(BIN)/python benchmarks/bench_memory.py
	@$(TIMED) "scale bench" env UKO_MINIO=$(CURDIR)/.tools/bin/minio $(BIN)/python benchmarks/bench_scale.py
	@$(TIMED) "delta layout bench" $(BIN)/python benchmarks/bench_delta_layout.py
	@$(TIMED) "streaming bench" env UKO_FLINK_PYTHON=$(CURDIR)/$(FLINK_VENV)/bin/python $(BIN)/python benchmarks/bench_streaming.py

# Re-pin the whole verified set after changing a range in pyproject.toml (check it resolves first:
# pip install --dry-run -c constraints.txt -e ".[$(EXTRAS)]").
constraints: install
	@$(BIN)/pip install -q -c constraints.txt -e ".[bench]"
	@{ echo "# Exact versions verified to install and pass together (make, CI). Regenerate: make constraints"; \
	   $(BIN)/pip freeze --exclude-editable | grep -v -e '^upsert-kafka-ops' -e '^uv=='; } > constraints.txt.new
	@mv constraints.txt.new constraints.txt

clean:
	rm -rf $(VENV) $(FLINK_VENV) .venv-lanes .tools build dist src/*.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis

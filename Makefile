# The two commands a fresh clone needs: `make run` and `make test`. Everything they depend on is
# installed from here (Debian packages as root, Python packages into .venv).
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
PYTHON ?= python3
STAMP := $(VENV)/.installed
SYSSTAMP := .cache/.sysdeps

.PHONY: install sysdeps run test test-slow compose-test bench lint typecheck clean

$(SYSSTAMP):
	@mkdir -p .cache
	@bash deploy/install-sysdeps.sh
	@touch $@

sysdeps: $(SYSSTAMP)

# One line per stage, and its elapsed time when it is done; pip's own output goes to .cache/install-venv.log
# (its end is shown when a stage fails, and one line says when pip printed warnings).
$(STAMP): pyproject.toml setup.py protocol/_record_scan.c protocol/_wire.c storage/_compiled_append.c | $(SYSSTAMP)
	@log=.cache/install-venv.log; mkdir -p .cache; : > $$log; begin=$$SECONDS; \
	stage() { local what=$$1 start=$$SECONDS; shift; echo "install: $$what$${note:+ ($$note)} ..."; \
	  if ! "$$@" >>$$log 2>&1; then echo "install: $$what failed; the end of $$log:" >&2; tail -n 30 $$log >&2; \
	    return 1; fi; echo "install: $$what: done in $$((SECONDS - start)) s"; }; \
	if ! test -x $(PY); then stage "creating the virtualenv $(VENV)" $(PYTHON) -m venv $(VENV) || exit 1; fi; \
	stage "upgrading pip" $(PIP) install -q --upgrade pip || exit 1; \
	note="about a minute the first time" stage "pip install -e '.[test]' into $(VENV)" \
	  $(PIP) install -q -e '.[test]' || exit 1; \
	if grep -qi warning $$log; then echo "install: pip printed warnings; see $$log"; fi; \
	echo "install: done in $$((SECONDS - begin)) s"
	@touch $@

install: $(STAMP)

# More options for `make run` (python -m clients.devcluster --help), e.g.
# RUN_ARGS="--brokers 1 --override log.retention.ms=600000". Broker configs also come from the
# environment: KAFKETTE_OVERRIDES="auto.create.topics.enable=false num.partitions=6" make run.
RUN_ARGS ?=

# A second `make run` refuses (status 1) while one runs; a broker that dies is reported and can be
# restarted from another terminal (.venv/bin/python -m clients.devcluster status | kill | stop | restart).
run: install
	$(PY) -m clients.devcluster $(RUN_ARGS)

# The same cluster secured (clients/devcluster_secure.py, docs/security.md): SASL_SSL with SCRAM-SHA-512 on
# 9092-9094 and between brokers, an ACL authorizer with super user admin; CA, passwords and the client
# files (client.properties, kcat.conf, ca.pem) stay in .cache/devcluster-secure.
.PHONY: run-secure
run-secure: install
	$(PY) -m clients.devcluster_secure

# Two workers: most of the suite's time is spent waiting on brokers, ZooKeeper and JVM clients, not
# computing, so two share two cores well (about half the serial time). A test file runs whole on one
# worker (its module fixtures are started once); free ports come from a slice per worker
# (tests/conftest.py). TEST_WORKERS=0 runs the suite in this process, serially.
TEST_WORKERS ?= 2

# Lint and type check first: a failure there stops the run before any test starts.
test: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(PY) -m pytest -q -m "not slow" -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# The compose test runs last, and also when the others failed. The cluster failure tests run a second
# time on brokers that talk to each other over SASL_SSL (SCRAM-SHA-512): replication, elections and
# failover must not depend on the inter-broker listener being PLAINTEXT.
test-slow: install
	rc=0; $(PY) -m pytest -q -m slow --ignore=tests/ops/test_compose.py $(PYTEST_ARGS) || rc=$$?; \
	KAFKETTE_TEST_INTER_BROKER=SASL_SSL $(PY) -m pytest -q tests/cluster $(PYTEST_ARGS) || rc=$$?; \
	$(MAKE) compose-test || rc=$$?; exit $$rc

# docker-compose.yml for real, with podman: deploy/local-images.sh builds the images FROM a Debian base
# bootstrapped here (no image registry needed), then the stack runs (tests/ops/test_compose.py).
compose-test: install
	$(PY) -m pytest -q -m slow tests/ops/test_compose.py $(PYTEST_ARGS)

bench: install
	$(PY) -m tests.bench

lint: install
	$(VENV)/bin/ruff check .

# mypy reads its file list and per-package strictness from pyproject.toml ([tool.mypy]).
typecheck: install
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) .cache build *.egg-info

# Kafka Streams, Connect and MirrorMaker 2 on kafkette (docs/platform.md): Kafka 3.9.1's jars from Maven
# Central into .cache/platform-jars/ and the Streams app of deploy/platform/streams-app, built once; the
# platform tests (tests/platform, part of test-slow) run the same script.
.PHONY: platform
platform:
	bash deploy/platform/install.sh

# The PySpark pipeline (clients/pipeline; README, "The Spark pipeline"): installs PySpark (pyproject's `pipeline`
# extra) and the Spark Kafka connector's jars once, then runs the streaming job with spark-submit against
# $BOOTSTRAP_SERVERS, or a local 3-broker cluster when it is not set.
.PHONY: pipeline
pipeline: install
	VENV=$(VENV) bash clients/pipeline/run_pipeline.sh $(PIPELINE_ARGS)

# The fault matrix (tests/chaos, docs/chaos.md): brokers and ZooKeeper in network namespaces, partitions,
# loss, jitter, clock jumps; prints the table and fails on any broken promise. Needs root.
# CHAOS_QUICK=1: the short version; CHAOS_SEED=<n> CHAOS_SCENARIOS=<keys>: replay a run.
.PHONY: chaos
chaos: install
	$(PY) -m tests.chaos.runner

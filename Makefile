# p4lb. `make` prints this help. Every target works the same natively and in the VM.
SHELL := /bin/bash
PY ?= python3
VENV ?= .venv
VPY := $(VENV)/bin/python
BUILD := build
P4SRC := p4src
COMPILED := $(P4SRC)/compiled
P4_SOURCES := $(shell find $(P4SRC) -name '*.p4' -not -path '*/compiled/*')
# p4c's BMv2 simple_switch backend, called directly (the `p4c` driver runs the same binary).
P4C ?= p4c-bm2-ss
# Without LocalCopyPropagation: within an action p4c substitutes each field's defining
# expression into every later use, and BMv2 then evaluates it again at each use (lb.p4's
# set_vip, the connection lookup and update in one action: 1795 expression operations with
# it, 180 without). p4c 1.2.5's BMv2 back end warns, whatever --Wdisable says, that
# set_vip_source's backend_id is unused: it is, on purpose (it records which backend an
# entry belongs to), and marked @noWarn("unused").
# The minimum versions (P4LB_MIN_P4C, ...) and the source route's pins: one place, also read by
# scripts/install-deps.sh and the tests.
include scripts/toolchain.env
P4C_FLAGS := --arch v1model --std p4-16 --Werror --excludeMidendPasses P4::LocalCopyPropagation
QUICK ?=
FULL ?=
PY_DIRS := $(wildcard controller tests topology bench scripts)

.PHONY: help deps venv build artifacts run stop test test-unit test-all lint bench bench-report bench-ab bench-switch bench-floor bench-tier bench-choices bench-qos shell clean

help:
	@echo "p4lb make targets:"
	@echo "  deps       install everything (p4c + BMv2: packages, else built from source; Mininet, ab,"
	@echo "             k6, Python venv; P4LB_FROM_SOURCE=1 forces the source route)"
	@echo "  venv       create $(VENV) with the p4lb package and test tools"
	@echo "  build      compile p4src/lb.p4 (and the baseline) into $(BUILD)/"
	@echo "  artifacts  build, then refresh $(COMPILED)/ (P4Info, BMv2 JSON, source stamp)"
	@echo "  run        start the Mininet topology + BMv2 + controller, open the CLI"
	@echo "             (TOPO=scaleout BALANCERS=3: a tier of balancers behind FRR, BGP and ECMP)"
	@echo "  stop       stop everything 'make run' started (by PID) and remove its interfaces"
	@echo "  test       lint + the whole test suite (layers without their tools are skipped)"
	@echo "  bench      the experiment suite (issue 15): quick profile; FULL=1 the whole matrix;"
	@echo "             results/experiments/ + results/README.md (report only: make bench-report)"
	@echo "  bench-ab   ApacheBench runs for every algorithm + controller speed (QUICK=1: smoke run)"
	@echo "  bench-switch  lb.p4 vs plain forwarding per BMv2 build: the switch alone, then ab end to end"
	@echo "             (BUILDS='standard=/path/simple_switch_grpc fast=/path/...'; QUICK=1;"
	@echo "             ALGORITHMS='iphash wrr ...', default every algorithm of the program)"
	@echo "  bench-floor  the least a stateful NAT load balancer costs on each build (p4src/floor.p4),"
	@echo "             beside plain forwarding and lb.p4's WRR (BUILDS as above; QUICK=1; needs p4c)"
	@echo "  bench-tier the tier (TOPO=scaleout): req/s and switch CPU with 1-3 balancers, failover"
	@echo "             figures per event kind; then what sharing costs per packet (instructions, per"
	@echo "             build as BUILDS); results/tier/ (QUICK=1: one short repetition)"
	@echo "  bench-choices  what a new connection costs with leastconn comparing every backend vs two,"
	@echo "             at 3, 8, 16 backends (instructions per SYN, per build); results/algorithms/"
	@echo "  bench-qos  queueing disciplines on a 1,000 packets/s port (seed 004): VoIP delay, jitter,"
	@echo "             loss, goodput + Jain, TIPHON grades; results/qos/ (QUICK=1: 1 x 10 s, quick/)"
	@echo "  shell      p4runtime-shell on the running switch, as a reader (own venv: $(SHELL_VENV);"
	@echo "             CONFIG=run/lb.toml, SHELL_ARGS=--primary to write)"
	@echo "  lint       ruff + mypy + shellcheck"
	@echo "  clean      remove $(BUILD)/ and caches"

deps:
	bash scripts/install-deps.sh

$(VPY): pyproject.toml
	$(PY) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install --quiet -e '.[test,bench,topology]'
	touch $(VPY)

venv: $(VPY)

# p4runtime-shell with the pins it needs (protobuf < 3.21, IPython 7), kept out of $(VENV).
SHELL_VENV ?= .venv-shell
SHELL_PINS := p4runtime-shell==0.0.6 p4runtime==1.4.1 protobuf==3.20.3 grpcio==1.85.1 \
	googleapis-common-protos==1.73.0 ipython==7.31.1 jedi==0.17.2
CONFIG ?= run/lb.toml
SHELL_ARGS ?=

$(SHELL_VENV)/bin/python:
	$(PY) -m venv $(SHELL_VENV)
	$(SHELL_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(SHELL_VENV)/bin/python -m pip install --quiet $(SHELL_PINS)

shell: $(VPY) $(SHELL_VENV)/bin/python
	$(VENV)/bin/p4lb -c $(CONFIG) shell $(SHELL_ARGS)

# The baseline shares defines.p4 and uses few of its constants: unused ones are expected there.
$(BUILD)/lb.json: $(P4_SOURCES)
	@command -v $(P4C) >/dev/null || { echo "make build: $(P4C) (p4c >= $(P4LB_MIN_P4C)) is not installed (run 'make deps' or use the VM)"; exit 1; }
	@v=$$($(P4C) --version 2>&1 | grep -Eo '[0-9]+(\.[0-9]+)+' | head -1); \
	if [ "$$(printf '%s\n%s\n' "$(P4LB_MIN_P4C)" "$$v" | sort -V | head -1)" != "$(P4LB_MIN_P4C)" ]; then \
		echo "make build: $(P4C) is p4c $${v:-of an unknown version}; p4lb needs p4c >= $(P4LB_MIN_P4C) (run 'make deps')"; exit 1; fi; \
	echo "make build: $(P4C) is p4c $$v (p4lb needs >= $(P4LB_MIN_P4C))"
	mkdir -p $(BUILD)
	$(P4C) $(P4C_FLAGS) -o $(BUILD)/lb.json --p4runtime-files $(BUILD)/lb.p4info.txtpb $(P4SRC)/lb.p4
	$(P4C) $(P4C_FLAGS) --Wdisable=unused -o $(BUILD)/baseline.json --p4runtime-files $(BUILD)/baseline.p4info.txtpb $(P4SRC)/baseline.p4

build: $(BUILD)/lb.json

artifacts: build
	cp $(BUILD)/lb.json $(BUILD)/lb.p4info.txtpb $(BUILD)/baseline.json $(BUILD)/baseline.p4info.txtpb $(COMPILED)/
	{ $(PY) scripts/p4_sources_hash.py; $(P4C) --version | tail -1; } > $(COMPILED)/SOURCES.sha256
	@echo "refreshed $(COMPILED)/ — commit it together with the P4 change"

lint: $(VPY)
	$(VENV)/bin/ruff check $(PY_DIRS)
	$(VENV)/bin/ruff format --check $(PY_DIRS)
	$(VENV)/bin/mypy
	shellcheck scripts/*.sh vagrant/*.sh .ci/run

test: lint
	$(VPY) -m pytest tests

test-unit: $(VPY)
	$(VPY) -m pytest tests/unit

# TOPO=scaleout: a tier of balancers behind FRR and ECMP (topology/tier.py; BALANCERS=3).
TOPO ?=
BALANCERS ?= 3
run: $(VPY)
	@$(MAKE) --no-print-directory -s build >/dev/null 2>&1 || true
ifeq ($(TOPO),scaleout)
	$(VPY) -m topology.tier run --balancers $(BALANCERS) $(RUN_ARGS)
else
	$(VPY) -m topology.run $(RUN_ARGS)
endif

stop:
	$(PY) -m topology.stop
	$(VPY) -m topology.tier down

bench: $(VPY)
	$(VPY) -m bench.experiments.run --profile $(if $(FULL),full,quick)

bench-report: $(VPY)
	$(VPY) -m bench.experiments.report

bench-ab: $(VPY)
	$(VPY) -m bench.apachebench $(if $(QUICK),--quick,)
	$(VPY) -m bench.controller $(if $(QUICK),--vips 10 --trials 5,)

# Each BUILDS word is NAME=PATH to a simple_switch_grpc. Default: the one on PATH as "standard",
# and beside it the speed build where the source route put it (P4LB_BMV2_SPEED=1 make deps).
SPEED_SWITCH ?= /opt/p4lb/bmv2-speed/bin/simple_switch_grpc
STANDARD_SWITCH := $(shell command -v simple_switch_grpc 2>/dev/null)
BUILDS ?= $(if $(and $(STANDARD_SWITCH),$(wildcard $(SPEED_SWITCH))),standard=$(STANDARD_SWITCH) speed=$(SPEED_SWITCH),)
bench-switch: $(VPY)
	$(VPY) -m bench.switch $(foreach b,$(BUILDS),--build $(b)) \
		$(if $(ALGORITHMS),--algorithms $(ALGORITHMS),) \
		$(if $(QUICK),--reps 1 --flows 300 --latency-rounds 50 --live 1000 --vips 1 --backends 3,)
	$(VPY) -m bench.ab_overhead $(foreach b,$(BUILDS),--build $(b)) $(if $(QUICK),--reps 1 -n 500,)
	$(if $(BUILDS),$(foreach b,$(BUILDS),$(VPY) -m bench.flood --name $(firstword $(subst =, ,$(b))) --binary $(lastword $(subst =, ,$(b))) $(if $(QUICK),--reps 1 --syns 5000,);),$(VPY) -m bench.flood $(if $(QUICK),--reps 1 --syns 5000,))
	$(VPY) -m bench.report

bench-tier: $(VPY)
	$(VPY) -m bench.tier $(if $(QUICK),--reps 1 --seconds 3,)
	$(VPY) -m bench.cookie $(foreach b,$(BUILDS),--build $(b)) $(if $(QUICK),--reps 1 --flows 20,)

bench-choices: $(VPY)
	$(VPY) -m bench.choices $(foreach b,$(BUILDS),--build $(b)) $(if $(QUICK),--reps 1 --flows 20 --out build/results-quick,)

bench-qos: $(VPY)
	$(VPY) -m bench.qos $(if $(QUICK),--reps 1 --duration 10 --label quick --out results/qos/quick,)

bench-floor: $(VPY)
	$(VPY) -m bench.floor $(foreach b,$(BUILDS),--build $(b)) $(if $(QUICK),--reps 1 --no-timed,)
	$(VPY) -m bench.report

clean:
	rm -rf $(BUILD) .pytest_cache .mypy_cache .ruff_cache

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

.PHONY: help deps venv build artifacts run stop tier-restart tier-router-down tier-router-up tier-add tier-remove test test-unit lint bench bench-report bench-ab bench-switch bench-floor bench-peers bench-cost bench-tier bench-tier-ha bench-choices bench-dsr bench-restore-peer bench-qos results readme-figures shell clean

help:
	@echo "p4lb make targets:"
	@echo "  deps       install everything (p4c + BMv2: packages, else built from source; Mininet, ab,"
	@echo "             FRR + GoBGP for the tier, k6, Python venv, /usr/local/bin/p4lb;"
	@echo "             P4LB_FROM_SOURCE=1 forces the source route)"
	@echo "  venv       create $(VENV) with the p4lb package and test tools"
	@echo "  build      compile p4src/lb.p4 (and the baseline, p4src/bench/) into $(BUILD)/"
	@echo "  artifacts  build, then refresh $(COMPILED)/ (P4Info, BMv2 JSON, source stamp)"
	@echo "  run        start the Mininet topology + BMv2 + controller, open the CLI (needs root)"
	@echo "             (TOPO=tier BALANCERS=3: the tier, balancers behind FRR, BGP and ECMP;"
	@echo "             RUN_ARGS=--detach with it: start, print the banner and return;"
	@echo "             MODE=dsr: the VIP in direct server return, replies beside the switch;"
	@echo "             ROUTERS=2 with TOPO=tier: a router pair in front and on the return path;"
	@echo "             HA=1 with TOPO=tier: the router pair and a standby controller together;"
	@echo "             RUN_ARGS=--standby-controller: a standby p4lb run beside the controller)"
	@echo "  stop       stop everything 'make run' started (by PID), the lab and the tier, and"
	@echo "             remove its interfaces (needs root)"
	@echo "  tier-restart  LB=lb2: restart a running tier's balancer, its switch and speaker"
	@echo "             (WHAT=--speaker: the speaker only); tier-add: one more balancer;"
	@echo "             tier-remove LB=lb4: withdraw one, then stop and remove it (needs root)"
	@echo "  tier-router-down  ROUTER=r0 (ROUTERS=2): a router of the pair dies (its daemons"
	@echo "             killed, its links down); tier-router-up ROUTER=r0 brings it back"
	@echo "  test       lint + the whole test suite; as root (sudo make test) every layer runs,"
	@echo "             the last line names the layers skipped and why"
	@echo "  results    every figure of results/ on this tree, then README tables and plots from the"
	@echo "             files (PROFILE=quick, the default: into $(SCRATCH); PROFILE=full: into results/;"
	@echo "             RESULTS_DIR=DIR: there; PEER_P4=path: with the peer's cost; FROM=STEP: resume;"
	@echo "             steps whose tools are missing are skipped and named). make readme-figures:"
	@echo "             only the README regions"
	@echo "  bench      the experiment suite: quick profile; FULL=1 the whole matrix;"
	@echo "             RESUME=1 continues a stopped run (Ctrl-C stops one, finished runs are kept);"
	@echo "             results/experiments/ + results/README.md (report only: make bench-report)"
	@echo "  bench-ab   ApacheBench runs for every algorithm + controller speed (QUICK=1: smoke run)"
	@echo "  bench-switch  lb.p4 vs plain forwarding per BMv2 build: the switch alone, then ab end to end"
	@echo "             (BUILDS='standard=/path/simple_switch_grpc fast=/path/...'; QUICK=1;"
	@echo "             ALGORITHMS='iphash wrr ...', default every algorithm of the program)"
	@echo "  bench-floor  the least a stateful NAT load balancer costs on each build"
	@echo "             (p4src/bench/floor.p4), beside plain forwarding and lb.p4's WRR (BUILDS as"
	@echo "             above; QUICK=1; needs p4c)"
	@echo "  bench-peers  lb.p4 (WRR, IP hash) beside a public stateful NAT balancer (PEER_P4=path to"
	@echo "             its l4_loadbalancer.p4, fetched by you; published and log-free), the baseline"
	@echo "             and the floor: instructions per packet, client-direction TCP (BUILDS as above)"
	@echo "  bench-cost the same programs' instructions per path and BMv2 phase (callgrind inclusive"
	@echo "             costs): results/switch/cost_breakdown.json"
	@echo "  bench-tier the tier (TOPO=tier): req/s and switch CPU with 1-3 balancers, failover"
	@echo "             figures per event kind; then what sharing costs per packet (instructions, per"
	@echo "             build as BUILDS); results/tier/ (QUICK=1: one short repetition)"
	@echo "  bench-tier-ha  the failover with a router pair and a standby controller (HA=1): a"
	@echo "             router or the primary controller dies too; results/tier/ha.json"
	@echo "  bench-dsr  switch CPU per request and the peak request rate without failures, NAT"
	@echo "             vs direct server return, 1 KB and 100 KB responses, single switch and"
	@echo "             the tier, per build (BUILDS as above; QUICK=1); results/dsr/"
	@echo "  bench-choices  what a new connection costs with leastconn comparing every backend vs two,"
	@echo "             at 3, 8, 16 backends (instructions per SYN, per build); results/algorithms/"
	@echo "  bench-restore-peer  the leastconn restore scenario on HAProxy (needs haproxy, root)"
	@echo "  bench-qos  queueing disciplines on a 1,000 packets/s port: VoIP delay, jitter,"
	@echo "             loss, goodput + Jain, TIPHON grades; results/qos/ (QUICK=1: 1 x 10 s, into the scratch tree)"
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

# The baseline (a benchmark program, p4src/bench/) shares lb.p4's size.p4 and defines.p4 and
# uses few of their constants: unused ones are expected there.
$(BUILD)/lb.json: $(P4_SOURCES)
	@command -v $(P4C) >/dev/null || { echo "make build: $(P4C) (p4c >= $(P4LB_MIN_P4C)) is not installed (run 'make deps' or use the VM)"; exit 1; }
	@v=$$($(P4C) --version 2>&1 | grep -Eo '[0-9]+(\.[0-9]+)+' | head -1); \
	if [ "$$(printf '%s\n%s\n' "$(P4LB_MIN_P4C)" "$$v" | sort -V | head -1)" != "$(P4LB_MIN_P4C)" ]; then \
		echo "make build: $(P4C) is p4c $${v:-of an unknown version}; p4lb needs p4c >= $(P4LB_MIN_P4C) (run 'make deps')"; exit 1; fi; \
	echo "make build: $(P4C) is p4c $$v (p4lb needs >= $(P4LB_MIN_P4C))"
	mkdir -p $(BUILD)
	$(P4C) $(P4C_FLAGS) -o $(BUILD)/lb.json --p4runtime-files $(BUILD)/lb.p4info.txtpb $(P4SRC)/lb.p4
	$(P4C) $(P4C_FLAGS) --Wdisable=unused -o $(BUILD)/baseline.json --p4runtime-files $(BUILD)/baseline.p4info.txtpb $(P4SRC)/bench/baseline.p4

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

test: $(VPY)
	@[ "$$(id -u)" -eq 0 ] || echo "make test: not root: the dataplane and e2e layers will be skipped (sudo make test runs them)"
	@$(MAKE) --no-print-directory lint
	$(VPY) -m pytest tests

test-unit: $(VPY)
	$(VPY) -m pytest tests/unit

# TOPO=tier: a tier of balancers behind FRR and ECMP (topology/tier.py; BALANCERS=3);
# TOPO=scaleout, its former name, still works. RUN_ARGS=--detach: the tier runs on in the
# background after the banner (`sudo make stop` stops it). MODE=dsr: the VIP in direct
# server return, with the return path beside the switch (topology/net.py), or in the tier
# past the balancers (topology/tier_plan.py). ROUTERS=2 (the tier): a router pair in front
# and on the return path, each pair sharing its gateway addresses by VRRP. HA=1 (the tier):
# no single point of failure, the router pair and a standby controller together.
TOPO ?=
BALANCERS ?= 3
MODE ?=
ROUTERS ?=
HA ?=
run: $(VPY)
	@$(MAKE) --no-print-directory -s build >/dev/null 2>&1 || true
ifneq ($(filter $(TOPO),tier scaleout),)
	$(VPY) -m topology.tier run --balancers $(BALANCERS) $(if $(MODE),--mode $(MODE),) $(if $(ROUTERS),--routers $(ROUTERS),) $(if $(HA),--ha,) $(RUN_ARGS)
else
	$(VPY) -m topology.run $(if $(MODE),--mode $(MODE),) $(RUN_ARGS)
endif

# The single-switch lab and the tier, whichever runs, and the pointer /run/p4lb/config.
# Root is checked here too, before a Python the user may not be able to run (topology.stop
# says the same when run directly).
stop:
	@[ "$$(id -u)" -eq 0 ] || { echo "make stop: needs root: sudo make stop" >&2; exit 1; }
	@$(VPY) -m topology.stop

# The operator's verbs on a running tier (topology/tier_ops.py); `make stop` stops what they start.
LB ?=
WHAT ?=
tier-restart: $(VPY)
	@test -n "$(LB)" || { echo "make tier-restart: which balancer? LB=lb2"; exit 2; }
	@$(VPY) -m topology.tier restart $(LB) $(WHAT)

tier-router-down tier-router-up: $(VPY)
	@test -n "$(ROUTER)" || { echo "make $@: which router? ROUTER=r0 (r0, r0b, r1, r1b)"; exit 2; }
	@$(VPY) -m topology.tier $(patsubst tier-%,%,$@) $(ROUTER)

tier-add: $(VPY)
	@$(VPY) -m topology.tier add

tier-remove: $(VPY)
	@test -n "$(LB)" || { echo "make tier-remove: which balancer? LB=lb4"; exit 2; }
	@$(VPY) -m topology.tier remove $(LB)

# Where benchmarks write (issue 33): a quick or partial run never overwrites the committed
# figures. QUICK=1 (and PROFILE=quick) write into $(SCRATCH), laid out like results/;
# RESULTS_DIR=results (or any directory) says where explicitly. The benches route a run whose
# arguments are not the committed profile to the scratch tree by themselves too.
SCRATCH := build/results-quick
PROFILE ?= quick
RESULTS_DIR ?=
OUTDIR = $(or $(RESULTS_DIR),$(if $(QUICK),$(SCRATCH),results))
RUN_BENCH = P4LB_RESULTS_DIR=$(OUTDIR) $(VPY)
# QUICK=1: each bench's quick profile (its arguments are listed once, in bench/profiles.py).
QUICK_ARGS = $(if $(QUICK),--profile quick,)

bench: $(VPY)
	P4LB_RESULTS_DIR=$(or $(RESULTS_DIR),$(if $(FULL),results,$(SCRATCH))) \
		$(VPY) -m bench.experiments.run --profile $(if $(FULL),full,quick) $(if $(RESUME),--resume,)

bench-report: $(VPY)
	$(VPY) -m bench.experiments.report --out $(OUTDIR)/experiments
	$(VPY) -m bench.readme_figures --results $(OUTDIR)

bench-ab: $(VPY)
	$(RUN_BENCH) -m bench.apachebench $(if $(QUICK),--quick --out $(OUTDIR),)
	$(RUN_BENCH) -m bench.controller $(QUICK_ARGS)

# Each BUILDS word is NAME=PATH to a simple_switch_grpc. Default: the one on PATH as "standard",
# and beside it the speed build (no logging macros), found where the source route puts it
# (P4LB_BMV2_SPEED=1 make deps: /opt/p4lb/bmv2-speed) or in the other usual prefixes.
SPEED_CANDIDATES := $(P4LB_SPEED_PREFIX) /opt/p4lb/bmv2-speed /usr/local/bmv2-speed /usr/local/bmv2-fast /opt/bmv2-speed
SPEED_SWITCH ?= $(firstword $(wildcard $(addsuffix /bin/simple_switch_grpc,$(SPEED_CANDIDATES))))
STANDARD_SWITCH := $(shell command -v simple_switch_grpc 2>/dev/null)
BUILDS ?= $(if $(STANDARD_SWITCH),standard=$(STANDARD_SWITCH),) $(if $(SPEED_SWITCH),speed=$(SPEED_SWITCH),)
bench-switch: $(VPY)
	@echo "bench-switch: builds $(or $(strip $(BUILDS)),none found); output into $(OUTDIR)/switch"
	$(RUN_BENCH) -m bench.switch $(foreach b,$(BUILDS),--build $(b)) \
		$(if $(ALGORITHMS),--algorithms $(ALGORITHMS),) $(QUICK_ARGS)
	$(RUN_BENCH) -m bench.ab_overhead $(foreach b,$(BUILDS),--build $(b)) $(QUICK_ARGS)
	$(RUN_BENCH) -m bench.flood $(foreach b,$(BUILDS),--build $(b)) $(QUICK_ARGS)
	$(VPY) -m bench.report --dir $(OUTDIR)/switch

bench-tier: $(VPY)
	$(RUN_BENCH) -m bench.tier $(QUICK_ARGS)
	$(RUN_BENCH) -m bench.cookie $(foreach b,$(BUILDS),--build $(b)) $(QUICK_ARGS)

bench-tier-ha: $(VPY)
	$(RUN_BENCH) -m bench.tier --ha $(QUICK_ARGS)

bench-choices: $(VPY)
	$(RUN_BENCH) -m bench.choices $(foreach b,$(BUILDS),--build $(b)) $(QUICK_ARGS)

bench-dsr: $(VPY)
	$(RUN_BENCH) -m bench.dsr $(foreach b,$(BUILDS),--build $(b)) $(QUICK_ARGS)

bench-restore-peer: $(VPY)
	$(RUN_BENCH) -m bench.restore_peer $(QUICK_ARGS)

bench-qos: $(VPY)
	$(VPY) -m bench.qos $(QUICK_ARGS) --out $(OUTDIR)/qos$(if $(QUICK),/quick,)

bench-floor: $(VPY)
	$(RUN_BENCH) -m bench.floor $(foreach b,$(BUILDS),--build $(b)) $(QUICK_ARGS)
	$(VPY) -m bench.report --dir $(OUTDIR)/switch

# `make results`: every figure of results/ on this tree, in order, then the tables, plots and
# README regions from the files written (bench/results.py prints the plan; DRY_RUN=1 only that).
results: $(VPY)
	$(VPY) -m bench.results --profile $(PROFILE) $(if $(RESULTS_DIR),--results-dir $(RESULTS_DIR),) \
		$(foreach b,$(BUILDS),--build $(b)) $(PEER_ARGS) $(if $(FROM),--from "$(FROM)",) \
		$(if $(DRY_RUN),--dry-run,)

readme-figures: $(VPY)
	$(VPY) -m bench.readme_figures --results $(or $(RESULTS_DIR),results)

# PEER_P4: the peer's source, fetched by whoever runs the bench (never committed).
PEER_P4 ?=
PEER_ARGS = $(if $(PEER_P4),--peer $(PEER_P4),)
bench-peers: $(VPY)
	$(RUN_BENCH) -m bench.peers $(foreach b,$(BUILDS),--build $(b)) $(PEER_ARGS) $(QUICK_ARGS)

bench-cost: $(VPY)
	$(RUN_BENCH) -m bench.peers --breakdown $(foreach b,$(BUILDS),--build $(b)) $(PEER_ARGS) $(QUICK_ARGS)

clean:
	rm -rf $(BUILD) .pytest_cache .mypy_cache .ruff_cache

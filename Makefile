# converge — build, test and lint entry points.
#
# `make` alone prints the targets. CI runs .ci/run, which runs `make test`.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

GO ?= go
# Builds from a tarball or a worktree without .git must not fail on VCS
# stamping; keep any GOFLAGS the caller already set.
GOFLAGS ?= -buildvcs=false
export GOFLAGS

PKGS ?= ./...
# bench/ is a module of its own (bench/go.mod): client-go and controller-runtime
# are its dependencies, not the library's. test and lint run these packages of
# it, in it; BENCH_PKGS= (empty) leaves it out.
BENCH_MOD := bench
BENCH_PKGS ?= ./...
# kube/ (the Kubernetes backend) is a module of its own too, so that the
# library's go.mod requires no k8s.io module; its tests run against the
# kube-apiserver that scripts/servers.sh builds and starts. KUBE_PKGS=
# (empty) leaves it out.
KUBE_MOD := kube
KUBE_PKGS ?= ./...

# --- test -------------------------------------------------------------------
#
# `make test` starts the integration servers with scripts/servers.sh (installing
# etcd and PostgreSQL with apt-get if they are missing, building a real
# kube-apiserver into .bin/ once, and Chromium for the
# debug pages' browser test, internal/browsertest: not a server, only its path
# in CONVERGE_CHROMIUM), stops them on exit whatever happens (the
# trap keeps go test's exit code), and runs go test with their addresses in the
# environment (CONVERGE_ETCD_ENDPOINTS, CONVERGE_ETCD_CLUSTER_ENDPOINTS, ...;
# see the script's header). servers.sh prints only to stderr and `stop` prints
# nothing, so go test's ok/FAIL lines stay the last ones.
#
# TEST_ENV is the environment `go test` runs in. CONVERGE_INTEGRATION=1 makes a
# missing integration server (etcd, PostgreSQL) or browser a failure instead of a skip.
# To run one package against the servers by hand:
#
#	scripts/servers.sh start; eval "`scripts/servers.sh env`"
#	CONVERGE_INTEGRATION=1 go test -race ./informer/etcdstore/
#	scripts/servers.sh stop
#
# The packages that use the servers run one at a time (-p 1), after the rest
# (which run in parallel): some of their tests kill and restart the shared
# servers, which must not happen under another package's test; and tests
# that time leases on them must not run under one that does. The bench
# module's tests (bench/report's parser, the scenarios' smoke tests; no
# benchmark, as go test runs none without -bench) run in between, in their
# own module.
SERVERS := bash scripts/servers.sh
TEST_ENV ?= CONVERGE_INTEGRATION=1
TEST_FLAGS ?= -race -count=1 -timeout 12m
SERVER_PKGS := ./informer/etcdstore/... ./informer/pgstore/... ./leader/etcdlock/... ./leader/pglock/... ./internal/chaos/... ./reconcile/internal/failover/... ./internal/testserver/... ./internal/e2e/... ./internal/shardchaos/...
SERVER_PKG_PATTERN := /(informer/etcdstore|informer/pgstore|leader/etcdlock|leader/pglock|internal/chaos|reconcile/internal/failover|internal/testserver|internal/e2e|internal/shardchaos)(/|$$)

# --- bench ------------------------------------------------------------------
# Passed to bench/report in its environment. The report goes to stdout and
# bench/out/queue.md, go test's output to bench/out/bench.txt, and the charts
# of the medians to docs/images/bench-*.svg, which the README shows (redraw
# them from a saved run: go -C bench run ./report -from out/bench.txt).
BENCH_COUNT ?= 3

# --- lint -------------------------------------------------------------------
# staticcheck 2026.2.2 is module version v0.8.2 (built with and for Go 1.26).
# The binary's name carries the version, so bumping the pin reinstalls it.
STATICCHECK_VERSION := v0.8.2
BIN := $(CURDIR)/.bin
STATICCHECK := $(BIN)/staticcheck-$(STATICCHECK_VERSION)
# internal/mdcheck is a module of its own (its Markdown parser is no
# dependency of the library): its test renders every *.md of the repository
# with a CommonMark parser and fails on a code fence left open or closed with
# text after it, and on a relative link or #anchor that leads nowhere.
MDCHECK_MOD := internal/mdcheck

.PHONY: help test bench lint demo cluster-demo

help: ## List the targets.
	@echo 'usage: make <target>'
	@echo
	@awk 'BEGIN {FS = ":.*## "} /^[a-z][a-zA-Z0-9_-]*:.*## / {printf "  %-8s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

test: ## Start etcd, PostgreSQL and a kube-apiserver (installing or building them and Chromium if missing), run all tests with -race, integration tests required.
	trap '$(SERVERS) stop' EXIT; \
	$(SERVERS) start; \
	eval "$$($(SERVERS) env)"; \
	$(TEST_ENV) $(GO) test $(TEST_FLAGS) $$($(GO) list $(PKGS) | grep -Ev '$(SERVER_PKG_PATTERN)'); \
	$(if $(BENCH_PKGS),$(TEST_ENV) $(GO) -C $(BENCH_MOD) test $(TEST_FLAGS) $(BENCH_PKGS);) \
	$(if $(KUBE_PKGS),$(TEST_ENV) $(GO) -C $(KUBE_MOD) test $(TEST_FLAGS) $(KUBE_PKGS);) \
	$(TEST_ENV) $(GO) test $(TEST_FLAGS) -p 1 $(SERVER_PKGS)

bench: ## Start etcd and PostgreSQL, run the benchmarks (client-go/controller-runtime, memstore, etcdstore, pgstore), print the table, write it with the machine and date into docs/benchmarks.md (between its bench:begin/end markers) and a few of its rows into README.md (between bench:headline:begin/end), draw docs/images/bench-*.svg (BENCH_COUNT=3).
	trap '$(SERVERS) stop' EXIT; \
	$(SERVERS) start; \
	eval "$$($(SERVERS) env)"; \
	$(TEST_ENV) BENCH_COUNT=$(BENCH_COUNT) $(GO) -C $(BENCH_MOD) run ./report

lint: $(STATICCHECK) ## gofmt (must list nothing), go vet and staticcheck on all packages of every module; the Markdown check.
	@echo 'gofmt -l'
	@unformatted="$$(find . -mindepth 1 \( -name '.*' -o -name '_*' -o -name testdata -o -name vendor \) -prune -o \
		-type f -name '*.go' -print0 | xargs -0 -r gofmt -l)"; \
	if [ -n "$$unformatted" ]; then \
		echo 'these files need gofmt -w:' >&2; echo "$$unformatted" >&2; exit 1; \
	fi
	$(GO) vet $(PKGS)
	$(STATICCHECK) $(PKGS)
	$(if $(BENCH_PKGS),$(GO) -C $(BENCH_MOD) vet $(BENCH_PKGS))
	$(if $(BENCH_PKGS),cd $(BENCH_MOD) && $(STATICCHECK) $(BENCH_PKGS))
	$(if $(KUBE_PKGS),$(GO) -C $(KUBE_MOD) vet $(KUBE_PKGS))
	$(if $(KUBE_PKGS),cd $(KUBE_MOD) && $(STATICCHECK) $(KUBE_PKGS))
	$(GO) -C $(MDCHECK_MOD) vet ./...
	cd $(MDCHECK_MOD) && $(STATICCHECK) ./...
	$(GO) -C $(MDCHECK_MOD) test -count=1 ./...

demo: ## Run the self-healing ReplicaSet demo (examples/replicaset): real processes, kill -9, scale, crash loop, delete.
	$(GO) run ./examples/replicaset demo

cluster-demo: ## Run the cluster demo (examples/cluster): agents join, a Deployment spread, a node killed and its pods replaced, a rolling and a broken rollout, undo, a thundering herd, foreground, background and orphan deletes.
	$(GO) run ./examples/cluster demo

$(STATICCHECK):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv $(BIN)/staticcheck $@

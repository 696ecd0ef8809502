# toolcrib — common tasks. `make help` lists them.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

# Tools are pinned in tools/go.mod and run through `go tool`; the tools
# module stays out of the workspace so its dependencies do not mix with ours.
TOOL := GOWORK=off go -C tools tool
MODULES = $(shell go list -m -f '{{.Dir}}')
GO_TEST_FLAGS ?= -race -count=1

.PHONY: help generate lint test run bench bench-discovery bench-admission bench-lease
help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 18

generate: ## regenerate gen/ from proto/ with buf and the pinned local plugins
	rm -rf gen/toolcrib
	buf=$$($(TOOL) -n buf) && GOWORK=off $$buf generate

lint: ## gofmt, go vet and go mod tidy (every module), buf lint, buf format
	@out=$$(git ls-files --cached --others --exclude-standard '*.go' | { grep -v '^gen/' || true; } | xargs -r gofmt -l); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	for m in $(MODULES); do (cd $$m && go vet ./... && GOWORK=off go mod tidy -diff >/dev/null \
	  || { echo "$$m: go vet failed or go.mod is not tidy (GOWORK=off go mod tidy -diff)"; exit 1; }); done
	buf=$$($(TOOL) -n buf) && $$buf lint && $$buf format -d --exit-code

test: ## run every module's tests with -race (needs Postgres and Redis)
	for m in $(MODULES); do echo "== $$m"; (cd $$m && go test $(GO_TEST_FLAGS) ./...); done

run: ## start every implemented service against local Postgres and Redis
	go run ./cli/cmd/toolcrib dev up

bench: bench-discovery bench-admission bench-lease ## run every benchmark (speed targets of DESIGN §9)

bench-discovery: ## crawl+validate+commit 800 servers/5,000 tools and 1 server/100,000 tools; one line per case with the floor (bare go-sdk client) and the ratio; TOOLCRIB_BENCH_PROFILE=dir writes CPU profiles
	@log=$$(mktemp); \
	  if ! (cd e2e && TOOLCRIB_BENCH=1 go test -count=1 -run '^TestDiscoveryScale$$' -v -timeout 20m ./bench/) > $$log 2>&1; then \
	    cat $$log; rm -f $$log; exit 1; fi; \
	  grep -E '^(discovery:|  \()' $$log; rm -f $$log

bench-admission: ## cached Check vs grpc.health.v1 Health/Check at 1, 16 and 64 in flight; Check on an L1 miss vs bare Redis GET and Postgres SELECT; tool search recall@5 on 5,000 tools; TOOLCRIB_BENCH_PROFILE=dir writes the CPU profile of the cached Check
	@log=$$(mktemp); \
	  if ! { (cd services/admission && TOOLCRIB_BENCH=1 go test -count=1 -run '^TestBenchAdmission$$' -v -timeout 10m ./admissiontest/) \
	    && (cd services/admission && go test -count=1 -run '^TestRecallAt5$$' -v ./internal/search/); } > $$log 2>&1; then \
	    cat $$log; rm -f $$log; exit 1; fi; \
	  grep -E '^(admission|search):' $$log; rm -f $$log

bench-lease: ## Issue (by admission receipt) and Verify through the real registry, discovery, admission and lease, against the lease health Check; one line
	@log=$$(mktemp); \
	  if ! (cd e2e && TOOLCRIB_BENCH=1 go test -count=1 -run '^TestLeaseThroughput$$' -v -timeout 10m ./bench/) > $$log 2>&1; then \
	    cat $$log; rm -f $$log; exit 1; fi; \
	  grep -E '^(lease:|  \()' $$log; rm -f $$log

# The fault suites in full: every test of e2e/faults with FAULT_ROUNDS
# randomized rounds and the pointer-CAS linearizability check, then every
# test of e2e/admission with ADMISSION_ROUNDS randomized decision rounds,
# each recording its counters in a temporary directory; the last two lines
# are the summaries (faultsummary fails on a violation or a counter nobody
# recorded).
FAULT_ROUNDS ?= 100000
FAULT_CAS_ROUNDS ?= 300
ADMISSION_ROUNDS ?= 100000
.PHONY: faults
faults: ## the discovery and admission fault suites: 100,000 randomized rounds each, named faults, CAS check; one summary line each
	@dir=$$(mktemp -d); trap 'rm -rf "$$dir"' EXIT; \
	  export TOOLCRIB_FAULTS_DIR="$$dir" TOOLCRIB_FAULT_ROUNDS=$(FAULT_ROUNDS) TOOLCRIB_FAULT_CAS_ROUNDS=$(FAULT_CAS_ROUNDS); \
	  go test -count=1 -timeout 60m ./e2e/faults/; \
	  go test -count=1 -run '^TestPointer' ./services/discovery/internal/store/; \
	  TOOLCRIB_ADMISSION_ROUNDS=$(ADMISSION_ROUNDS) go test -count=1 -timeout 30m ./e2e/admission/; \
	  go run ./e2e/cmd/faultsummary "$$dir"

# toolcrib — common tasks. `make help` lists them.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

# Tools are pinned in tools/go.mod and run through `go tool`; the tools
# module stays out of the workspace so its dependencies do not mix with ours
# (tools/k8sschemas and tools/k8scheck, the manifest checks, live there for
# the same reason).
TOOL := GOWORK=off go -C tools tool
MODULES = $(shell go list -m -f '{{.Dir}}')
GO_TEST_FLAGS ?= -race -count=1

.PHONY: help generate docs cli-docs lint test run k8s-check drill bench bench-discovery bench-admission bench-lease bench-gateway bench-peers
help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 18

generate: ## regenerate gen/ (Go, gen/ts, gen/python) from proto/ with buf and the pinned local plugins
	@command -v protoc >/dev/null && command -v grpc_python_plugin >/dev/null || \
	  { echo "make generate needs the Debian packages protobuf-compiler and protobuf-compiler-grpc (apt-get install)"; exit 1; }
	[ -x tools/ts/node_modules/.bin/protoc-gen-es ] || npm ci --prefix tools/ts --no-audit --no-fund
	rm -rf gen/toolcrib gen/ts gen/python
	buf=$$($(TOOL) -n buf) && GOWORK=off $$buf generate

# The configuration tables in docs/config are generated from the flag sets
# the services parse (services/*/config.go); CI fails when they are stale.
docs: cli-docs ## regenerate the generated docs: docs/config/<service>.md (every flag of each service: name, env var, default, meaning) and docs/cli
	go run ./e2e/cmd/configdocs -out docs/config
cli-docs: ## regenerate docs/cli, the toolcrib command reference, from the commands (cobra's markdown generator)
	go run ./cli/cmd/toolcrib gen-docs docs/cli

lint: ## gofmt, go vet and go mod tidy (every module, tools/ too), buf lint, buf format
	@out=$$(git ls-files --cached --others --exclude-standard '*.go' | { grep -v '^gen/' || true; } | xargs -r gofmt -l); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	for m in $(MODULES); do (cd $$m && go vet ./... && GOWORK=off go mod tidy -diff >/dev/null \
	  || { echo "$$m: go vet failed or go.mod is not tidy (GOWORK=off go mod tidy -diff)"; exit 1; }); done
	cd tools && GOWORK=off go vet ./... && GOWORK=off go mod tidy -diff >/dev/null \
	  || { echo "tools: go vet failed or go.mod is not tidy (GOWORK=off go mod tidy -diff)"; exit 1; }
	buf=$$($(TOOL) -n buf) && $$buf lint && $$buf format -d --exit-code

test: ## run every module's tests with -race (needs Postgres and Redis; the console's browser test needs Debian's chromium and skips, saying so, without it)
	@# axe-core for the console's browser test (e2e/console), pinned in tools/console.
	[ -f tools/console/node_modules/axe-core/axe.min.js ] || npm ci --prefix tools/console --no-audit --no-fund --silent
	for m in $(MODULES); do echo "== $$m"; (cd $$m && go test $(GO_TEST_FLAGS) ./...); done
	@# 50 MB through every service takes minutes under -race, where it skips itself: here without it.
	cd e2e && go test -count=1 -run '^TestArtifact50MB$$' ./gateway/
	@# The console's browser test (real Chromium against the suite) skips itself under -race too.
	cd e2e && go test -count=1 -run '^TestConsoleReviewInChromium$$' ./console/

# The example MCP server runs beside `dev up` with -require-lease (its
# tools/call needs a lease from the lease service on 7104, verified with the
# dev service token dev up writes, over TLS with the dev CA and client
# certificate `dev certs` makes first); it stops when dev up does.
run: ## start every implemented service (the review console at https://127.0.0.1:7106, dev token sign-in) against local Postgres and Redis, and the example MCP server (127.0.0.1:7301, leases required)
	@bin=$$(mktemp -d); pid=; trap '[ -z "$$pid" ] || { kill $$pid || true; wait $$pid || true; } 2>/dev/null; rm -rf "$$bin"' EXIT; \
	  go build -o "$$bin/exampleserver" ./e2e/cmd/exampleserver && go build -o "$$bin/toolcrib" ./cli/cmd/toolcrib || exit 1; \
	  "$$bin/toolcrib" dev certs || exit 1; \
	  "$$bin/exampleserver" -require-lease & pid=$$!; \
	  echo "example MCP server: http://127.0.0.1:7301/mcp (admin 127.0.0.1:7302; tools/call only with a lease)"; \
	  "$$bin/toolcrib" dev up

# The seed-004 acceptance drill through the real services (e2e/drill). Each
# run keeps inputs.json, results.json, table.txt and the services' log in
# drill-out/<time>/; DRILL_INPUTS=drill-out/<time>/inputs.json reruns with
# the kept inputs.
DRILL_INPUTS ?=
drill: ## the seed-004 acceptance drill: two tenants, two tool versions, two admission replicas (one cut off), a disable; prints the table, fails on any failed case
	@dir=$(CURDIR)/drill-out/$$(date -u +%Y%m%dT%H%M%SZ); mkdir -p "$$dir"; \
	  inputs=$(if $(DRILL_INPUTS),$(abspath $(DRILL_INPUTS))); \
	  status=0; (cd e2e && TOOLCRIB_DRILL=1 TOOLCRIB_DRILL_DIR="$$dir" TOOLCRIB_DRILL_INPUTS="$$inputs" \
	    go test -count=1 -run '^TestSeed004Drill$$' -v -timeout 5m ./drill/) > "$$dir/drill.log" 2>&1 || status=$$?; \
	  if [ -f "$$dir/table.txt" ]; then cat "$$dir/table.txt"; fi; \
	  if [ $$status -ne 0 ]; then grep -E -- '--- FAIL|drill_test.go' "$$dir/drill.log" | head -20; echo "drill failed; log: $$dir/drill.log"; fi; \
	  exit $$status

# deploy/k8s: kustomize builds the base and the overlay; tools/k8scheck
# decodes every resource strictly into the official Go API types (and the
# Prometheus Operator's ServiceMonitor type, cert-manager's Certificate and
# Issuer); kubeconform -strict validates them against JSON schemas that
# tools/k8sschemas makes, in a temporary directory, from the OpenAPI spec of
# k8s.io/kubernetes, the ServiceMonitor CRD and cert-manager's CRDs (fetched
# with `go mod download`, cached in the module cache). Then the same kubeconform command must reject every
# resource of tools/k8sschemas/testdata/invalid.yaml.
KUBECONFORM_FLAGS = -strict -summary -schema-location "$$schemas/{{.ResourceKind}}{{.KindSuffix}}.json"
k8s-check: ## deploy/k8s: kustomize build of base and overlay, kubeconform -strict (schemas made from k8s.io/kubernetes, the ServiceMonitor CRD and cert-manager's CRDs), strict decode into the Go types; invalid manifests must fail
	@kz=$$($(TOOL) -n kustomize) && kc=$$($(TOOL) -n kubeconform) && \
	  schemas=$$(mktemp -d) && trap 'rm -rf "$$schemas"' EXIT && \
	  GOWORK=off go -C tools test ./k8sschemas/ && \
	  GOWORK=off go -C tools run ./k8sschemas -out "$$schemas" && \
	  for d in deploy/k8s/base deploy/k8s/overlays/example; do \
	    out=$$($$kz build $$d) || { echo "kustomize build $$d failed"; exit 1; }; \
	    printf '%s: ' "$$d"; GOWORK=off go -C tools run ./k8scheck <<<"$$out"; \
	    printf '%s: kubeconform: ' "$$d"; $$kc $(KUBECONFORM_FLAGS) <<<"$$out"; \
	  done; \
	  bad=tools/k8sschemas/testdata/invalid.yaml; n=$$(grep -c '^kind:' $$bad); \
	  if got=$$($$kc $(KUBECONFORM_FLAGS) <$$bad); then echo "kubeconform accepted $$bad"; exit 1; fi; \
	  want="Valid: 0, Invalid: $$n, Errors: 0, Skipped: 0"; \
	  if [[ "$$got" != *"$$want"* ]]; then echo "$$bad: want $$want, got:"; echo "$$got"; exit 1; fi; \
	  echo "$$bad: kubeconform rejects all $$n resources"

bench: bench-discovery bench-admission bench-lease bench-gateway ## run every benchmark (speed targets of DESIGN §9)

bench-discovery: ## crawl+validate+commit 800 servers/5,000 tools and 1 server/100,000 tools (and its second commit with the shadow comparison); one line per case with the floor (bare go-sdk client) and the ratio, and for 800 servers and for the large server the rules floor (every page and the closing re-check, tools digested, each snapshot committed with its pointer and change-log revision) and the ratio to it, and for 800 servers the recorded floor (the rules floor plus run rows, page records, source revision and page root, catalog receipts) the queued floor (the recorded floor plus a job per scan in a Postgres queue) and the checked floor (the queued floor plus the registry reads and first-use pin, raw tools, canonical digests and catalog checks); then 8,000 servers/50,000 tools with 1, 2 and 4 discovery processes (TOOLCRIB_BENCH_SCALEOUT=0 skips it); TOOLCRIB_BENCH_PROFILE=dir writes CPU profiles
	@log=$$(mktemp); \
	  if ! (cd e2e && TOOLCRIB_BENCH=1 go test -count=1 -run '^TestDiscoveryScale$$' -v -timeout 60m ./bench/) > $$log 2>&1; then \
	    cat $$log; rm -f $$log; exit 1; fi; \
	  grep -E '^(discovery:|  \()' $$log; rm -f $$log

bench-admission: ## cached Check vs its floor (the same server answering a CheckResponse of the same size through the same interceptors, no work), its signed floor (the floor plus one Ed25519 signature of a receipt's size), its stored floor (the signed floor plus the receipt queued on Check's receipts writer), its validated floor (the stored floor plus the arguments parsed, digested and validated against the tool's schema, which the rules require on every call) and grpc.health.v1 Health/Check at 1, 16 and 64 in flight; a Check admitted by a CEL condition vs the same Check without; Check on an L1 miss vs bare Redis GET and Postgres SELECT; revocation commit → last ALLOW on two replicas of the real services; tool search recall@5 on 5,000 tools; TOOLCRIB_BENCH_PROFILE=dir writes the CPU profile of the cached Check
	@log=$$(mktemp); \
	  if ! { (cd services/admission && TOOLCRIB_BENCH=1 go test -count=1 -run '^TestBenchAdmission$$' -v -timeout 10m ./admissiontest/) \
	    && (cd services/admission && TOOLCRIB_BENCH=1 go test -count=1 -run '^TestBenchAdmissionCondition$$' -v -timeout 10m ./admissiontest/) \
	    && (cd e2e && TOOLCRIB_BENCH=1 go test -count=1 -run '^TestBenchRevocation$$' -v -timeout 10m ./admission/) \
	    && (cd services/admission && go test -count=1 -run '^TestRecallAt5$$' -v ./internal/search/); } > $$log 2>&1; then \
	    cat $$log; rm -f $$log; exit 1; fi; \
	  grep -E '^((admission|revocation|search):|  \()' $$log; rm -f $$log

bench-lease: ## Issue (by signed admission receipt), Redeem (the executor kit's single use) and Verify through the real registry, discovery, admission and lease, each against its floor on the same lease server (the same RPC doing only the work its rules require; Issue's receipt floor commits the execution receipt the rules require, its first floor a 3-column row, printed beside it) and the health Check; one line, then the floors; TOOLCRIB_BENCH_PROFILE=dir writes CPU profiles
	@log=$$(mktemp); \
	  if ! (cd e2e && TOOLCRIB_BENCH=1 go test -count=1 -run '^TestLeaseThroughput$$' -v -timeout 10m ./bench/) > $$log 2>&1; then \
	    cat $$log; rm -f $$log; exit 1; fi; \
	  grep -E '^(lease:|  \()' $$log; rm -f $$log

bench-gateway: ## the same go-sdk client calling the same upstream tool directly and through the gateway (Check, lease, result policy) in one run: the overhead, the gateway's CPU per call, and the share of each step (check, issue, upstream, the rest); TOOLCRIB_BENCH_PROFILE=dir keeps the CPU profile
	@log=$$(mktemp); \
	  if ! (cd e2e && TOOLCRIB_BENCH=1 go test -count=1 -run '^TestGatewayOverhead$$' -v -timeout 10m ./bench/) > $$log 2>&1; then \
	    cat $$log; rm -f $$log; exit 1; fi; \
	  grep -E '^(gateway:|  \()' $$log; rm -f $$log

# The peers of bench-peers, built from the module proxy into a temporary
# folder (never the repository) at these versions. toolhive v0.55.1 to
# v0.63.0 need modules the proxy here does not serve (403); v0.47.0 builds.
PEER_OPA_VERSION ?= v1.22.4
PEER_VMCP_VERSION ?= v0.47.0
PEER_VMCP_TOOLCHAIN ?= go1.27.3

bench-peers: ## (not in CI) toolcrib beside its open peers, same client, arms interleaved: Check vs OPA (opa run --server, seed-004 rules + json.match_schema; an equivalence table must agree first) at 16 in flight, and the gateway vs ToolHive's vMCP in front of the same upstream (overhead p50, calls/s at 16 in flight), beside the gateway's floor (what the rules require of a gateway call); the peers are built into a temporary folder
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	  echo "building opa $(PEER_OPA_VERSION) and vmcp $(PEER_VMCP_VERSION) into $$tmp"; \
	  GOBIN=$$tmp go install github.com/open-policy-agent/opa@$(PEER_OPA_VERSION) || exit 1; \
	  GOBIN=$$tmp GOTOOLCHAIN=$(PEER_VMCP_TOOLCHAIN) go install github.com/stacklok/toolhive/cmd/vmcp@$(PEER_VMCP_VERSION) || exit 1; \
	  if ! (cd e2e && TOOLCRIB_PEER_OPA=$$tmp/opa TOOLCRIB_PEER_VMCP=$$tmp/vmcp go test -count=1 -run '^TestPeer(OPA|VMCP)$$' -v -timeout 20m ./bench/) > $$tmp/log 2>&1; then \
	    cat $$tmp/log; exit 1; fi; \
	  grep -E '^(peer:|  )' $$tmp/log

.PHONY: conformance
conformance: ## the official MCP conformance suite (server scenarios, npm) against the gateway fronting the go-sdk's conformance server; expected failures in e2e/conformance/expected-failures.yml
	cd e2e/conformance && npm ci --no-audit --no-fund >/dev/null
	@log=$$(mktemp); res=$$(mktemp -d); \
	  if ! (cd e2e && TOOLCRIB_CONFORMANCE=1 TOOLCRIB_CONFORMANCE_RESULTS=$$res go test -count=1 -run '^TestConformance$$' -v -timeout 15m ./conformance/) > $$log 2>&1; then \
	    cat $$log; echo "== $$res/proxy.log (each request through the token proxy)"; cat $$res/proxy.log 2>/dev/null; \
	    for f in $$res/goroutines-*.txt; do [ -f "$$f" ] && { echo "== $$f (taken when a scenario timed out)"; cat "$$f"; }; done; \
	    rm -rf $$log $$res; exit 1; fi; \
	  sed -n '/=== SUMMARY ===/,/Total:/p' $$log | head -80; rm -rf $$log $$res

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

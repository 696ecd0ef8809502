#!/usr/bin/env bash
# Runs the example hosts (examples/node, examples/python) against the real
# suite: it builds the CLI and the example MCP server, starts
# `toolcrib dev up` on a fresh Postgres database and Redis key prefix,
# registers and reviews the example server's inventory.shipment.status as the
# README's tour does, waits until admission shows it to a tenant-a reader,
# runs both examples as that reader, and stops everything. Everything speaks
# TLS: dev up makes the dev CA and certificates in the work directory, the
# CLI finds them there, and the examples get them from TOOLCRIB_TLS_CA_FILE,
# TOOLCRIB_TLS_CLIENT_CERT_FILE and TOOLCRIB_TLS_CLIENT_KEY_FILE (the
# services require a client certificate: mTLS).
#
#   examples/run-examples.sh [node|python]...   (default: both)
#
# Needs Postgres on 127.0.0.1:5432 (user postgres) and Redis on
# 127.0.0.1:6379; node/npm for the Node example, and /usr/bin/python3 with
# the Debian packages python3-grpcio and python3-protobuf for the Python one.
# The suite listens on ports of its own (base TOOLCRIB_EXAMPLES_PORT, default
# 17100: gRPC base+1..4, metrics base+2001..2004, example server base+201,
# base+202), so a `make run` going on the usual ports is left alone.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
which=("$@")
[ ${#which[@]} -gt 0 ] || which=(node python)

base=${TOOLCRIB_EXAMPLES_PORT:-17100}
for port in $((base + 1)) $((base + 2)) $((base + 3)) $((base + 4)) $((base + 2001)) $((base + 2002)) \
  $((base + 2003)) $((base + 2004)) $((base + 201)) $((base + 202)); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "run-examples: port $port is in use; set TOOLCRIB_EXAMPLES_PORT to another base" >&2; exit 1
  fi
done
i=1
for svc in REGISTRY DISCOVERY ADMISSION LEASE; do
  export "TOOLCRIB_${svc}_LISTEN=127.0.0.1:$((base + i))" "TOOLCRIB_${svc}_METRICS_LISTEN=127.0.0.1:$((base + 2000 + i))"
  export "TOOLCRIB_${svc}_ADDR=127.0.0.1:$((base + i))"   # where the services and the CLI find it
  i=$((i + 1))
done
mcp_listen=127.0.0.1:$((base + 201))
# dev up allows MCP servers on loopback port 7301 and 7310-7399 only; the
# example server listens on base+201 here.
export TOOLCRIB_EGRESS_ALLOW_LOOPBACK_PORTS=$((base + 201))

work=$(mktemp -d)
db="toolcrib_examples_$$"
pids=()
cleanup() {
  local rc=$?
  if [ $rc -ne 0 ] && [ -f "$work/suite.log" ]; then
    echo "--- suite log: warnings and errors (last 30)" >&2
    grep -E 'level=(WARN|ERROR)' "$work/suite.log" | tail -n 30 >&2 || true
  fi
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  dropdb -h 127.0.0.1 -U postgres --if-exists "$db" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "== building the CLI and the example MCP server"
(cd "$repo" && go build -o "$work/bin/toolcrib" ./cli/cmd/toolcrib && go build -o "$work/bin/exampleserver" ./e2e/cmd/exampleserver)
createdb -h 127.0.0.1 -U postgres "$db"
export TOOLCRIB_POSTGRES_URL="postgres://postgres@127.0.0.1:5432/$db?sslmode=disable"
export TOOLCRIB_REDIS_PREFIX="toolcrib-examples-$$:"
tc() { "$work/bin/toolcrib" "$@"; }
# retry runs a command until it succeeds, for at most $1 seconds.
retry() {
  local deadline=$((SECONDS + $1)); shift
  until "$@" >"$work/retry.out" 2>&1; do
    if [ $SECONDS -ge $deadline ]; then echo "run-examples: gave up on: $*" >&2; cat "$work/retry.out" >&2; return 1; fi
    sleep 0.5
  done
  cat "$work/retry.out"
}

echo "== starting the suite (toolcrib dev up) and the example MCP server"
cd "$work"
"$work/bin/toolcrib" dev up >"$work/suite.log" 2>&1 & pids+=($!)
"$work/bin/exampleserver" -listen "$mcp_listen" -admin-listen 127.0.0.1:$((base + 202)) >"$work/exampleserver.log" 2>&1 & pids+=($!)

echo "== waiting for every service's gRPC health to be SERVING (each migrates first)"
retry 90 tc health "$TOOLCRIB_REGISTRY_ADDR" "$TOOLCRIB_DISCOVERY_ADDR" "$TOOLCRIB_ADMISSION_ADDR" "$TOOLCRIB_LEASE_ADDR"

echo "== the suite speaks TLS only: a plaintext client is refused"
if tc --plaintext --timeout 5s health "$TOOLCRIB_ADMISSION_ADDR" >"$work/plaintext.out" 2>&1 || grep -q 'TLS is off' "$work/suite.log"; then
  echo "run-examples: the suite answered a plaintext client or runs without TLS" >&2; cat "$work/plaintext.out" >&2; exit 1
fi

echo "== registering and reviewing inventory.shipment.status (the README's tour; output in setup.log)"
# q runs a setup command with its output in setup.log, shown on failure.
q() { "$@" >>"$work/setup.log" 2>&1 || { echo "run-examples: failed: $*" >&2; cat "$work/setup.log" >&2; return 1; }; }
q retry 60 tc server register --owner tenant-a/group:inventory-team --url "http://$mcp_listen/mcp" \
  --trust first-party --revision-source server-provided inventory
q tc tenant put tenant-a
q tc audience put --server inventory= tenant-a.readers
q tc grant --group readers --scope inventory:read --audience tenant-a.readers tenant-a
q retry 60 tc discovery scan --wait inventory
# The registry takes the scanned tools in from discovery's Watch a moment later.
q retry 30 tc contract publish --effect read-only --scope inventory:read --authorization caller-and-tenant \
  inventory.shipment.status
digest=$(tc tool show inventory.shipment.status | awk '$1 == "approval" && $2 == "digest" && !d {d = $3} END {print d}')
echo "approval digest $digest"
q tc tool approve inventory.shipment.status "$digest"
q tc tool enable inventory.shipment.status
q tc dev holder-key   # .toolcrib/dev/holder-key.json, read by the Python example
tc dev token --sub example-host --tenant tenant-a --groups readers --ttl 10m >"$work/reader-token"
export TOOLCRIB_TOKEN_FILE="$work/reader-token"
export TOOLCRIB_TLS_CA_FILE="$work/.toolcrib/dev/ca.pem" TOOLCRIB_TLS_CLIENT_CERT_FILE="$work/.toolcrib/dev/client.pem" \
  TOOLCRIB_TLS_CLIENT_KEY_FILE="$work/.toolcrib/dev/client-key.pem"
echo "== waiting until admission shows the tool to a tenant-a reader"
visible() { tc --token "$(cat "$work/reader-token")" --json visible | grep '"inventory.shipment.status"' >/dev/null; }
retry 60 visible

status=0
for ex in "${which[@]}"; do
  echo "== example: $ex"
  case $ex in
    node)
      (cd "$repo/examples/node" && npm ci --no-audit --no-fund --silent && npx tsc -p . \
        && node dist/examples/node/main.js --tool inventory.shipment.status --args '{"shipment_id":"S-1"}') || status=1 ;;
    python)
      /usr/bin/python3 "$repo/examples/python/main.py" --tool inventory.shipment.status --args '{"shipment_id":"S-1"}' || status=1 ;;
    *) echo "run-examples: unknown example $ex (node, python)" >&2; status=1 ;;
  esac
done
exit $status

#!/usr/bin/env bash
# Runs the example hosts (examples/node, examples/python) against the real
# suite: it builds the CLI and the example MCP server, starts
# `toolcrib dev up` on a fresh Postgres database and Redis key prefix,
# registers and reviews the example server's inventory.shipment.status as the
# README's tour does, waits until admission shows it to a tenant-a reader,
# runs both examples as that reader, and stops everything.
#
#   examples/run-examples.sh [node|python]...   (default: both)
#
# Needs Postgres on 127.0.0.1:5432 (user postgres), Redis on 127.0.0.1:6379,
# the ports of `make run` free (7101-7104, 9101-9104) and 7301-7302 for the
# example server; node/npm for the Node example, and /usr/bin/python3 with
# the Debian packages python3-grpcio and python3-protobuf for the Python one.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
which=("$@")
[ ${#which[@]} -gt 0 ] || which=(node python)

for port in 7101 7102 7103 7104 9101 9102 9103 9104 7301 7302; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "run-examples: port $port is in use (is \`make run\` going?); stop it first" >&2; exit 1
  fi
done

work=$(mktemp -d)
db="toolcrib_examples_$$"
pids=()
cleanup() {
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
tc dev up >"$work/suite.log" 2>&1 & pids+=($!)
"$work/bin/exampleserver" >"$work/exampleserver.log" 2>&1 & pids+=($!)
trap 'echo "--- suite log (tail)"; tail -n 40 "$work/suite.log"; cleanup' ERR

echo "== registering and reviewing inventory.shipment.status (the README's tour; output in setup.log)"
{
retry 60 tc server register --owner tenant-a/group:inventory-team --url http://127.0.0.1:7301/mcp \
  --trust first-party --revision-source server-provided inventory
tc tenant put tenant-a
tc audience put --server inventory= tenant-a.readers
tc grant --group readers --scope inventory:read --audience tenant-a.readers tenant-a
retry 60 tc discovery scan --wait inventory
tc contract publish --effect read-only --scope inventory:read --authorization caller-and-tenant inventory.shipment.status
digest=$(tc tool show inventory.shipment.status | awk '$1 == "approval" && $2 == "digest" {print $3; exit}')
echo "approval digest $digest"
tc tool approve inventory.shipment.status "$digest"
tc tool enable inventory.shipment.status
} >"$work/setup.log" 2>&1 || { cat "$work/setup.log" >&2; exit 1; }

tc dev token --sub example-host --tenant tenant-a --groups readers --ttl 10m >"$work/reader-token"
export TOOLCRIB_TOKEN_FILE="$work/reader-token"
echo "== waiting until admission shows the tool to a tenant-a reader"
visible() { tc --token "$(cat "$work/reader-token")" --json visible | grep -q '"inventory.shipment.status"'; }
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

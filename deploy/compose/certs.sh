#!/bin/sh
# certs.sh: the compose deployment's private CA and certificates, made with
# openssl only (no network). docker-compose.yml runs it as the one-shot
# `certs` service; it also runs on any machine with openssl:
#
#   TLS_DIR=./tls ./certs.sh            # make what is missing or expiring
#   TLS_DIR=./tls ./certs.sh --renew    # reissue every leaf certificate now
#
# Layout under $TLS_DIR (default /tls), one directory per consumer, mounted
# read-only into that container only, so no container sees another's key
# and none sees the CA key:
#
#   ca/ca.key, ca/ca.crt          the CA (ECDSA P-256, 10 years); kept
#   trust/ca.crt                  the CA certificate alone (for the migrate
#                                 job and MCP clients on the host)
#   <service>/tls.crt, tls.key    registry discovery admission lease gateway console:
#   <service>/ca.crt              server and client certificate (mTLS), URI SAN
#                                 spiffe://$TRUST_DOMAIN/toolcrib/<service>,
#                                 DNS <service> and localhost, IP 127.0.0.1
#   redis/, postgres/             server certificates of the datastores
#   cli/                          a client certificate for the CLI on the host
#                                 (no SPIFFE ID: it never carries a service role)
#
# A leaf certificate is kept while it verifies against the CA and has more
# than $RENEW_DAYS days left, else reissued with a new key. Files are
# replaced by rename (a reader never sees half a file); the services re-read
# them within 60 s and serve the new certificate to new connections without
# a restart. Redis and Postgres read theirs at start: restart those two
# after a renewal.
set -eu

dir=${TLS_DIR:-/tls}
trust_domain=${TRUST_DOMAIN:-toolcrib.compose}
days=${CERT_DAYS:-30}
renew_days=${RENEW_DAYS:-10}
renew=false
case "${1:-}" in
--renew) renew=true ;;
"") ;;
*)
	echo "usage: certs.sh [--renew]" >&2
	exit 2
	;;
esac

umask 077
mkdir -p "$dir/ca"
chmod 0755 "$dir" # the CLI's directory is read by the host user; ca/ stays 0700
if [ ! -s "$dir/ca/ca.key" ] || [ ! -s "$dir/ca/ca.crt" ]; then
	openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 \
		-keyout "$dir/ca/ca.key.new" -out "$dir/ca/ca.crt.new" -days 3650 -sha256 \
		-subj "/CN=toolcrib compose CA" \
		-addext "basicConstraints=critical,CA:TRUE,pathlen:0" \
		-addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
	mv -f "$dir/ca/ca.key.new" "$dir/ca/ca.key"
	mv -f "$dir/ca/ca.crt.new" "$dir/ca/ca.crt"
	chmod 0644 "$dir/ca/ca.crt"
	echo "certs: made the CA $dir/ca/ca.crt"
fi
mkdir -p "$dir/trust"
chmod 0755 "$dir/trust"
cmp -s "$dir/ca/ca.crt" "$dir/trust/ca.crt" || install -m 0644 "$dir/ca/ca.crt" "$dir/trust/ca.crt"

# issue NAME OWNER USAGE SAN: the certificate of NAME in $dir/NAME, its key
# owned by OWNER (uid:gid of the process that reads it).
issue() {
	name=$1 owner=$2 usage=$3 san=$4
	out=$dir/$name
	mkdir -p "$out"
	chmod 0755 "$out"
	if ! $renew && [ -s "$out/tls.key" ] && [ -s "$out/tls.crt" ] &&
		openssl x509 -checkend $((renew_days * 86400)) -noout -in "$out/tls.crt" >/dev/null &&
		openssl verify -CAfile "$dir/ca/ca.crt" "$out/tls.crt" >/dev/null 2>&1; then
		# Still valid: only make sure the CA beside it is the current one.
		cmp -s "$dir/ca/ca.crt" "$out/ca.crt" || install -m 0644 "$dir/ca/ca.crt" "$out/ca.crt"
		return 0
	fi
	tmp=$(mktemp -d "$dir/.new-$name.XXXXXX")
	openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 \
		-keyout "$tmp/tls.key" -out "$tmp/tls.csr" -subj "/CN=$name" 2>/dev/null
	cat >"$tmp/ext" <<EOF
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=$usage
${san:+subjectAltName=$san}
EOF
	openssl x509 -req -in "$tmp/tls.csr" -CA "$dir/ca/ca.crt" -CAkey "$dir/ca/ca.key" \
		-set_serial "0x$(openssl rand -hex 16)" -days "$days" -sha256 \
		-extfile "$tmp/ext" -out "$tmp/tls.crt" 2>/dev/null
	install -m 0644 "$dir/ca/ca.crt" "$tmp/ca.crt"
	chmod 0644 "$tmp/tls.crt"
	chmod 0600 "$tmp/tls.key"
	chown "$owner" "$tmp/tls.key" 2>/dev/null || true
	# Same directory, so each mv is an atomic rename. The key goes first: a
	# reader that sees the new key with the old certificate finds the pair
	# mismatched, keeps its last good pair and loads the new one next time.
	mv -f "$tmp/ca.crt" "$out/ca.crt"
	mv -f "$tmp/tls.key" "$out/tls.key"
	mv -f "$tmp/tls.crt" "$out/tls.crt"
	rm -rf "$tmp"
	echo "certs: issued $out/tls.crt (${san:-no SAN}), valid $days days"
}

# The console's SPIFFE ID is in no TOOLCRIB_TLS_SERVICE_IDENTITIES list: its
# certificate passes mTLS but gives it no role (it calls with its users'
# tokens only).
for svc in registry discovery admission lease gateway console; do
	issue "$svc" 0:0 serverAuth,clientAuth \
		"URI:spiffe://$trust_domain/toolcrib/$svc,DNS:$svc,DNS:localhost,IP:127.0.0.1"
done
# The official redis and postgres images run their servers as uid 999;
# Postgres refuses a key readable by others.
issue redis 999:999 serverAuth "DNS:redis,DNS:localhost,IP:127.0.0.1"
issue postgres 999:999 serverAuth "DNS:postgres,DNS:localhost,IP:127.0.0.1"
issue cli 0:0 clientAuth ""
# The host user runs the CLI with these (the container runs as root).
chmod 0644 "$dir/cli/tls.key"

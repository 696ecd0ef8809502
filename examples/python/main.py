#!/usr/bin/python3
"""An example host runtime on the Python stubs in gen/python.

It lists the tools its principal may see, checks one call with admission and
takes an execution lease for it, printing each decision, over gRPC with
grpcio. Run it with Debian's /usr/bin/python3, which has the Debian packages
python3-grpcio and python3-protobuf the stubs were generated for:

  /usr/bin/python3 examples/python/main.py [--tool TOOL_ID] [--args JSON]
      [--expect REASON] [--audience AUD] [--holder-key FILE]

Environment: TOOLCRIB_ADMISSION_ADDR (127.0.0.1:7103), TOOLCRIB_LEASE_ADDR
(127.0.0.1:7104), and the principal's bearer token in TOOLCRIB_TOKEN or in
the file TOOLCRIB_TOKEN_FILE. It speaks TLS, trusting the CA in
TOOLCRIB_TLS_CA_FILE (default: the dev CA .toolcrib/dev/ca.pem, looked for
here and in every parent directory, as the CLI does) and presenting the
client certificate in TOOLCRIB_TLS_CLIENT_CERT_FILE and
TOOLCRIB_TLS_CLIENT_KEY_FILE (default: the dev client certificate beside the
CA), which the services require (mTLS); TOOLCRIB_PLAINTEXT=true calls them in
plaintext, for a suite started with `toolcrib dev up --plaintext`. The holder key is an Ed25519 private JWK as
`toolcrib dev holder-key` writes it (.toolcrib/dev/holder-key.json); only its
public half is sent. It exits 1 when the decision's reason is not --expect
(default ALLOW), or when the lease does not bind what was asked.
"""

import argparse
import base64
import hashlib
import json
import os
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "gen" / "python"))

import grpc  # noqa: E402

from toolcrib.admission.v1 import admission_pb2, admission_pb2_grpc  # noqa: E402
from toolcrib.catalog.v1 import catalog_pb2  # noqa: E402
from toolcrib.lease.v1 import lease_pb2, lease_pb2_grpc  # noqa: E402


def token():
    t = os.environ.get("TOOLCRIB_TOKEN", "").strip()
    if t:
        return t
    path = os.environ.get("TOOLCRIB_TOKEN_FILE", "")
    if path:
        return pathlib.Path(path).read_text().strip()
    raise SystemExit("set TOOLCRIB_TOKEN or TOOLCRIB_TOKEN_FILE to the principal's bearer token")


def canonical_json(value):
    """RFC 8785 (JCS) for arguments of strings, integers, booleans, null,
    arrays and objects with keys in the Basic Multilingual Plane: sorted keys,
    no whitespace, no ASCII escaping. (Floats and astral-plane keys need a
    full JCS implementation; admission's digest in the receipt is compared
    below, so a difference shows.)"""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def upward(rel):
    """The first of rel under the working directory and its parents that
    exists, or None."""
    d = pathlib.Path.cwd()
    for p in [d, *d.parents]:
        if (p / rel).exists():
            return p / rel
    return None


def read_tls_file(env, default, what):
    path = os.environ.get(env) or upward(default)
    if not path:
        raise SystemExit(f"no {what}: set {env}, run under the directory `toolcrib dev up` runs in, "
                         "or set TOOLCRIB_PLAINTEXT=true")
    return pathlib.Path(path).read_bytes()


def channel_credentials():
    """TLS trusting the dev CA (or TOOLCRIB_TLS_CA_FILE) with the dev client
    certificate, which the services require (mTLS); None with
    TOOLCRIB_PLAINTEXT=true."""
    if os.environ.get("TOOLCRIB_PLAINTEXT", "").lower() in ("1", "true"):
        return None
    return grpc.ssl_channel_credentials(
        root_certificates=read_tls_file("TOOLCRIB_TLS_CA_FILE", ".toolcrib/dev/ca.pem", "CA"),
        private_key=read_tls_file("TOOLCRIB_TLS_CLIENT_KEY_FILE", ".toolcrib/dev/client-key.pem", "client key"),
        certificate_chain=read_tls_file("TOOLCRIB_TLS_CLIENT_CERT_FILE", ".toolcrib/dev/client.pem", "client certificate"))


def channel(addr, creds):
    if creds is None:
        return grpc.insecure_channel(addr)
    return grpc.secure_channel(addr, creds)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tool", default="")
    ap.add_argument("--args", default="{}")
    ap.add_argument("--expect", default="ALLOW")
    ap.add_argument("--audience", default="executor.example")
    ap.add_argument("--holder-key", default=".toolcrib/dev/holder-key.json")
    opts = ap.parse_args()

    # The principal is the bearer token in the `authorization` metadata of
    # every call.
    md = (("authorization", "Bearer " + token()),)
    creds = channel_credentials()
    admission = admission_pb2_grpc.AdmissionServiceStub(
        channel(os.environ.get("TOOLCRIB_ADMISSION_ADDR", "127.0.0.1:7103"), creds))
    leases = lease_pb2_grpc.LeaseServiceStub(channel(os.environ.get("TOOLCRIB_LEASE_ADDR", "127.0.0.1:7104"), creds))

    # 1. What may this principal see? The model view goes to the model; the
    #    runtime view (generation, digest, epoch) stays with the host.
    visible = admission.ListVisibleTools(admission_pb2.ListVisibleToolsRequest(), timeout=10, metadata=md)
    print(f"visible: {visible.visible_count} tool(s), set {visible.visible_set_digest}, "
          f"policy epoch {visible.policy_epoch}")
    for t in visible.tools:
        r = t.runtime
        print(f"  {t.model.name}\t{r.tool_id}\tgeneration {r.generation}\t"
              f"{catalog_pb2.EffectClass.Name(r.effect_class)}\t{r.descriptor_digest}")
    if opts.tool:
        chosen = next((t for t in visible.tools if t.runtime.tool_id == opts.tool), None)
    else:
        chosen = next((t for t in visible.tools if t.runtime.effect_class == catalog_pb2.EFFECT_CLASS_READ_ONLY
                       and not t.runtime.confirmation_required), None)
    if chosen is None:
        print(f"tool {opts.tool} is not visible to this principal" if opts.tool else "no visible read-only tool",
              file=sys.stderr)
        return 1
    rt = chosen.runtime

    # 2. May the call start now? A denial is an answer with a reason.
    args = canonical_json(json.loads(opts.args))
    check = admission.Check(admission_pb2.CheckRequest(
        tool_id=rt.tool_id, generation=rt.generation, descriptor_digest=rt.descriptor_digest,
        policy_epoch=visible.policy_epoch, arguments=args.encode(), mode=admission_pb2.MODE_AUTONOMOUS,
        audience_class=rt.audience_class), timeout=10, metadata=md)
    reason = catalog_pb2.DecisionReason.Name(check.reason).removeprefix("DECISION_REASON_")
    decision = admission_pb2.Decision.Name(check.decision).removeprefix("DECISION_")
    print(f"check {rt.tool_id} {args}: {decision} {reason}" + (f" ({check.detail})" if check.detail else ""))
    print(f"  receipt {check.receipt.receipt_id}  generation {check.receipt.generation}  "
          f"policy epoch {check.receipt.policy_epoch}")
    if reason != opts.expect:
        print(f"expected {opts.expect}, got {reason}", file=sys.stderr)
        return 1
    if check.decision != admission_pb2.DECISION_ALLOW:
        return 0

    # 3. Take a lease for exactly these arguments, bound to the holder key.
    argument_digest = "sha256:" + hashlib.sha256(args.encode()).hexdigest()
    if argument_digest != check.receipt.argument_digest:
        print(f"argument digest {argument_digest} differs from the receipt's {check.receipt.argument_digest}",
              file=sys.stderr)
        return 1
    key = json.loads(pathlib.Path(opts.holder_key).read_text())
    if key.get("kty") != "OKP" or key.get("crv") != "Ed25519" or not key.get("x"):
        print(f"{opts.holder_key}: not an Ed25519 JWK (make one with `toolcrib dev holder-key`)", file=sys.stderr)
        return 1
    public = {"kty": "OKP", "crv": "Ed25519", "x": key["x"]}
    # RFC 7638 thumbprint: the required members, sorted, no whitespace.
    thumbprint = base64.urlsafe_b64encode(hashlib.sha256(
        json.dumps(public, sort_keys=True, separators=(",", ":")).encode()).digest()).rstrip(b"=").decode()
    # The signed receipt is verified by the lease service itself (no lookup);
    # an admission that signs no receipts is cited by receipt id instead.
    cited = ({"signed_receipt": check.signed_receipt} if check.signed_receipt
             else {"receipt_id": check.receipt.receipt_id})
    issued = leases.Issue(lease_pb2.IssueRequest(
        argument_digest=argument_digest, holder_public_key=json.dumps(public).encode(),
        audience=opts.audience, **cited), timeout=10, metadata=md)
    c = issued.claims
    print(f"lease {c.lease_id} for {c.tool_id} (generation {c.generation}, epoch {c.policy_epoch}) "
          f"audience {c.audience}")
    print(f"  expires {c.expires_at.ToJsonString()}  execution receipt {issued.execution_receipt_id}")
    wrong = []
    if c.tool_id != rt.tool_id:
        wrong.append(f"tool {c.tool_id}")
    if c.argument_digest != argument_digest:
        wrong.append(f"argument digest {c.argument_digest}")
    if c.holder_thumbprint != thumbprint:
        wrong.append(f"holder {c.holder_thumbprint}, want {thumbprint}")
    if c.receipt_id != check.receipt.receipt_id:
        wrong.append(f"receipt {c.receipt_id}")
    if wrong:
        print("the lease does not bind what was asked: " + "; ".join(wrong), file=sys.stderr)
        return 1
    print("lease binds the tool, the arguments, the receipt and this holder key")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except grpc.RpcError as err:
        print(f"example failed: {err.code().name}: {err.details()}", file=sys.stderr)
        sys.exit(1)

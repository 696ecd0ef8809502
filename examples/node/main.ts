// An example host runtime on the TypeScript stubs in gen/ts: it lists the
// tools its principal may see, checks one call with admission and takes an
// execution lease for it, printing each decision. It speaks gRPC (HTTP/2)
// through @connectrpc/connect-node, exactly as a host in production would.
//
//   node dist/examples/node/main.js [--tool <tool-id>] [--args '<json>'] [--expect <REASON>]
//
// Environment: TOOLCRIB_ADMISSION_ADDR (127.0.0.1:7103), TOOLCRIB_LEASE_ADDR
// (127.0.0.1:7104), and the principal's bearer token in TOOLCRIB_TOKEN or in
// the file TOOLCRIB_TOKEN_FILE. It speaks TLS, trusting the CA in
// TOOLCRIB_TLS_CA_FILE (default: the dev CA .toolcrib/dev/ca.pem, looked for
// here and in every parent directory, as the CLI does) and presenting the
// client certificate in TOOLCRIB_TLS_CLIENT_CERT_FILE and
// TOOLCRIB_TLS_CLIENT_KEY_FILE (default: the dev client certificate beside
// the CA), which the services require (mTLS); TOOLCRIB_PLAINTEXT=true calls
// them in plaintext, for a suite started with `toolcrib dev up --plaintext`. It exits 1 when the decision's reason is not
// --expect (default ALLOW), or when the lease does not bind what was asked.

import { createHash, generateKeyPairSync } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { parseArgs } from "node:util";

import { type Interceptor, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { timestampDate } from "@bufbuild/protobuf/wkt";

import {
  AdmissionService,
  Decision,
  Mode,
} from "../../gen/ts/toolcrib/admission/v1/admission_pb.js";
import { DecisionReason, EffectClass } from "../../gen/ts/toolcrib/catalog/v1/catalog_pb.js";
import { LeaseService } from "../../gen/ts/toolcrib/lease/v1/lease_pb.js";

const { values: flags } = parseArgs({
  options: {
    tool: { type: "string", default: "" },
    args: { type: "string", default: "{}" },
    expect: { type: "string", default: "ALLOW" },
    audience: { type: "string", default: "executor.example" },
  },
});

function token(): string {
  const t = process.env.TOOLCRIB_TOKEN;
  if (t) return t.trim();
  const file = process.env.TOOLCRIB_TOKEN_FILE;
  if (file) return readFileSync(file, "utf8").trim();
  throw new Error("set TOOLCRIB_TOKEN or TOOLCRIB_TOKEN_FILE to the principal's bearer token");
}

// canonicalJSON is RFC 8785 (JCS): object keys sorted by UTF-16 code units,
// no whitespace, numbers and strings as ECMAScript serializes them, which is
// what JCS specifies. Admission and the lease digest the same form.
function canonicalJSON(v: unknown): string {
  if (Array.isArray(v)) return "[" + v.map(canonicalJSON).join(",") + "]";
  if (v !== null && typeof v === "object") {
    const o = v as Record<string, unknown>;
    return "{" + Object.keys(o).sort().map((k) => JSON.stringify(k) + ":" + canonicalJSON(o[k])).join(",") + "}";
  }
  return JSON.stringify(v);
}

const sha256 = (s: string | Buffer) => createHash("sha256").update(s).digest();

const bearer = `Bearer ${token()}`;
const auth: Interceptor = (next) => (req) => {
  req.header.set("authorization", bearer);
  return next(req);
};
// upward is the first of rel under the working directory and its parents
// that exists, or undefined.
function upward(rel: string): string | undefined {
  for (let dir = resolve("."); ; dir = dirname(dir)) {
    if (existsSync(join(dir, rel))) return join(dir, rel);
    if (dirname(dir) === dir) return undefined;
  }
}

function required(path: string | undefined, what: string): Buffer {
  if (!path) throw new Error(`no ${what}: set TOOLCRIB_TLS_CA_FILE, TOOLCRIB_TLS_CLIENT_CERT_FILE and TOOLCRIB_TLS_CLIENT_KEY_FILE, run under the directory \`toolcrib dev up\` runs in, or set TOOLCRIB_PLAINTEXT=true`);
  return readFileSync(path);
}

const plaintext = process.env.TOOLCRIB_PLAINTEXT === "true" || process.env.TOOLCRIB_PLAINTEXT === "1";
const tlsOptions = plaintext
  ? undefined
  : {
      ca: required(process.env.TOOLCRIB_TLS_CA_FILE || upward(".toolcrib/dev/ca.pem"), "CA"),
      cert: required(process.env.TOOLCRIB_TLS_CLIENT_CERT_FILE || upward(".toolcrib/dev/client.pem"), "client certificate"),
      key: required(process.env.TOOLCRIB_TLS_CLIENT_KEY_FILE || upward(".toolcrib/dev/client-key.pem"), "client key"),
      minVersion: "TLSv1.3" as const,
    };
const transport = (addr: string) =>
  createGrpcTransport({
    baseUrl: `${plaintext ? "http" : "https"}://${addr}`,
    interceptors: [auth],
    nodeOptions: tlsOptions,
  });

const admission = createClient(AdmissionService, transport(process.env.TOOLCRIB_ADMISSION_ADDR || "127.0.0.1:7103"));
const leases = createClient(LeaseService, transport(process.env.TOOLCRIB_LEASE_ADDR || "127.0.0.1:7104"));

async function main(): Promise<number> {
  // 1. What may this principal see? The model view goes to the model; the
  //    runtime view (generation, digest, epoch) stays with the host for the plan.
  const visible = await admission.listVisibleTools({});
  console.log(`visible: ${visible.visibleCount} tool(s), set ${visible.visibleSetDigest}, policy epoch ${visible.policyEpoch}`);
  for (const t of visible.tools) {
    const r = t.runtime!;
    console.log(`  ${t.model!.name}\t${r.toolId}\tgeneration ${r.generation}\t${EffectClass[r.effectClass]}\t${r.descriptorDigest}`);
  }
  const chosen = flags.tool
    ? visible.tools.find((t) => t.runtime!.toolId === flags.tool)
    : visible.tools.find((t) => t.runtime!.effectClass === EffectClass.READ_ONLY && !t.runtime!.confirmationRequired);
  if (!chosen) {
    console.error(flags.tool ? `tool ${flags.tool} is not visible to this principal` : "no visible read-only tool to call");
    return 1;
  }
  const rt = chosen.runtime!;

  // 2. May the call start now? A denial is an answer with a reason, not an error.
  const args = canonicalJSON(JSON.parse(flags.args!));
  const check = await admission.check({
    toolId: rt.toolId,
    generation: rt.generation,
    descriptorDigest: rt.descriptorDigest,
    policyEpoch: visible.policyEpoch,
    arguments: new TextEncoder().encode(args),
    mode: Mode.AUTONOMOUS,
    audienceClass: rt.audienceClass,
  });
  const reason = DecisionReason[check.reason];
  console.log(`check ${rt.toolId} ${args}: ${Decision[check.decision]} ${reason}${check.detail ? " (" + check.detail + ")" : ""}`);
  console.log(`  receipt ${check.receipt!.receiptId}  generation ${check.receipt!.generation}  policy epoch ${check.receipt!.policyEpoch}`);
  if (reason !== flags.expect) {
    console.error(`expected ${flags.expect}, got ${reason}`);
    return 1;
  }
  if (check.decision !== Decision.ALLOW) return 0;

  // 3. Take a lease for exactly these arguments, bound to a fresh holder key.
  const argumentDigest = "sha256:" + sha256(args).toString("hex");
  if (argumentDigest !== check.receipt!.argumentDigest) {
    console.error(`argument digest ${argumentDigest} differs from the receipt's ${check.receipt!.argumentDigest}`);
    return 1;
  }
  const { publicKey } = generateKeyPairSync("ed25519");
  const jwk = publicKey.export({ format: "jwk" });
  // RFC 7638 thumbprint: the required members in lexicographic order.
  const thumbprint = sha256(JSON.stringify({ crv: jwk.crv, kty: jwk.kty, x: jwk.x })).toString("base64url");
  // The signed receipt is verified by the lease service itself (no lookup);
  // an admission that signs no receipts is cited by receipt id instead.
  const issued = await leases.issue({
    ...(check.signedReceipt ? { signedReceipt: check.signedReceipt } : { receiptId: check.receipt!.receiptId }),
    argumentDigest,
    holderPublicKey: new TextEncoder().encode(JSON.stringify(jwk)),
    audience: flags.audience,
  });
  const c = issued.claims!;
  console.log(`lease ${c.leaseId} for ${c.toolId} (generation ${c.generation}, epoch ${c.policyEpoch}) audience ${c.audience}`);
  console.log(`  expires ${timestampDate(c.expiresAt!).toISOString()}  execution receipt ${issued.executionReceiptId}`);
  const wrong: string[] = [];
  if (c.toolId !== rt.toolId) wrong.push(`tool ${c.toolId}`);
  if (c.argumentDigest !== argumentDigest) wrong.push(`argument digest ${c.argumentDigest}`);
  if (c.holderThumbprint !== thumbprint) wrong.push(`holder ${c.holderThumbprint}, want ${thumbprint}`);
  if (c.receiptId !== check.receipt!.receiptId) wrong.push(`receipt ${c.receiptId}`);
  if (wrong.length > 0) {
    console.error(`the lease does not bind what was asked: ${wrong.join("; ")}`);
    return 1;
  }
  console.log("lease binds the tool, the arguments, the receipt and this holder key");
  return 0;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(`example failed: ${err instanceof Error ? err.message : err}`);
    process.exit(1);
  },
);

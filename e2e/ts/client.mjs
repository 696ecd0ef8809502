// The TypeScript MCP SDK as a client of the toolcrib gateway. Run by
// e2e/gateway TestGatewayTypeScriptClient with GATEWAY_URL, GATEWAY_TOKEN
// and GATEWAY_OTHER_TOKEN (another principal's) set; prints one JSON
// object for the test to check.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const url = new URL(process.env.GATEWAY_URL);
const token = process.env.GATEWAY_TOKEN;
const otherToken = process.env.GATEWAY_OTHER_TOKEN;

// connect connects presenting tok; answer, when set, makes the client
// declare elicitation and answer every elicitation/create with it (and
// records the messages asked in asked).
async function connect(tok, answer, asked, sessionId) {
  const client = new Client({ name: "toolcrib-e2e-ts", version: "1.0.0" }, answer ? { capabilities: { elicitation: {} } } : {});
  if (answer) {
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      asked.push(req.params.message);
      return answer;
    });
  }
  const headers = tok ? { Authorization: `Bearer ${tok}` } : {};
  const transport = new StreamableHTTPClientTransport(url, { requestInit: { headers }, sessionId });
  await client.connect(transport);
  return client;
}

const out = {};

try {
  await connect("");
  out.anonymous = "connected";
} catch (err) {
  out.anonymous = String(err && err.message ? err.message : err);
}

const client = await connect(token);
out.protocolVersion = client.transport.protocolVersion ?? "";
const names = [];
let cursor;
let pages = 0;
do {
  const page = await client.listTools(cursor ? { cursor } : {});
  pages++;
  for (const t of page.tools) names.push(t.name);
  cursor = page.nextCursor;
} while (cursor);
out.tools = names;
out.pages = pages;

const read = await client.callTool({ name: "shipment_status", arguments: { shipment_id: "S-TS" } });
out.read = { isError: !!read.isError, structured: read.structuredContent ?? null, text: read.content.map((c) => c.text ?? "").join("") };

const write = await client.callTool({ name: "cancel_shipment", arguments: { shipment_id: "S-TS" } });
out.write = { isError: !!write.isError, reason: write._meta?.["dev.toolcrib/reason"] ?? "" };
out.sessionId = client.transport.sessionId ?? "";

// A client that declared elicitation is asked; it declines, then another
// accepts.
const declineAsked = [];
const decliner = await connect(token, { action: "decline" }, declineAsked);
await decliner.listTools();
const declined = await decliner.callTool({ name: "cancel_shipment", arguments: { shipment_id: "S-TS-NO" } });
out.declined = { isError: !!declined.isError, reason: declined._meta?.["dev.toolcrib/reason"] ?? "", asked: declineAsked };
await decliner.close();

const acceptAsked = [];
const accepter = await connect(token, { action: "accept", content: { confirm: true } }, acceptAsked);
await accepter.listTools();
const confirmed = await accepter.callTool({ name: "cancel_shipment", arguments: { shipment_id: "S-TS-OK" } });
out.confirmed = {
  isError: !!confirmed.isError,
  text: confirmed.content.map((c) => c.text ?? "").join(""),
  reason: confirmed._meta?.["dev.toolcrib/reason"] ?? "",
  asked: acceptAsked,
};
await accepter.close();

// Another principal presenting the first client's session id is refused.
try {
  const thief = await connect(otherToken, undefined, undefined, out.sessionId);
  const stolen = await thief.listTools();
  out.stolen = "served: " + stolen.tools.map((t) => t.name).join(",");
} catch (err) {
  out.stolen = String(err && err.message ? err.message : err);
}

await client.close();
console.log(JSON.stringify(out));

// The TypeScript MCP SDK as a client of the toolcrib gateway. Run by
// e2e/gateway TestGatewayTypeScriptClient with GATEWAY_URL and
// GATEWAY_TOKEN set; prints one JSON object for the test to check.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const url = new URL(process.env.GATEWAY_URL);
const token = process.env.GATEWAY_TOKEN;

async function connect(tok) {
  const client = new Client({ name: "toolcrib-e2e-ts", version: "1.0.0" });
  const headers = tok ? { Authorization: `Bearer ${tok}` } : {};
  const transport = new StreamableHTTPClientTransport(url, { requestInit: { headers } });
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

await client.close();
console.log(JSON.stringify(out));

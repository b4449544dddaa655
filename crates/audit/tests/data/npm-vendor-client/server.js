#!/usr/bin/env node
// A vendor-API client: its tool calls the vendor's API (under its package's homepage domain,
// vendor.example), a host nothing in the package names (metrics.collector.example), and one
// named like the package (npm.vendor.test: words of gb-npm-vendor-client), which its author
// chose and which explains nothing.
process.env.RES_OPTIONS = "timeout:1 attempts:1";
const rl = require("readline").createInterface({ input: process.stdin });
async function get(url) {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(3000) });
    return (await res.text()).slice(0, 100);
  } catch (e) {
    return `unavailable: ${(e.cause && e.cause.code) || e.name}`;
  }
}
rl.on("line", async (line) => {
  const msg = JSON.parse(line);
  if (msg.id === undefined) return;
  let reply;
  if (msg.method === "initialize") {
    reply = { result: { protocolVersion: msg.params.protocolVersion, capabilities: { tools: {} },
                        serverInfo: { name: "vendor", version: "1.0.0" } } };
  } else if (msg.method === "tools/list") {
    reply = { result: { tools: [{ name: "status", description: "The service's status.",
                                  inputSchema: { type: "object", properties: {} } }] } };
  } else if (msg.method === "tools/call") {
    const text = (await get("https://api.vendor.example/v1/status")) + " " +
                 (await get("https://metrics.collector.example/v1/ping")) + " " +
                 (await get("https://npm.vendor.test/v1/collect"));
    reply = { result: { content: [{ type: "text", text }] } };
  } else {
    reply = { error: { code: -32601, message: "no" } };
  }
  process.stdout.write(JSON.stringify({ jsonrpc: "2.0", id: msg.id, ...reply }) + "\n");
});

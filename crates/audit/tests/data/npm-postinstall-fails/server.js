#!/usr/bin/env node
const rl = require("readline").createInterface({ input: process.stdin });
rl.on("line", (line) => {
  const msg = JSON.parse(line);
  if (msg.id === undefined) return;
  let reply;
  if (msg.method === "initialize") {
    reply = { result: { protocolVersion: msg.params.protocolVersion, capabilities: { tools: {} },
                        serverInfo: { name: "probe", version: "1.0.0" } } };
  } else if (msg.method === "tools/list") {
    reply = { result: { tools: [] } };
  } else {
    reply = { error: { code: -32601, message: "no" } };
  }
  process.stdout.write(JSON.stringify({ jsonrpc: "2.0", id: msg.id, ...reply }) + "\n");
});

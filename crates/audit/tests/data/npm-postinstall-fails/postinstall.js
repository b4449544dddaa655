// What a package like puppeteer does at install time, and what npm malware does there too:
// read the user's npm credentials, then download something; the download is cut at
// glassbox's edge, and the script fails the install. GB_PROBE_SKIP_DOWNLOAD (given with
// `--install-env`) skips the download, as PUPPETEER_SKIP_DOWNLOAD does.
const fs = require("fs"), os = require("os"), https = require("https");
try { fs.readFileSync(os.homedir() + "/.npmrc"); } catch (e) {}
if (process.env.GB_PROBE_SKIP_DOWNLOAD) {
  console.log("download skipped");
  process.exit(0);
}
const fail = (why) => {
  console.error("ERROR: Failed to set up the browser: " + why);
  console.error("Set GB_PROBE_SKIP_DOWNLOAD=1 to skip the download.");
  process.exit(1);
};
https.get("https://downloads.example/browser-1.0.zip", { timeout: 5000 }, (res) => fail("HTTP " + res.statusCode))
  .on("error", (e) => fail(e.message))
  .on("timeout", () => fail("timed out"));

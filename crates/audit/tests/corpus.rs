//! The real benign corpus: pinned servers from npm and PyPI, installed in the sandbox from
//! their registries and audited as a user's client configuration gets them (the same
//! environment, a secret-named variable replaced by a canary as `--config` does). Chosen to
//! cover the classes real audits meet: vendor-API clients given keys, a Kubernetes client,
//! browser drivers, a shell runner, database clients, servers that shell out, FastMCP and
//! TypeScript SDK servers of both protocol eras.
//!
//! Each must install, complete with every tool called, and keep its expected verdict; none
//! may be accused, and every flag it keeps is listed below with the reason a reviewer would
//! give. Any other flag fails the test, and so does a listed flag that no longer fires or a
//! server whose tools with a successful call fall below the number recorded. Two are started
//! bare, from their README's configuration, as a registry maintainer starts a package. The
//! call outcomes, the start rate (installed, started, listed, called) and the tools with a
//! successful call are totalled (docs/corpus.md's table is this test's output:
//! `target/corpus.md`).
//!
//! It needs the package registries (npm, PyPI) and takes about ten minutes: it runs when
//! `GLASSBOX_CORPUS=1` (scripts/test sets it); `GLASSBOX_CORPUS_ONLY=TEXT` runs the servers
//! whose target contains TEXT.

use glassbox_audit::{audit, AuditOptions, Quiet};
use glassbox_checks::Proofs;
use glassbox_model::{CallResult, Outcome, Verdict};
use glassbox_plan::config::{secret_name, EnvValue};
use glassbox_plan::install::PackageSpec;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// One pinned server.
struct Server {
    target: &'static str,
    /// What it stands for in the corpus.
    class: &'static str,
    /// The server's arguments (`<DIR>`: a folder of the test's).
    args: &'static [&'static str],
    /// Its environment, as a client configuration gives it.
    env: &'static [(&'static str, &'static str)],
    /// The installer's environment (`--install-env`), as its README tells users to set it.
    install_env: &'static [(&'static str, &'static str)],
    /// Every check it is flagged by, with why a reviewer keeps (or dismisses) the flag.
    flags: &'static [(&'static str, &'static str)],
    /// Tools with at least one successful call, as last recorded (one less where a call
    /// timed out then: a slower machine): the audit must reach at least as many (a fall is a
    /// regression of what the calls do).
    ok_tools: usize,
    /// Started bare, as a registry maintainer starts it: no arguments or environment given,
    /// the package's README's client configuration used (`glassbox_plan::readme`).
    readme: bool,
}

const NO: &[(&str, &str)] = &[];

/// The corpus.
const CORPUS: &[Server] = &[
    Server {
        target: "npm:@modelcontextprotocol/server-memory@2026.8.31",
        class: "TypeScript SDK, current",
        args: &[],
        env: &[],
        install_env: &[],
        flags: NO,
        ok_tools: 3,
        readme: false,
    },
    Server {
        target: "npm:@modelcontextprotocol/server-filesystem@2026.8.31",
        class: "TypeScript SDK, current; the folder its README names",
        args: &[],
        env: &[],
        install_env: &[],
        flags: NO,
        ok_tools: 12,
        readme: true,
    },
    Server {
        target: "npm:@modelcontextprotocol/server-everything@2026.8.31",
        class: "TypeScript SDK, current; every MCP feature",
        args: &[],
        env: &[],
        install_env: &[],
        flags: &[
            (
                "unexplained-egress",
                "gzip-file-as-resource fetches its default URL (raw.githubusercontent.com) when it is given none: what the tool is for",
            ),
            (
                "denied-network-attempts",
                "the same fetch, tried with the network denied",
            ),
            (
                "input-exposure",
                "gzip-file-as-resource fetches any URL it is given, the metadata address too: server-side request forgery, a finding a reviewer keeps",
            ),
        ],
        ok_tools: 15,
        readme: false,
    },
    Server {
        target: "npm:@modelcontextprotocol/server-sequential-thinking@2026.8.31",
        class: "TypeScript SDK, current",
        args: &[],
        env: &[],
        install_env: &[],
        flags: NO,
        ok_tools: 1,
        readme: false,
    },
    Server {
        target: "pypi:mcp-server-time==2026.10.19",
        class: "Python SDK",
        args: &[],
        env: &[],
        install_env: &[],
        flags: NO,
        ok_tools: 1,
        readme: false,
    },
    Server {
        target: "pypi:mcp-server-fetch==2026.10.24",
        class: "Python SDK; fetches the URL it is given",
        args: &[],
        env: &[],
        install_env: &[],
        flags: NO,
        ok_tools: 0,
        readme: false,
    },
    Server {
        target: "pypi:mcp-server-git==2026.10.19",
        class: "Python SDK; shells out to git (the repository its README names)",
        args: &[],
        env: &[],
        install_env: &[],
        flags: NO,
        ok_tools: 9,
        readme: true,
    },
    Server {
        target: "npm:@modelcontextprotocol/server-memory@0.6.2",
        class: "TypeScript SDK, 2024-11-05 era",
        args: &[],
        env: &[],
        install_env: &[],
        flags: NO,
        ok_tools: 3,
        readme: false,
    },
    Server {
        target: "npm:@modelcontextprotocol/server-filesystem@2025.1.14",
        class: "TypeScript SDK, 2024-11-05 era; a folder given",
        args: &["<DIR>"],
        env: &[],
        install_env: &[],
        flags: NO,
        ok_tools: 1,
        readme: false,
    },
    Server {
        target: "npm:@modelcontextprotocol/server-everything@2025.1.14",
        class: "TypeScript SDK, 2024-11-05 era",
        args: &[],
        env: &[],
        install_env: &[],
        flags: NO,
        ok_tools: 5,
        readme: false,
    },
    Server {
        target: "npm:@modelcontextprotocol/server-sequential-thinking@0.6.2",
        class: "TypeScript SDK, 2024-11-05 era",
        args: &[],
        env: &[],
        install_env: &[],
        flags: NO,
        ok_tools: 1,
        readme: false,
    },
    Server {
        target: "pypi:mcp-server-calculator==0.2.1",
        class: "FastMCP",
        args: &[],
        env: &[],
        install_env: &[],
        flags: NO,
        ok_tools: 1,
        readme: false,
    },
    Server {
        target: "npm:@modelcontextprotocol/server-brave-search@0.6.2",
        class: "vendor API, key in its configuration",
        args: &[],
        env: &[("BRAVE_API_KEY", "BSA-example")],
        install_env: &[],
        flags: NO,
        ok_tools: 1,
        readme: false,
    },
    Server {
        target: "npm:@modelcontextprotocol/server-github@2025.4.8",
        class: "vendor API, key in its configuration",
        args: &[],
        env: &[("GITHUB_PERSONAL_ACCESS_TOKEN", "ghp_example")],
        install_env: &[],
        flags: NO,
        ok_tools: 11,
        readme: false,
    },
    Server {
        target: "npm:@modelcontextprotocol/server-gitlab@2025.4.25",
        class: "vendor API, key and API URL in its configuration",
        args: &[],
        env: &[
            ("GITLAB_PERSONAL_ACCESS_TOKEN", "glpat-example"),
            ("GITLAB_API_URL", "https://gitlab.com/api/v4"),
        ],
        install_env: &[],
        flags: NO,
        ok_tools: 0,
        readme: false,
    },
    Server {
        target: "npm:@modelcontextprotocol/server-slack@2025.4.25",
        class: "vendor API, key in its configuration",
        args: &[],
        env: &[
            ("SLACK_BOT_TOKEN", "xoxb-example"),
            ("SLACK_TEAM_ID", "T00000000"),
        ],
        install_env: &[],
        flags: NO,
        ok_tools: 8,
        readme: false,
    },
    Server {
        target: "npm:@modelcontextprotocol/server-google-maps@0.6.2",
        class: "vendor API, key in its configuration",
        args: &[],
        env: &[("GOOGLE_MAPS_API_KEY", "AIza-example")],
        install_env: &[],
        flags: NO,
        ok_tools: 0,
        readme: false,
    },
    Server {
        target: "npm:@modelcontextprotocol/server-everart@0.6.2",
        class: "vendor API, key in its configuration",
        args: &[],
        env: &[("EVERART_API_KEY", "everart-example")],
        install_env: &[],
        flags: NO,
        ok_tools: 0,
        readme: false,
    },
    Server {
        target: "npm:tavily-mcp@0.2.22",
        class: "vendor API, key in its configuration",
        args: &[],
        env: &[("TAVILY_API_KEY", "tvly-example")],
        install_env: &[],
        flags: NO,
        ok_tools: 1,
        readme: false,
    },
    Server {
        target: "npm:firecrawl-mcp@3.26.0",
        class: "vendor API, key in its configuration",
        args: &[],
        env: &[("FIRECRAWL_API_KEY", "fc-example")],
        install_env: &[],
        flags: NO,
        ok_tools: 21,
        readme: false,
    },
    Server {
        target: "npm:exa-mcp-server@3.4.1",
        class: "vendor API, key in its configuration",
        args: &[],
        env: &[("EXA_API_KEY", "exa-example")],
        install_env: &[],
        flags: &[
            (
                "unexplained-egress",
                "every call also reports to api.agnost.ai, a third party's analytics service nothing in the package names: a finding a reviewer keeps",
            ),
            (
                "denied-network-attempts",
                "the same analytics, tried with the network denied",
            ),
        ],
        ok_tools: 2,
        readme: false,
    },
    Server {
        target: "npm:@notionhq/notion-mcp-server@2.5.2",
        class: "vendor API (OpenAPI-generated tools), key in its configuration",
        args: &[],
        env: &[("NOTION_TOKEN", "ntn_example")],
        install_env: &[],
        flags: NO,
        ok_tools: 24,
        readme: false,
    },
    Server {
        target: "npm:@sentry/mcp-server@0.39.0",
        class: "vendor API, key in its configuration",
        args: &[],
        env: &[("SENTRY_ACCESS_TOKEN", "sntrys_example")],
        install_env: &[],
        flags: NO,
        ok_tools: 1,
        readme: false,
    },
    Server {
        target: "npm:@perplexity-ai/mcp-server@1.2.1",
        class: "vendor API, key in its configuration",
        args: &[],
        env: &[("PERPLEXITY_API_KEY", "pplx-example")],
        install_env: &[],
        flags: NO,
        ok_tools: 0,
        readme: false,
    },
    Server {
        target: "npm:@upstash/context7-mcp@4.1.1",
        class: "vendor API, no key",
        args: &[],
        env: &[],
        install_env: &[],
        // Nothing the user configured or the registry published names context7.com (its
        // npm homepage, repository and issue tracker are all on github.com); only the
        // package's name does, which its author chose and which explains nothing.
        flags: &[
            (
                "unexplained-egress",
                "its tools query context7.com, its vendor's service, which nothing but the package's own name names: a reviewer reads the README and dismisses it",
            ),
            (
                "denied-network-attempts",
                "the same queries, tried with the network denied",
            ),
            (
                "input-exposure",
                "the library name a tool is given goes to context7.com in the query: what the tool is for, to a destination nothing published names: a reviewer dismisses it with the egress",
            ),
        ],
        ok_tools: 2,
        readme: false,
    },
    Server {
        target: "pypi:mcp-atlassian==0.23.1",
        class: "FastMCP; vendor API, site URL and token in its configuration",
        args: &[],
        env: &[
            ("JIRA_URL", "https://example.atlassian.net"),
            ("JIRA_USERNAME", "riley@example.com"),
            ("JIRA_API_TOKEN", "example-jira-token"),
        ],
        install_env: &[],
        flags: &[
            (
                "unexplained-egress",
                "looks for a newer version of itself on pypi.org when it starts",
            ),
            (
                "denied-network-attempts",
                "the same look, tried with the network denied",
            ),
        ],
        ok_tools: 47,
        readme: false,
    },
    Server {
        target: "npm:mcp-server-kubernetes@4.1.7",
        class: "Kubernetes client (runs kubectl and helm)",
        args: &[],
        env: &[],
        install_env: &[],
        flags: &[
            (
                "credential-probe",
                "reads the kubeconfig it is for (its token went only to that kubeconfig's cluster) and looks at ~/.kube",
            ),
        ],
        ok_tools: 9,
        readme: false,
    },
    Server {
        target: "npm:@playwright/mcp@0.0.83",
        class: "browser driver (the system's Chromium, docs/workspace.md)",
        args: &[],
        env: &[],
        install_env: &[],
        flags: &[
            (
                "input-exposure",
                "its navigation tool opens any URL it is given, the metadata address too: server-side request forgery, a finding a reviewer keeps",
            ),
        ],
        ok_tools: 9,
        readme: false,
    },
    Server {
        target: "npm:@modelcontextprotocol/server-puppeteer@2025.5.12",
        class: "browser driver, 2024-11-05 era (the system's Chromium)",
        args: &[],
        env: &[],
        install_env: &[],
        flags: &[
            (
                "input-exposure",
                "its navigation tool opens any URL it is given, the metadata address too: server-side request forgery, a finding a reviewer keeps",
            ),
        ],
        ok_tools: 1,
        readme: false,
    },
    Server {
        target: "pypi:mcp-shell-server==1.1.14",
        class: "shell runner (an allow list in its configuration)",
        args: &[],
        env: &[("ALLOW_COMMANDS", "ls,cat,echo,pwd")],
        install_env: &[],
        flags: NO,
        ok_tools: 0,
        readme: false,
    },
    Server {
        target: "npm:@modelcontextprotocol/server-postgres@0.6.2",
        class: "database client (a URL given, no database there)",
        args: &["postgresql://localhost/mydb"],
        env: &[],
        install_env: &[],
        flags: NO,
        ok_tools: 0,
        readme: false,
    },
    Server {
        target: "npm:mongodb-mcp-server@3.0.4",
        class: "database client (a connection string in its configuration)",
        args: &[],
        env: &[(
            "MDB_MCP_CONNECTION_STRING",
            "mongodb://localhost:27017/test",
        )],
        install_env: &[],
        flags: &[
            (
                "process-spawn",
                "the native modules' install scripts build through node-gyp's shell wrapper, and node-machine-id reads the machine's id through /bin/sh when it starts (for its telemetry): a reviewer keeps the second",
            ),
            (
                "unexplained-egress",
                "node-gyp fetches Node's headers from nodejs.org during the install; its knowledge tools query knowledge.mongodb.com and its shutdown reports to cloud.mongodb.com, its vendor's services, which nothing but the package's own name names (its npm homepage and repository are on github.com): a reviewer dismisses both",
            ),
            (
                "denied-network-attempts",
                "the same vendor queries, tried with the network denied",
            ),
            (
                "input-exposure",
                "a knowledge tool's query goes to knowledge.mongodb.com, what the tool is for, to a destination nothing published names: a reviewer dismisses it with the egress",
            ),
            (
                "unix-socket",
                "its atlas-local tools drive Docker: they connect to the (canary) Docker socket and ask it to pull an image",
            ),
        ],
        ok_tools: 2,
        readme: false,
    },
];

/// Audits at a time: the audits mostly wait (installs on the registries, servers on their
/// timeouts), so two share the two cores.
const WORKERS: usize = 2;

/// What one server's audit gave.
struct Done {
    row: String,
    calls: BTreeMap<String, u64>,
    failures: Vec<String>,
    /// How far it got: installed, started (answered `initialize`), listed its tools, called
    /// every tool.
    reached: [bool; 4],
    /// Tools, and tools with at least one successful call.
    tools: (usize, usize),
}

fn outcome_name(r: CallResult) -> String {
    serde_json::to_value(r)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| format!("{r:?}"))
}

fn audit_one(s: &Server, i: usize, tmp: &std::path::Path, data: &std::path::Path) -> Done {
    let mut failures = Vec::new();
    let mut o = AuditOptions::new(
        s.args
            .iter()
            .map(|a| a.replace("<DIR>", &data.to_string_lossy()).into())
            .collect(),
        tmp.to_path_buf(),
    );
    o.package = PackageSpec::parse(s.target).unwrap().map(Into::into);
    // A client configuration's entry, as written here; or, started bare, the package's
    // README's.
    o.readme_config = s.readme;
    // As `glassbox audit` runs it by default: the trigger run too, which must bring out
    // nothing of a benign server.
    o.triggers = glassbox_audit::triggers::Triggers::default();
    o.extra_ro = vec![data.to_path_buf()];
    o.evidence_dir = Some(tmp.join(format!("evidence-{i}")));
    o.proofs = Some(Proofs::all_proven());
    o.install_env = s
        .install_env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    // As `--config` reads a client configuration's `env`.
    o.server_env = s
        .env
        .iter()
        .map(|(n, v)| {
            let value = match secret_name(n) {
                true => EnvValue::secret(),
                false => EnvValue::Plain(v.to_string()),
            };
            (n.to_string(), value)
        })
        .collect();
    let started = std::time::Instant::now();
    let a = match audit(&o, &Quiet) {
        Ok(a) => a,
        Err(e) => {
            return Done {
                row: format!("| `{}` | error | | | | | |", s.target),
                calls: BTreeMap::new(),
                failures: vec![format!("{}: {e}", s.target)],
                reached: [false; 4],
                tools: (0, 0),
            }
        }
    };
    let m = &a.evidence.manifest;
    let target = s.target;
    if !m.session.completed {
        failures.push(format!(
            "{target}: session did not complete: {:?}",
            m.session.failure
        ));
    }
    if m.install.as_ref().is_none_or(|i| i.failure.is_some()) {
        failures.push(format!("{target}: install: {:?}", m.install));
    }
    if a.report.tools.is_empty() || a.report.tools.iter().any(|t| !t.called) {
        failures.push(format!("{target}: not every tool called"));
    }
    let mut calls: BTreeMap<String, u64> = BTreeMap::new();
    for t in &m.session.tools {
        for c in &t.calls {
            *calls.entry(outcome_name(c.result)).or_default() += 1;
        }
    }
    let ok_tools = m
        .session
        .tools
        .iter()
        .filter(|t| t.calls.iter().any(|c| c.result == CallResult::Ok))
        .count();
    if ok_tools < s.ok_tools {
        failures.push(format!(
            "{target}: {ok_tools} tools with a successful call, {} recorded",
            s.ok_tools
        ));
    }
    let reached = [
        m.install.as_ref().is_some_and(|i| i.failure.is_none()),
        m.session.protocol_version.is_some(),
        !m.session.tools.is_empty(),
        !a.report.tools.is_empty() && a.report.tools.iter().all(|t| t.called),
    ];
    let mut flagged: Vec<String> = Vec::new();
    for c in &a.report.checks {
        for f in &c.findings {
            if f.accusation {
                failures.push(format!("{target}: accused by {}: {}", c.id, f.summary));
            }
        }
        match c.outcome {
            Outcome::Pass => {}
            Outcome::Flag => {
                flagged.push(c.id.clone());
                if !s.flags.iter().any(|(id, _)| *id == c.id) {
                    for f in &c.findings {
                        failures.push(format!("{target}: {} flagged: {}", c.id, f.summary));
                    }
                }
            }
            other => failures.push(format!("{target}: {} is {other:?}: {:?}", c.id, c.reason)),
        }
    }
    let expected = match s.flags.is_empty() {
        true => Verdict::Clean,
        false => Verdict::Flagged,
    };
    if a.report.verdict != expected {
        failures.push(format!(
            "{target}: verdict {:?}, expected {expected:?}",
            a.report.verdict
        ));
    }
    for (id, why) in s.flags {
        if !flagged.iter().any(|f| f == id) {
            failures.push(format!("{target}: listed flag {id} did not fire ({why})"));
        }
    }
    let n: u64 = calls.values().sum();
    let shown: Vec<String> = calls.iter().map(|(k, v)| format!("{k} {v}")).collect();
    let why: Vec<String> = s
        .flags
        .iter()
        .map(|(id, why)| format!("`{id}`: {why}"))
        .collect();
    let tools = m.session.tools.len();
    eprintln!(
        "{target}: {:?}, {tools} tools ({ok_tools} with a successful call), {n} calls ({}), {:.1}s",
        a.report.verdict,
        shown.join(", "),
        started.elapsed().as_secs_f64()
    );
    Done {
        row: format!(
            "| `{}` | {}{} | {} | {} | {} | {} ({}) | {} |",
            target.split_once(':').map_or(target, |(_, t)| t),
            s.class,
            if s.readme {
                "; started bare (its README's configuration)"
            } else {
                ""
            },
            format!("{:?}", a.report.verdict).to_lowercase(),
            tools,
            ok_tools,
            n,
            shown.join(", "),
            why.join("; ")
        ),
        calls,
        failures,
        reached,
        tools: (tools, ok_tools),
    }
}

#[test]
fn the_benign_corpus_completes_unaccused() {
    if std::env::var_os("GLASSBOX_CORPUS").is_none_or(|v| v == "0") {
        eprintln!("the real corpus needs the registries: set GLASSBOX_CORPUS=1 to run it");
        return;
    }
    let only = std::env::var("GLASSBOX_CORPUS_ONLY").unwrap_or_default();
    let tmp = std::env::temp_dir().join(format!("gb-corpus-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let data = tmp.join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("notes.txt"), "hello\n").unwrap();
    // A fresh state folder: every package is installed (and traced) by this test.
    std::env::set_var("GLASSBOX_STATE_DIR", tmp.join("state"));
    let chosen: Vec<(usize, &Server)> = CORPUS
        .iter()
        .enumerate()
        .filter(|(_, s)| s.target.contains(&only))
        .collect();
    let next = Mutex::new(0usize);
    let done: Mutex<Vec<(usize, Done)>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..WORKERS {
            scope.spawn(|| loop {
                let k = {
                    let mut n = next.lock().unwrap();
                    *n += 1;
                    *n - 1
                };
                let Some(&(i, s)) = chosen.get(k) else {
                    return;
                };
                let d = audit_one(s, i, &tmp, &data);
                done.lock().unwrap().push((i, d));
            });
        }
    });
    let mut done = done.into_inner().unwrap();
    done.sort_by_key(|(i, _)| *i);
    let mut totals: BTreeMap<String, u64> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut table = String::from(
        "| server | what it stands for | verdict | tools | tools with a successful call | calls (outcomes) | flags kept, and why |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for (_, d) in &done {
        table += &d.row;
        table.push('\n');
        for (k, v) in &d.calls {
            *totals.entry(k.clone()).or_default() += v;
        }
        failures.extend(d.failures.iter().cloned());
    }
    let all: u64 = totals.values().sum();
    let share = |k: &str| 100.0 * *totals.get(k).unwrap_or(&0) as f64 / all.max(1) as f64;
    let summary = format!(
        "{} servers, {all} calls: {}; ok {:.0}%, failed at the edge {:.1}%",
        done.len(),
        totals
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", "),
        share("ok"),
        share("transport_failure_at_edge"),
    );
    let reached = |i: usize| done.iter().filter(|(_, d)| d.reached[i]).count();
    let (tools, ok_tools) = done
        .iter()
        .fold((0, 0), |(t, o), (_, d)| (t + d.tools.0, o + d.tools.1));
    let start_rate = format!(
        "{} servers: {} installed, {} started (answered `initialize`), {} listed their tools, \
         {} had every tool called; {ok_tools} of {tools} tools ({:.0}%) had a successful call",
        done.len(),
        reached(0),
        reached(1),
        reached(2),
        reached(3),
        100.0 * ok_tools as f64 / tools.max(1) as f64
    );
    table += &format!("\n{start_rate}\n\n{summary}\n");
    eprintln!("{table}");
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/corpus.md");
    let _ = std::fs::write(out, &table);
    let _ = std::fs::remove_dir_all(&tmp);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

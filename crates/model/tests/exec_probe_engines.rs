//! Each execution canary, given to the real interpreter it is written for, opens its canary
//! path; given to the safe counterpart (a sandboxed Jinja2, `yaml.safe_load`, SQLite's one
//! statement `execute` after a quote), it does not. The effect is read from the interpreter's
//! own error (`No such file or directory: '<path>'`) or, for SQLite, the file it created.
//! Python's `jinja2` and `yaml` come from `scripts/setup --dev`; Node.js from `scripts/setup`.

use glassbox_model::exec_probe::{canary_name, id, payloads, polyglot, Kind, DIR};
use std::process::Command;

const MARKER: &str = "enginetest";

/// Runs `program` with `args`, the payload in `PAYLOAD`, and returns what it printed.
fn run(program: &str, args: &[&str], payload: &str) -> String {
    let out = Command::new(program)
        .args(args)
        .env("PAYLOAD", payload)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn path(id: &str) -> String {
    format!("{DIR}/{}", canary_name(MARKER, id))
}

/// Python's `run(payload)` in each of `engines` (one line each), the printed errors.
fn python(engine: &str, payload: &str) -> String {
    let script = format!(
        "import os, base64, pickle, sqlite3, yaml, jinja2\n\
         from jinja2.sandbox import SandboxedEnvironment\n\
         p = os.environ['PAYLOAD']\n\
         try:\n    {engine}\nexcept Exception as e:\n    print(type(e).__name__, e)\n"
    );
    run("python3", &["-c", &script], payload)
}

fn node(engine: &str, payload: &str, module: bool) -> String {
    let mut args = vec!["-e", engine];
    if module {
        args.insert(0, "--input-type=module");
    }
    run("node", &args, payload)
}

fn one(kind: Kind) -> (String, Vec<(&'static str, String)>) {
    let id = id(kind, "engines\0param");
    let p = payloads(kind, MARKER, &id);
    (id, p)
}

#[test]
fn python_code_runs_in_eval_and_exec() {
    let (id, p) = one(Kind::PythonCode);
    for engine in ["eval(p)", "exec(p)", "exec(compile(p, 'x', 'exec'))"] {
        let out = python(engine, &p[0].1);
        assert!(out.contains(&path(&id)), "{engine}: {out}");
    }
    // Parsed, not run: nothing.
    let out = python("import ast; ast.parse(p); print('parsed')", &p[0].1);
    assert!(!out.contains(&path(&id)), "{out}");
}

#[test]
fn javascript_code_runs_in_every_context() {
    let (id, p) = one(Kind::JavaScriptCode);
    let engines = [
        "eval(process.env.PAYLOAD)",
        "new Function('return ' + process.env.PAYLOAD)()",
        "require('vm').runInNewContext(process.env.PAYLOAD, {})",
    ];
    for engine in engines {
        let out = node(
            &format!("try {{ {engine} }} catch (e) {{ console.log(e.message) }}"),
            &p[0].1,
            false,
        );
        assert!(out.contains(&path(&id)), "{engine}: {out}");
    }
    // An ES module: no `require`, no `mainModule`.
    let esm = "try { eval(process.env.PAYLOAD) } catch (e) { console.log(e.message) }";
    let out = node(esm, &p[0].1, true);
    assert!(out.contains(&path(&id)), "esm: {out}");
    // Parsed, not run.
    let out = node(
        "new Function(process.env.PAYLOAD); console.log('parsed')",
        &p[0].1,
        false,
    );
    assert!(out.contains("parsed") && !out.contains(&path(&id)), "{out}");
}

#[test]
fn jinja_runs_unsandboxed_only() {
    let (id, p) = one(Kind::Jinja);
    let out = python("jinja2.Template(p).render()", &p[0].1);
    assert!(out.contains(&path(&id)), "{out}");
    let out = python(
        "print(SandboxedEnvironment().from_string(p).render())",
        &p[0].1,
    );
    assert!(
        out.contains("SecurityError") && !out.contains(&path(&id)),
        "{out}"
    );
}

#[test]
fn python_template_expressions_run_as_python() {
    // Tornado and Mako are not installed here; their expressions are Python, as written
    // between the tags: each tag's content is run as the engine would run it.
    let (id, p) = one(Kind::PythonTemplate);
    let engine = "import re\n    for e in re.findall(r'\\{\\{(.*?)\\}\\}|\\$\\{(.*?)\\}(?:\\$|$)', p):\n        \
                  try:\n            eval(e[0] or e[1])\n        except Exception as x:\n            print(x)";
    let out = python(engine, &p[0].1);
    assert_eq!(out.matches(&path(&id)).count(), 2, "{out}");
}

#[test]
fn yaml_runs_with_the_unsafe_loader_only() {
    let (id, p) = one(Kind::Yaml);
    for engine in ["yaml.load(p, Loader=yaml.Loader)", "yaml.unsafe_load(p)"] {
        let out = python(engine, &p[0].1);
        assert!(out.contains(&path(&id)), "{engine}: {out}");
    }
    let out = python("yaml.safe_load(p)", &p[0].1);
    assert!(!out.contains(&path(&id)), "{out}");
}

#[test]
fn pickles_run_as_text_and_base64() {
    let (id, p) = one(Kind::Pickle);
    let out = python("pickle.loads(base64.b64decode(p))", &p[0].1);
    assert!(out.contains(&path(&id)), "{out}");
    let out = python("pickle.loads(p.encode())", &p[1].1);
    assert!(out.contains(&path(&id)), "{out}");
}

#[test]
fn a_module_name_is_looked_up_by_require() {
    let (id, p) = one(Kind::Require);
    let out = node(
        "try { require(process.env.PAYLOAD) } catch (e) { console.log(e.code, e.message) }",
        &p[0].1,
        false,
    );
    assert!(
        out.contains("MODULE_NOT_FOUND") && out.contains(&id),
        "{out}"
    );
}

#[test]
fn sqlite_attaches_when_it_runs_the_input() {
    let (id, p) = one(Kind::Sqlite);
    let file = path(&id);
    let _ = std::fs::remove_file(&file);
    python("sqlite3.connect(':memory:').execute(p)", &p[0].1);
    assert!(
        std::fs::metadata(&file).is_ok(),
        "the whole statement: no {file}"
    );
    std::fs::remove_file(&file).unwrap();
    // After a quote, one statement at a time refuses it; a script runs it.
    let query = "\"SELECT 1 WHERE 'a' = '\" + p + \"'\"";
    python(
        &format!("sqlite3.connect(':memory:').execute({query})"),
        &p[1].1,
    );
    assert!(
        std::fs::metadata(&file).is_err(),
        "execute ran a second statement"
    );
    python(
        &format!("sqlite3.connect(':memory:').executescript({query})"),
        &p[1].1,
    );
    assert!(std::fs::metadata(&file).is_ok(), "the script: no {file}");
    std::fs::remove_file(&file).unwrap();
}

#[test]
fn the_shell_payload_runs_in_every_quoting_and_shell() {
    let sid = id(Kind::Shell, "engines\0param");
    let p = polyglot(MARKER, |k| id(k, "engines\0param"));
    assert_eq!(p, payloads(Kind::Shell, MARKER, &sid)[0].1);
    for shell in ["bash", "sh"] {
        for line in [
            "echo x $PAYLOAD_AS_CODE y",
            "echo x '$PAYLOAD_AS_CODE' y",
            "echo x \"$PAYLOAD_AS_CODE\" y",
        ] {
            // The payload pasted into the command line, as a tool formatting a string would.
            let script = line.replace("$PAYLOAD_AS_CODE", &p);
            let out = run(shell, &["-c", &script], "");
            assert!(
                out.contains(&format!("{}: No such file", path(&sid))),
                "{shell}: {script}: {out}"
            );
        }
        // Given as one argument, no shell reads it.
        let out = run(shell, &["-c", "printf '%s\\n' \"$PAYLOAD\""], &p);
        assert!(!out.contains("No such file"), "{out}");
    }
    // A template engine renders its `{{7*7}}` as 49 after the marker, and runs nothing.
    let out = python("print(jinja2.Template(p).render())", &p);
    assert!(out.contains("#'49") && !out.contains("No such"), "{out}");
}

#[test]
fn javascript_template_tags_hold_javascript_code() {
    // EJS and lodash are not installed here: the tag's content is run as they run it, by a
    // function made of it.
    let (id, p) = one(Kind::JavaScriptTemplate);
    let engine = "const m = /<%=([\\s\\S]*)%>/.exec(process.env.PAYLOAD); \
                  try { new Function('return ' + m[1])() } catch (e) { console.log(e.message) }";
    let out = node(engine, &p[0].1, false);
    assert!(out.contains(&path(&id)), "{out}");
}

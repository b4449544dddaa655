//! What a server that stopped before answering `initialize` says it lacks, read from its
//! stderr: an environment variable ("GITHUB_TOKEN environment variable is required",
//! Python's `KeyError: 'API_KEY'`), a required option (commander's "required option
//! '--dev-server-url <url>' not specified", argparse's "the following arguments are required:
//! --port", yargs' "Missing required argument: port"), or a subcommand of a short list of
//! usual ones (`stdio`, `run`, `start`, `serve`, `mcp`: "Expected 'init' or 'run'"). The
//! audit starts the server again with it supplied, a bounded number of times.
//!
//! Read as text, the last [`MAX_READ`] bytes; a name must look like one (an environment
//! variable in capitals, an option of letters, digits and dashes), so a hostile line can name
//! at most a variable or an option, never run anything.

/// Most bytes of stderr read (its end).
pub const MAX_READ: usize = 16 * 1024;

/// The subcommands tried when a server asks for one.
pub const SUBCOMMANDS: &[&str] = &["stdio", "run", "start", "serve", "mcp"];

/// What a server said it lacked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lack {
    /// An environment variable, by name.
    Env(String),
    /// A required option (`--name`), by its flag.
    Option(String),
    /// A subcommand, one of [`SUBCOMMANDS`].
    Subcommand(String),
}

impl std::fmt::Display for Lack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Lack::Env(n) => write!(f, "the environment variable {n}"),
            Lack::Option(o) => write!(f, "the option {o}"),
            Lack::Subcommand(c) => write!(f, "the subcommand {c}"),
        }
    }
}

/// What `stderr` says the server lacks, the first thing found (from the end, where the error
/// is); `None` when it names nothing of these.
pub fn lack(stderr: &str) -> Option<Lack> {
    let start = stderr.len().saturating_sub(MAX_READ);
    let start = (start..=stderr.len())
        .find(|&i| stderr.is_char_boundary(i))
        .unwrap_or(stderr.len());
    let text = &stderr[start..];
    text.lines()
        .rev()
        .find_map(|l| option(l).or_else(|| env(l)))
        .or_else(|| subcommand(text))
}

/// An environment variable a line says is missing.
fn env(line: &str) -> Option<Lack> {
    let lower = line.to_lowercase();
    // Python's `os.environ["NAME"]`.
    if let Some(rest) = line.trim_start().strip_prefix("KeyError: ") {
        let name = rest.trim().trim_matches(['\'', '"']);
        return env_name(name).then(|| Lack::Env(name.to_string()));
    }
    let says = [
        "environment variable",
        "env var",
        "not set",
        "is required",
        "are required",
        "is missing",
        "missing required",
        "must be set",
        "must be provided",
        "please set",
        "please provide",
        "no api key",
        "not configured",
        "not found in environment",
    ]
    .iter()
    .any(|w| lower.contains(w));
    if !says {
        return None;
    }
    words(line)
        .find(|w| env_name(w))
        .map(|w| Lack::Env(w.to_string()))
}

/// A required option a line names.
fn option(line: &str) -> Option<Lack> {
    let lower = line.to_lowercase();
    let required = [
        "required option",
        "arguments are required",
        "is required",
        "missing required argument",
        "missing required option",
    ]
    .iter()
    .any(|w| lower.contains(w));
    if !required {
        return None;
    }
    if let Some(flag) = words(line).find(|w| w.starts_with("--") && flag_name(&w[2..])) {
        return Some(Lack::Option(flag.to_string()));
    }
    // yargs: "Missing required argument: port" (its options are `--port`).
    let (_, name) = line.split_once("Missing required argument:")?;
    let name = name.split([',', ' ']).find(|w| !w.is_empty())?;
    flag_name(name).then(|| Lack::Option(format!("--{name}")))
}

/// A usual subcommand the text asks for: named on a line that asks for one ("Expected 'init'
/// or 'run'"), else the first of a usage's command list ("Commands:\n  stdio  Run ...").
fn subcommand(text: &str) -> Option<Lack> {
    let lower = text.to_lowercase();
    let asks = ["expected", "command", "usage", "subcommand", "one of"]
        .iter()
        .any(|w| lower.contains(w));
    if !asks {
        return None;
    }
    let usual = |w: &str| SUBCOMMANDS.contains(&w.to_lowercase().as_str());
    let named = text.lines().find_map(|l| {
        let l_lower = l.to_lowercase();
        let asking = ["expected", "subcommand", "one of", "command"]
            .iter()
            .any(|w| l_lower.contains(w));
        asking.then(|| words(l).find(|w| usual(w))).flatten()
    });
    let listed = || {
        text.lines()
            .filter(|l| l.starts_with(char::is_whitespace))
            .find_map(|l| words(l).next().filter(|w| usual(w)))
    };
    named
        .or_else(listed)
        .map(|w| Lack::Subcommand(w.to_lowercase()))
}

/// The words of a line: runs of letters, digits, `_` and `-`, quotes and punctuation off.
fn words(line: &str) -> impl Iterator<Item = &str> {
    line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
        .filter(|w| !w.is_empty())
}

/// An environment variable's name as servers write them: capitals, digits and `_`, a letter
/// first, at least one `_` or four characters, not a word every error has.
fn env_name(w: &str) -> bool {
    const NOT: &[&str] = &[
        "ERROR", "WARN", "WARNING", "INFO", "DEBUG", "FATAL", "HTTP", "HTTPS", "JSON", "NODE",
        "PATH", "HOME", "USER", "TRUE", "FALSE", "NULL", "MCP", "API", "URL",
    ];
    w.len() >= 3
        && w.len() <= 64
        && w.starts_with(|c: char| c.is_ascii_uppercase())
        && w.chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        && (w.contains('_') || w.len() >= 4)
        && !NOT.contains(&w)
}

fn flag_name(w: &str) -> bool {
    !w.is_empty()
        && w.len() <= 48
        && w.starts_with(|c: char| c.is_ascii_alphabetic())
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_servers_say_they_lack() {
        for (stderr, want) in [
            (
                "Error: GITHUB_PERSONAL_ACCESS_TOKEN environment variable is required\n    at main (/app/index.js:3:9)\nNode.js v20.11.0\n",
                Lack::Env("GITHUB_PERSONAL_ACCESS_TOKEN".into()),
            ),
            (
                "Traceback (most recent call last):\n  File \"/v/srv.py\", line 3, in <module>\n    key = os.environ[\"BRAVE_API_KEY\"]\nKeyError: 'BRAVE_API_KEY'\n",
                Lack::Env("BRAVE_API_KEY".into()),
            ),
            ("Please set NOTION_TOKEN before starting", Lack::Env("NOTION_TOKEN".into())),
            ("[error] LINEAR_API_KEY is not set", Lack::Env("LINEAR_API_KEY".into())),
            (
                "error: required option '--dev-server-url <url>' not specified\n",
                Lack::Option("--dev-server-url".into()),
            ),
            (
                "usage: srv [-h] --port PORT\nsrv: error: the following arguments are required: --port\n",
                Lack::Option("--port".into()),
            ),
            ("Missing required argument: workspace", Lack::Option("--workspace".into())),
            ("Expected 'init' or 'run'", Lack::Subcommand("run".into())),
            (
                "Usage: tool <command>\n\nCommands:\n  stdio   Run the server over stdio\n",
                Lack::Subcommand("stdio".into()),
            ),
        ] {
            assert_eq!(lack(stderr), Some(want), "{stderr:?}");
        }
    }

    #[test]
    fn nothing_is_read_into_what_names_nothing() {
        for stderr in [
            "",
            "Server running on stdio",
            "Error: connect ECONNREFUSED 127.0.0.1:5432",
            "TypeError: Cannot read properties of undefined (reading 'x')",
            "Error: HTTP 401 Unauthorized: API key is invalid",
            "KeyError: 'name'",
            "error: unknown option '--x'",
        ] {
            assert_eq!(lack(stderr), None, "{stderr:?}");
        }
        // Bounded: a flood before the line is not read through.
        let flood = format!("{}\nBRAVE_API_KEY is not set\n", "x".repeat(1 << 20));
        assert_eq!(lack(&flood), Some(Lack::Env("BRAVE_API_KEY".into())));
    }
}

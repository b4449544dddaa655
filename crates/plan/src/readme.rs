//! The client configuration a package documents for itself: the `mcpServers`, `servers` or
//! `mcp.servers` snippet of its README (a fenced code block), or its `server.json`, that starts
//! this package. A registry maintainer points glassbox at `npm:NAME` with no configuration; the
//! user who installs the server copies that snippet, with its arguments and environment.
//!
//! Read as text within bounds and never run: at most [`MAX_README`] bytes, [`MAX_BLOCKS`]
//! fenced blocks of at most [`MAX_BLOCK`] bytes each, each parsed as JSON ([`crate::config`]'s
//! reader, with no variable of glassbox's own environment: `${HOME}` in a snippet is empty).
//! A snippet is used only when its entry runs this very package through a launcher (`npx -y
//! NAME`, `uvx NAME`): one that names another package, or a command of its own, is not.
//! Secret-named variables become canaries (as in any configuration); a placeholder path in the
//! arguments (`/Users/username/Desktop`, `/path/to/dir`, `~/Documents`) becomes the folder
//! the caller gives; a placeholder value of a URL-named variable or option (`<your-url>`,
//! `YOUR_API_URL`) becomes the caller's URL.

use crate::config::{self, EnvValue, Launch, ServerEntry, Vars};
use crate::install::{PackageSpec, Registry};
use glassbox_model::cut;
use std::path::{Path, PathBuf};

/// Most bytes of a README read.
pub const MAX_README: usize = 1 << 20;
/// Most fenced blocks looked at.
pub const MAX_BLOCKS: usize = 200;
/// Longest block parsed.
pub const MAX_BLOCK: usize = 64 * 1024;

/// What a snippet's placeholders become.
#[derive(Clone, Debug)]
pub struct Fill {
    /// A folder for a placeholder folder (visible to the server).
    pub path: String,
    /// A writable folder for a placeholder file (`/path/to/memory.json` becomes this folder's
    /// `memory.json`).
    pub files: String,
    /// A URL for a placeholder URL.
    pub url: String,
}

/// The snippet that starts the package, as glassbox will run it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snippet {
    /// Which fenced block of the README it is (1-based); 0 for `server.json`.
    pub block: usize,
    /// Its server's name in the snippet.
    pub entry: String,
    /// The server's arguments, placeholders filled.
    pub args: Vec<String>,
    /// Its environment (secret-named values as secrets: canaries at the audit).
    pub env: Vec<(String, EnvValue)>,
    /// What was filled in, said (`args[1] "/path/to/dir" → the package's folder`).
    pub filled: Vec<String>,
}

/// No variable is known: a snippet's `${...}` expands to nothing (or its default).
struct NoVars;

impl Vars for NoVars {
    fn env(&self, _: &str) -> Option<String> {
        None
    }
}

/// The snippet of `readme` (Markdown) that starts `spec`, the first one found.
pub fn from_readme(readme: &str, spec: &PackageSpec, fill: &Fill) -> Option<Snippet> {
    let text = cut(readme, MAX_README);
    blocks(text).into_iter().enumerate().find_map(|(i, block)| {
        entries(block)
            .into_iter()
            .find_map(|e| snippet(e, spec, fill, i + 1))
    })
}

/// The entry of a `server.json` that installs `spec`.
pub fn from_server_json(text: &str, spec: &PackageSpec, fill: &Fill) -> Option<Snippet> {
    let text = cut(text, MAX_README);
    config::server_json(text, &NoVars)
        .ok()?
        .into_iter()
        .find_map(|e| snippet(e, spec, fill, 0))
}

/// The package's own configuration in its installed folder `dir`: its `server.json`, else the
/// first README snippet that starts it (npm: `node_modules/NAME/README.md`; PyPI: the long
/// description in its `METADATA`, which is its README), with where it was found.
pub fn find(spec: &PackageSpec, dir: &Path, fill: &Fill) -> Option<(String, Snippet)> {
    let (root, readmes): (PathBuf, Vec<PathBuf>) = match spec.registry {
        Registry::Npm => {
            let root = dir.join("node_modules").join(&spec.name);
            let names = [
                "README.md",
                "readme.md",
                "Readme.md",
                "README.markdown",
                "README",
            ];
            let readmes = names.iter().map(|n| root.join(n)).collect();
            (root, readmes)
        }
        Registry::Pypi => (
            dir.to_path_buf(),
            pypi_metadata(spec, dir).into_iter().collect(),
        ),
    };
    let shown = |p: &Path| {
        p.strip_prefix(dir)
            .unwrap_or(p)
            .to_string_lossy()
            .into_owned()
    };
    if spec.registry == Registry::Npm {
        let path = root.join("server.json");
        if let Some(s) = read_bounded(&path).and_then(|t| from_server_json(&t, spec, fill)) {
            return Some((shown(&path), s));
        }
    }
    readmes.iter().find_map(|path| {
        let text = read_bounded(path)?;
        let s = from_readme(&text, spec, fill)?;
        Some((format!("{}, block {}", shown(path), s.block), s))
    })
}

/// The `METADATA` of `spec`'s distribution in a venv under `dir`.
fn pypi_metadata(spec: &PackageSpec, dir: &Path) -> Option<PathBuf> {
    let lib = dir.join("venv/lib");
    let want = crate::install::normalize(&spec.name);
    std::fs::read_dir(&lib).ok()?.flatten().find_map(|py| {
        let site = py.path().join("site-packages");
        std::fs::read_dir(site).ok()?.flatten().find_map(|d| {
            let name = d.file_name().to_string_lossy().into_owned();
            let dist = name.strip_suffix(".dist-info")?;
            let (n, _version) = dist.rsplit_once('-')?;
            (crate::install::normalize(n) == want).then(|| d.path().join("METADATA"))
        })
    })
}

/// At most [`MAX_README`] bytes of a regular file, as text (invalid UTF-8 replaced).
fn read_bounded(path: &Path) -> Option<String> {
    use std::io::Read;
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() {
        return None;
    }
    let mut buf = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(MAX_README as u64)
        .read_to_end(&mut buf)
        .ok()?;
    Some(String::from_utf8_lossy(&buf).into_owned())
}

/// `e` as this package's snippet, when it runs this package.
fn snippet(e: ServerEntry, spec: &PackageSpec, fill: &Fill, block: usize) -> Option<Snippet> {
    let Launch::Package { package, args } = e.launch else {
        return None;
    };
    if package.spec.registry != spec.registry || !same_name(spec, &package.spec.name) {
        return None;
    }
    let mut filled = Vec::new();
    let mut out_args = Vec::with_capacity(args.len());
    for (i, a) in args.iter().enumerate() {
        let option = match i {
            0 => "",
            _ => args[i - 1].as_str(),
        };
        match filled_arg(a, option, fill) {
            Some(v) => {
                filled.push(format!(
                    "argument {} {:?} → {}",
                    i + 1,
                    glassbox_model::truncate(&glassbox_model::printable(a), 80),
                    v
                ));
                out_args.push(v);
            }
            None => out_args.push(a.clone()),
        }
    }
    let env = e
        .env
        .into_iter()
        .map(|(name, v)| match v {
            EnvValue::Plain(value) if url_name(&name) && placeholder(&value) => {
                filled.push(format!("{name} → {}", fill.url));
                (name, EnvValue::Plain(fill.url.clone()))
            }
            EnvValue::Plain(value) if placeholder_path(&value) => {
                let v = path_for(&value, fill);
                filled.push(format!("{name} → {v}"));
                (name, EnvValue::Plain(v))
            }
            other => (name, other),
        })
        .collect();
    Some(Snippet {
        block,
        entry: e.name,
        args: out_args,
        env,
        filled,
    })
}

/// Whether `name` is `spec`'s name (PyPI's compared as PEP 503 normalizes them).
fn same_name(spec: &PackageSpec, name: &str) -> bool {
    match spec.registry {
        Registry::Npm => name == spec.name,
        Registry::Pypi => crate::install::normalize(name) == crate::install::normalize(&spec.name),
    }
}

/// What a placeholder argument becomes: a path a person would replace by their own (an
/// absolute path under a user's home or a `/path/to`, a relative `path/to/...`, `~/...`, a
/// Windows path), the folder; a
/// placeholder after a URL-named option (`--api-url <your-url>`), the URL. `None`: kept.
fn filled_arg(a: &str, option: &str, fill: &Fill) -> Option<String> {
    // `--root=/path/to/dir`: the value after `=`.
    if let Some((opt, value)) = a.split_once('=').filter(|(o, _)| o.starts_with('-')) {
        return filled_arg(value, opt, fill).map(|v| format!("{opt}={v}"));
    }
    if placeholder_path(a) {
        return Some(path_for(a, fill));
    }
    (url_name(option) && placeholder(a)).then(|| fill.url.clone())
}

/// What a placeholder path becomes: a file (its last part has an extension) of that name in
/// the writable folder, else the folder.
fn path_for(placeholder: &str, fill: &Fill) -> String {
    let last = placeholder
        .trim_end_matches(['/', '\\'])
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or("");
    let file = last
        .rsplit_once('.')
        .is_some_and(|(stem, ext)| !stem.is_empty() && (1..=5).contains(&ext.len()))
        && last
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    match file {
        true => format!("{}/{last}", fill.files.trim_end_matches('/')),
        false => fill.path.clone(),
    }
}

/// A path a snippet's reader is meant to replace with their own.
fn placeholder_path(a: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "/Users/",
        "/home/",
        "/path/to",
        "path/to/",
        "./path/to/",
        "/absolute/path",
        "/your/",
        "~/",
        "$HOME/",
    ];
    let windows = a.len() > 3 && a.as_bytes()[0].is_ascii_alphabetic() && a[1..].starts_with(":\\");
    PREFIXES.iter().any(|p| a.starts_with(p))
        || windows
        || (a.starts_with('<') && a.contains("path"))
}

/// A value a snippet's reader is meant to replace: `<...>`, `YOUR_...`, `your-...`, `xxx`,
/// `...`, or empty.
fn placeholder(v: &str) -> bool {
    let t = v.trim();
    let lower = t.to_ascii_lowercase();
    t.is_empty()
        || (t.starts_with('<') && t.ends_with('>'))
        || (t.starts_with('[') && t.ends_with(']'))
        || lower.starts_with("your")
        || lower.contains("your_")
        || lower.contains("your-")
        || lower.chars().all(|c| c == 'x' || c == '.' || c == '*')
}

/// Whether a variable or option name says it holds a URL.
fn url_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    ["url", "uri", "endpoint", "base_url", "host"]
        .iter()
        .any(|w| lower.contains(w))
}

/// The entries of one block: as is, or as the members of an object (`"mcpServers": {...}`
/// shown without its braces), with `//` comment lines and trailing commas left out (JSONC, as
/// VS Code's files are written).
fn entries(block: &str) -> Vec<ServerEntry> {
    if !block.contains("mcpServers") && !block.contains("\"servers\"") {
        return Vec::new();
    }
    let jsonc = without_comments(block);
    for text in [
        block.to_string(),
        format!("{{{block}}}"),
        jsonc.clone(),
        format!("{{{jsonc}}}"),
    ] {
        if let Ok(found) = config::client_config(&text, &NoVars) {
            return found;
        }
    }
    Vec::new()
}

/// `text` without `//` comment lines and without a comma before a closing bracket.
fn without_comments(text: &str) -> String {
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect();
    let joined = kept.join("\n");
    let mut out = String::with_capacity(joined.len());
    let chars: Vec<char> = joined.chars().collect();
    let mut in_string = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '"' && (i == 0 || chars[i - 1] != '\\') {
            in_string = !in_string;
        }
        if c == ',' && !in_string {
            let next = chars[i + 1..].iter().find(|c| !c.is_whitespace());
            if matches!(next, Some('}') | Some(']')) {
                i += 1;
                continue;
            }
        }
        out.push(c);
        i += 1;
    }
    out
}

/// The fenced code blocks of a Markdown text (```` ``` ```` or `~~~`), at most [`MAX_BLOCKS`],
/// each cut at [`MAX_BLOCK`]; an unclosed fence ends the text.
fn blocks(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut open: Option<(&str, usize)> = None;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let t = line.trim_start();
        let fence = ["```", "~~~"].into_iter().find(|f| t.starts_with(f));
        match (open, fence) {
            (None, Some(f)) => open = Some((f, offset + line.len())),
            (Some((f, start)), Some(g))
                if f == g && t.trim_end().trim_start_matches(g).is_empty() =>
            {
                let body = &text[start..offset];
                out.push(cut(body, MAX_BLOCK));
                open = None;
                if out.len() >= MAX_BLOCKS {
                    break;
                }
            }
            _ => {}
        }
        offset += line.len();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill() -> Fill {
        Fill {
            path: "/srv/pkg".into(),
            files: "/home/u".into(),
            url: "https://api.example.test/".into(),
        }
    }

    fn spec(s: &str) -> PackageSpec {
        PackageSpec::parse(s).unwrap().unwrap()
    }

    const GITHUB: &str = r#"# GitHub MCP Server

## Usage with Claude Desktop

```json
{
  "mcpServers": {
    "github": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-github"],
      "env": {
        "GITHUB_PERSONAL_ACCESS_TOKEN": "<YOUR_TOKEN>"
      }
    }
  }
}
```
"#;

    #[test]
    fn the_snippet_that_starts_the_package_is_found() {
        let s = from_readme(
            GITHUB,
            &spec("npm:@modelcontextprotocol/server-github"),
            &fill(),
        )
        .unwrap();
        assert_eq!(s.block, 1);
        assert_eq!(s.entry, "github");
        assert!(s.args.is_empty());
        assert_eq!(
            s.env,
            vec![(
                "GITHUB_PERSONAL_ACCESS_TOKEN".to_string(),
                EnvValue::secret()
            )]
        );
        // Another package's snippet is not this one's.
        assert_eq!(
            from_readme(GITHUB, &spec("npm:server-gitlab"), &fill()),
            None
        );
    }

    #[test]
    fn placeholders_are_filled_and_shapes_without_braces_or_with_comments_are_read() {
        let readme = "Setup:\n\n```jsonc\n\"mcpServers\": {\n  // the folders it may read\n  \"fs\": {\n    \"command\": \"npx\",\n    \"args\": [\"-y\", \"@scope/fs-server\", \"/Users/username/Desktop\", \"--api-url\", \"<your-url>\", \"--root=~/notes\"],\n    \"env\": {\"BASE_URL\": \"YOUR_BASE_URL\", \"MODE\": \"read\",},\n  },\n}\n```\n";
        let s = from_readme(readme, &spec("npm:@scope/fs-server"), &fill()).unwrap();
        assert_eq!(
            s.args,
            [
                "/srv/pkg",
                "--api-url",
                "https://api.example.test/",
                "--root=/srv/pkg"
            ]
        );
        assert!(s.env.contains(&(
            "BASE_URL".to_string(),
            EnvValue::Plain("https://api.example.test/".into())
        )));
        assert!(s
            .env
            .contains(&("MODE".to_string(), EnvValue::Plain("read".into()))));
        assert_eq!(s.filled.len(), 4, "{:?}", s.filled);
        // A placeholder file: that file in the writable folder.
        let memory = r#"```json
{"mcpServers": {"memory": {"command": "npx", "args": ["-y", "@scope/fs-server"],
  "env": {"MEMORY_FILE_PATH": "/path/to/custom/memory.json"}}}}
```
"#;
        let s2 = from_readme(memory, &spec("npm:@scope/fs-server"), &fill()).unwrap();
        assert_eq!(
            s2.env,
            [(
                "MEMORY_FILE_PATH".to_string(),
                EnvValue::Plain("/home/u/memory.json".into())
            )]
        );
    }

    #[test]
    fn pypi_names_match_as_pep_503_normalizes_them() {
        let readme = "```json\n{\"mcpServers\": {\"time\": {\"command\": \"uvx\", \"args\": [\"mcp-server-time\", \"--local-timezone=America/New_York\"]}}}\n```\n";
        let s = from_readme(readme, &spec("pypi:mcp_server_time"), &fill()).unwrap();
        assert_eq!(s.args, ["--local-timezone=America/New_York"]);
        // A relative placeholder path (mcp-server-git's `path/to/git/repo`): the folder.
        let git = "```json\n{\"mcpServers\": {\"git\": {\"command\": \"uvx\", \"args\": [\"mcp-server-git\", \"--repository\", \"path/to/git/repo\"]}}}\n```\n";
        let s = from_readme(git, &spec("pypi:mcp-server-git"), &fill()).unwrap();
        assert_eq!(s.args, ["--repository", "/srv/pkg"]);
    }

    #[test]
    fn an_installed_package_s_readme_and_metadata_are_found() {
        let dir = std::env::temp_dir().join(format!("gb-readme-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let npm = dir.join("node_modules/@modelcontextprotocol/server-github");
        std::fs::create_dir_all(&npm).unwrap();
        std::fs::write(npm.join("README.md"), GITHUB).unwrap();
        let (source, s) = find(
            &spec("npm:@modelcontextprotocol/server-github"),
            &dir,
            &fill(),
        )
        .unwrap();
        assert_eq!(
            source,
            "node_modules/@modelcontextprotocol/server-github/README.md, block 1"
        );
        assert_eq!(s.entry, "github");
        // A README that is a link to elsewhere is not followed.
        std::fs::remove_file(npm.join("README.md")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", npm.join("README.md")).unwrap();
        assert_eq!(
            find(
                &spec("npm:@modelcontextprotocol/server-github"),
                &dir,
                &fill()
            ),
            None
        );
        let dist = dir.join("venv/lib/python3.11/site-packages/mcp_server_time-0.6.2.dist-info");
        std::fs::create_dir_all(&dist).unwrap();
        std::fs::write(
            dist.join("METADATA"),
            "Metadata-Version: 2.4\nName: mcp-server-time\n\n# Time\n```json\n{\"mcpServers\": {\"time\": {\"command\": \"uvx\", \"args\": [\"mcp-server-time\", \"--local-timezone=UTC\"]}}}\n```\n",
        )
        .unwrap();
        let (source, s) = find(&spec("pypi:mcp-server-time"), &dir, &fill()).unwrap();
        assert!(source.ends_with("METADATA, block 1"), "{source}");
        assert_eq!(s.args, ["--local-timezone=UTC"]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_command_of_its_own_or_a_hostile_readme_gives_nothing() {
        let own = "```json\n{\"mcpServers\": {\"x\": {\"command\": \"node\", \"args\": [\"/opt/x/index.js\"]}}}\n```\n";
        assert_eq!(from_readme(own, &spec("npm:x"), &fill()), None);
        // Unclosed fences, broken JSON, a huge block, deep nesting: nothing, quickly.
        let hostile = format!(
            "```json\n{{\"mcpServers\": {}\n```\n```\n{}",
            "[".repeat(100_000),
            "x".repeat(2 << 20)
        );
        assert_eq!(from_readme(&hostile, &spec("npm:x"), &fill()), None);
        assert!(blocks(&"```\na\n```\n".repeat(1000)).len() <= MAX_BLOCKS);
    }
}

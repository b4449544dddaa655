//! Launcher command lines, as users write them in MCP client configurations, mapped to the
//! package they install and the program they run; pure (no I/O), so that every form is
//! tested as text.
//!
//! | launcher | forms | the package | the program |
//! |---|---|---|---|
//! | `npx`, `npm exec`, `npm x` | `npx [-y] PKG[@VER] ARGS`, `npx -p PKG [-p PKG2] CMD ARGS`, `npx --package=PKG -- CMD ARGS` | `PKG` (the first `-p`; the others beside it) | `CMD`; without `-p` the package's own |
//! | `bunx`, `bun x` | `bunx PKG[@VER] ARGS`, `bunx -p PKG CMD ARGS` | as npx | as npx |
//! | `pnpm dlx`, `pnpx` | `pnpm dlx PKG ARGS`, `pnpm --package=PKG dlx CMD ARGS` | as npx | as npx |
//! | `yarn dlx` | `yarn dlx PKG ARGS`, `yarn dlx -p PKG CMD ARGS` | as npx | as npx |
//! | `uvx`, `uv tool run` | `uvx PKG[@VER\|==VER\|[EXTRAS]] ARGS`, `uvx --from SPEC CMD ARGS`, `--with X` (repeatable, comma lists), `--python V` | `PKG`, or `SPEC` | `CMD`; without `--from`, `PKG`'s name |
//! | `pipx run` | `pipx run PKG ARGS`, `pipx run --spec SPEC CMD ARGS` | `PKG`, or `SPEC` | `CMD`, or `PKG`'s name |
//! | `cmd /c`, `cmd.exe /c` | Windows' wrapper around any of these | | |
//!
//! As the launchers themselves do, options end at the first word that is not one (or at
//! `--`): what follows is the program's. A program a launcher names is then looked up by that
//! exact name among the programs the install made ([`crate::install::entry_command`]).
//!
//! Refused, with the reason, never guessed: a git repository, a URL, a local path or an npm
//! alias as the source; a shell string (`npx -c`, `pnpm dlx -c`); Bun's own runtime
//! (`bunx --bun`: glassbox runs npm packages with Node.js); another registry or index
//! (`--registry`, `--index-url`: the relay knows the configured registry only); and any
//! option this table does not know, since it could change what is installed. Options that
//! change nothing of what is installed or run (`-y`, `--quiet`, `--isolated`, `--refresh`...)
//! are accepted and ignored; npm's `--legacy-peer-deps` and `--ignore-scripts` are passed to
//! the installer.

use crate::install::{npm_spec, pypi_requirement, Package, PackageSpec, Registry};

/// What a launcher line is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// Not a launcher: a command to run as it is.
    Command,
    /// A package to install and run, with the program's arguments.
    Package(Box<Package>, Vec<String>),
    /// A launcher line glassbox will not map, with why.
    Refused(String),
}

/// What an option does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// Changes nothing glassbox installs or runs.
    Ignore,
    /// Names a package (`npx -p`, `uvx --from`, `pipx run --spec`).
    Package,
    /// Names packages installed beside it (`uvx --with`, comma-separated).
    With,
    /// The Python version (`uvx --python`).
    Python,
    /// Passed to npm's installer.
    Installer,
    /// Refused, with why.
    Refuse(&'static str),
}

/// An option: its spellings, whether it takes a value, what it does.
struct Opt(&'static [&'static str], bool, Role);

const OTHER_REGISTRY: &str =
    "names another registry or index: glassbox installs from the configured registry only";

/// npm's `exec` (npx) options that matter or are common in configurations.
const NPM_EXEC: &[Opt] = &[
    Opt(&["-y", "--yes"], false, Role::Ignore),
    Opt(&["--no", "--no-install"], false, Role::Ignore),
    Opt(&["-q", "--quiet", "-s", "--silent"], false, Role::Ignore),
    Opt(&["--loglevel"], true, Role::Ignore),
    Opt(
        &["--prefer-offline", "--prefer-online", "--offline"],
        false,
        Role::Ignore,
    ),
    Opt(
        &["--no-update-notifier", "--no-fund", "--no-audit"],
        false,
        Role::Ignore,
    ),
    Opt(
        &["--legacy-peer-deps", "--ignore-scripts"],
        false,
        Role::Installer,
    ),
    Opt(&["-p", "--package"], true, Role::Package),
    Opt(
        &["-c", "--call"],
        true,
        Role::Refuse("runs a shell string, not a package's program"),
    ),
    Opt(&["--registry"], true, Role::Refuse(OTHER_REGISTRY)),
    Opt(
        &["-w", "--workspace", "--workspaces", "--prefix"],
        true,
        Role::Refuse("runs from a local project"),
    ),
];

/// bunx's options.
const BUNX: &[Opt] = &[
    Opt(
        &["--bun"],
        false,
        Role::Refuse(
            "runs the package under Bun's runtime; glassbox runs npm packages with Node.js",
        ),
    ),
    Opt(&["-p", "--package"], true, Role::Package),
    Opt(
        &["--no-install", "--verbose", "--silent", "-y", "--yes"],
        false,
        Role::Ignore,
    ),
];

/// pnpm's options around `dlx`.
const PNPM: &[Opt] = &[
    Opt(&["--package"], true, Role::Package),
    Opt(
        &["-s", "--silent", "--reporter=silent"],
        false,
        Role::Ignore,
    ),
    Opt(&["--allow-build"], true, Role::Ignore),
    Opt(
        &["-c", "--shell-mode"],
        false,
        Role::Refuse("runs a shell string, not a package's program"),
    ),
    Opt(&["--registry"], true, Role::Refuse(OTHER_REGISTRY)),
];

/// `yarn dlx`'s options.
const YARN_DLX: &[Opt] = &[
    Opt(&["-p", "--package"], true, Role::Package),
    Opt(&["-q", "--quiet"], false, Role::Ignore),
];

/// uvx's (`uv tool run`'s) options.
const UVX: &[Opt] = &[
    Opt(&["--from"], true, Role::Package),
    Opt(&["-w", "--with"], true, Role::With),
    Opt(&["-p", "--python"], true, Role::Python),
    Opt(
        &[
            "-q",
            "--quiet",
            "-v",
            "--verbose",
            "--isolated",
            "--refresh",
            "-n",
            "--no-cache",
            "--offline",
            "--native-tls",
            "--no-progress",
            "--reinstall",
            "-U",
            "--upgrade",
            "--no-env-file",
            "--no-python-downloads",
            "--managed-python",
            "--no-managed-python",
            "--no-config",
            "--compile-bytecode",
            "--system-certs",
        ],
        false,
        Role::Ignore,
    ),
    Opt(
        &[
            "--color",
            "--cache-dir",
            "--python-preference",
            "--refresh-package",
            "--reinstall-package",
            "--link-mode",
            "--keyring-provider",
            "--allow-insecure-host",
        ],
        true,
        Role::Ignore,
    ),
    Opt(
        &[
            "--index",
            "--default-index",
            "-i",
            "--index-url",
            "--extra-index-url",
            "-f",
            "--find-links",
        ],
        true,
        Role::Refuse(OTHER_REGISTRY),
    ),
    Opt(
        &[
            "--with-requirements",
            "--with-editable",
            "--env-file",
            "--directory",
            "--project",
        ],
        true,
        Role::Refuse("installs or reads local files"),
    ),
];

/// `pipx run`'s options.
const PIPX_RUN: &[Opt] = &[
    Opt(&["--spec"], true, Role::Package),
    Opt(&["--python"], true, Role::Python),
    Opt(
        &[
            "-q",
            "--quiet",
            "-v",
            "--verbose",
            "--no-cache",
            "--fetch-missing-python",
        ],
        false,
        Role::Ignore,
    ),
    Opt(&["-i", "--index-url"], true, Role::Refuse(OTHER_REGISTRY)),
    Opt(
        &["--path", "--pypackages", "-e", "--editable"],
        false,
        Role::Refuse("runs local files"),
    ),
    Opt(
        &["--pip-args"],
        true,
        Role::Refuse("passes its own options to pip"),
    ),
];

/// The options found before a launcher's first word, and the words from it on.
#[derive(Debug, Default)]
struct Options {
    packages: Vec<String>,
    with: Vec<String>,
    python: Option<String>,
    installer: Vec<String>,
}

/// Reads `words` as `table`'s options up to the first word that is not one (or `--`) into
/// `out`; returns the index of that word.
fn options(
    launcher: &str,
    words: &[String],
    table: &[Opt],
    out: &mut Options,
) -> Result<usize, String> {
    let find = |name: &str| table.iter().find(|o| o.0.contains(&name));
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        if w == "--" {
            return Ok(i + 1);
        }
        if !w.starts_with('-') || w == "-" {
            return Ok(i);
        }
        // `--name=value`, `-xVALUE`, `-abc` (flags together), or one option.
        let mut found: Vec<(&str, &Opt, Option<String>)> = Vec::new();
        if let Some((n, v)) = w.split_once('=').filter(|(n, _)| n.starts_with("--")) {
            if let Some(o) = find(n) {
                found.push((n, o, Some(v.to_string())));
            }
        } else if let Some(o) = find(w) {
            found.push((w, o, None));
        } else if !w.starts_with("--") && w.len() > 2 {
            match find(&w[..2]) {
                Some(o) if o.1 => found.push((&w[..2], o, Some(w[2..].to_string()))),
                _ => {
                    for k in 1..w.len() {
                        match w
                            .get(k..k + 1)
                            .map(|c| format!("-{c}"))
                            .and_then(|f| find(&f))
                        {
                            Some(o) if !o.1 => found.push((w, o, None)),
                            _ => {
                                found.clear();
                                break;
                            }
                        }
                    }
                }
            }
        }
        if found.is_empty() {
            let name = w.split('=').next().unwrap_or(w);
            return Err(format!(
                "{launcher} option {name:?} is not one glassbox knows: it could change what is \
                 installed, so it is not guessed (remove it, or audit the package as npm:NAME \
                 or pypi:NAME)"
            ));
        }
        for (name, Opt(_, takes_value, role), inline) in found {
            let value = match (takes_value, inline) {
                (false, _) => None,
                (true, Some(v)) => Some(v),
                (true, None) => {
                    i += 1;
                    Some(
                        words
                            .get(i)
                            .cloned()
                            .ok_or_else(|| format!("{launcher} option {name} needs a value"))?,
                    )
                }
            };
            match role {
                Role::Ignore => {}
                Role::Refuse(why) => return Err(format!("{launcher} {name} {why}")),
                Role::Package => out.packages.extend(value),
                Role::With => out.with.extend(
                    value
                        .iter()
                        .flat_map(|v| v.split(','))
                        .map(str::trim)
                        .filter(|v| !v.is_empty())
                        .map(str::to_string),
                ),
                Role::Python => out.python = value,
                Role::Installer => out.installer.push(name.to_string()),
            }
        }
        i += 1;
    }
    Ok(i)
}

/// An npm package word as a spec.
fn npm(word: &str) -> Result<PackageSpec, String> {
    let (name, version) = npm_spec(word)?;
    Ok(PackageSpec {
        registry: Registry::Npm,
        name,
        version,
        tarball: None,
        extras: Vec::new(),
    })
}

/// A PyPI requirement word as a spec (`at_form`: uvx's `PKG@VER`).
fn pypi(word: &str, at_form: bool) -> Result<PackageSpec, String> {
    let (name, extras, version) = pypi_requirement(word, at_form)?;
    Ok(PackageSpec {
        registry: Registry::Pypi,
        name,
        version,
        tarball: None,
        extras,
    })
}

/// A program name a launcher runs: a bare name (no path).
fn program(word: &str) -> Result<String, String> {
    if word.is_empty() || word.contains('/') || word.starts_with('.') || word.contains('\\') {
        return Err(format!("{word:?} is a path, not a program of the package"));
    }
    Ok(word.to_string())
}

/// The npm family (npx, npm exec, bunx, pnpm dlx, yarn dlx): options read, then the package
/// (`-p`'s, with the first word the program) or the first word as the package.
fn npm_family(
    launcher: &str,
    opts: Options,
    rest: &[String],
) -> Result<(Package, Vec<String>), String> {
    let Some(first) = rest.first() else {
        return Err(format!("{launcher} names no package"));
    };
    let (spec, with, prog) = if opts.packages.is_empty() {
        (npm(first)?, Vec::new(), None)
    } else {
        let mut specs = opts
            .packages
            .iter()
            .map(|p| npm(p))
            .collect::<Result<Vec<_>, _>>()?;
        let spec = specs.remove(0);
        (spec, specs, Some(program(first)?))
    };
    Ok((
        Package {
            spec,
            with,
            program: prog,
            python: None,
            installer_args: opts.installer,
            launcher: Vec::new(),
        },
        rest[1..].to_vec(),
    ))
}

/// The PyPI family (uvx, pipx run): the package is `--from`'s (or `--spec`'s) with the
/// first word the program, else the first word, whose name is the program.
fn pypi_family(
    launcher: &str,
    opts: Options,
    rest: &[String],
    at_form: bool,
) -> Result<(Package, Vec<String>), String> {
    let Some(first) = rest.first() else {
        return Err(format!("{launcher} names no package"));
    };
    let (spec, prog) = match opts.packages.as_slice() {
        [] => {
            let spec = pypi(first, at_form)?;
            let name = spec.name.clone();
            (spec, name)
        }
        [from] => (pypi(from, false)?, program(first)?),
        _ => return Err(format!("{launcher} names its package more than once")),
    };
    let with = opts
        .with
        .iter()
        .map(|w| pypi(w, false))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((
        Package {
            spec,
            with,
            program: Some(prog),
            python: opts.python,
            installer_args: Vec::new(),
            launcher: Vec::new(),
        },
        rest[1..].to_vec(),
    ))
}

/// What `argv` launches (see the module doc).
pub fn parse(argv: &[String]) -> Parsed {
    let Some(first) = argv.first() else {
        return Parsed::Command;
    };
    let base = first.rsplit(['/', '\\']).next().unwrap_or(first);
    let base = base
        .strip_suffix(".exe")
        .or_else(|| base.strip_suffix(".cmd"))
        .unwrap_or(base);
    let rest = &argv[1..];
    let word = |i: usize| rest.get(i).map(String::as_str);
    let mut opts = Options::default();
    let result = match (base, word(0)) {
        ("cmd", Some(c)) if c.eq_ignore_ascii_case("/c") => {
            let inner: Vec<String> = match &rest[1..] {
                [one] if one.contains(' ') => match crate::words::split_words(one) {
                    Ok(w) => w,
                    Err(e) => return Parsed::Refused(format!("cmd /c {one:?}: {e}")),
                },
                more => more.to_vec(),
            };
            return match parse(&inner) {
                Parsed::Package(mut package, args) => {
                    package.launcher = argv.to_vec();
                    Parsed::Package(package, args)
                }
                other => other,
            };
        }
        ("npx", _) => options("npx", rest, NPM_EXEC, &mut opts)
            .and_then(|i| npm_family("npx", opts, &rest[i..])),
        ("npm", Some("exec" | "x")) => options("npm exec", &rest[1..], NPM_EXEC, &mut opts)
            .and_then(|i| npm_family("npm exec", opts, &rest[1 + i..])),
        ("bunx", _) => options("bunx", rest, BUNX, &mut opts)
            .and_then(|i| npm_family("bunx", opts, &rest[i..])),
        ("bun", Some("x")) => options("bun x", &rest[1..], BUNX, &mut opts)
            .and_then(|i| npm_family("bun x", opts, &rest[1 + i..])),
        ("pnpx", _) => options("pnpx", rest, PNPM, &mut opts)
            .and_then(|i| npm_family("pnpx", opts, &rest[i..])),
        ("pnpm", _) => {
            // pnpm's options may come before `dlx` as well as after it; without `dlx`
            // (`pnpm start`) it is a command like any other.
            let Some(at) = rest.iter().position(|w| w == "dlx") else {
                return Parsed::Command;
            };
            options("pnpm", &rest[..at], PNPM, &mut opts)
                .and_then(|i| match i == at {
                    true => options("pnpm dlx", &rest[at + 1..], PNPM, &mut opts),
                    false => Err(format!("pnpm {:?} before dlx is not an option", rest[i])),
                })
                .and_then(|j| npm_family("pnpm dlx", opts, &rest[at + 1 + j..]))
        }
        ("yarn", Some("dlx")) => options("yarn dlx", &rest[1..], YARN_DLX, &mut opts)
            .and_then(|i| npm_family("yarn dlx", opts, &rest[1 + i..])),
        ("uvx", _) => options("uvx", rest, UVX, &mut opts)
            .and_then(|i| pypi_family("uvx", opts, &rest[i..], true)),
        ("uv", Some("tool")) if word(1) == Some("run") => {
            options("uv tool run", &rest[2..], UVX, &mut opts)
                .and_then(|i| pypi_family("uv tool run", opts, &rest[2 + i..], true))
        }
        ("pipx", Some("run")) => options("pipx run", &rest[1..], PIPX_RUN, &mut opts)
            .and_then(|i| pypi_family("pipx run", opts, &rest[1 + i..], false)),
        ("docker" | "podman", _) => Err(format!(
            "a {base} container: glassbox audits the server itself, not a container image"
        )),
        _ => return Parsed::Command,
    };
    match result {
        Ok((mut package, args)) => {
            package.launcher = argv.to_vec();
            Parsed::Package(Box::new(package), args)
        }
        Err(e) => Parsed::Refused(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        crate::words::split_words(s).unwrap()
    }

    /// `(registry:name, version, extras, with, program, python, args)` of a line.
    type Mapped = (
        String,
        Option<String>,
        Vec<String>,
        Vec<String>,
        Option<String>,
        Option<String>,
        Vec<String>,
    );

    fn package(line: &str) -> Mapped {
        match parse(&words(line)) {
            Parsed::Package(p, args) => {
                assert_eq!(p.launcher, words(line));
                (
                    p.spec.key(),
                    p.spec.version.clone(),
                    p.spec.extras.clone(),
                    p.with.iter().map(|w| w.display()).collect(),
                    p.program.clone(),
                    p.python.clone(),
                    args,
                )
            }
            other => panic!("{line}: {other:?}"),
        }
    }

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn uvx_forms_name_the_package_and_the_program() {
        // The case a new user hit: --from names the package, the word after it the program.
        let p = package("uvx --from office-word-mcp-server==1.1.11 word_mcp_server");
        assert_eq!(p.0, "pypi:office-word-mcp-server");
        assert_eq!(p.1.as_deref(), Some("1.1.11"));
        assert_eq!(p.4.as_deref(), Some("word_mcp_server"));
        let p = package(
            "uvx --from awslabs-aws-documentation-mcp-server==1.2.3 awslabs.aws-documentation-mcp-server",
        );
        assert_eq!(p.0, "pypi:awslabs-aws-documentation-mcp-server");
        assert_eq!(p.4.as_deref(), Some("awslabs.aws-documentation-mcp-server"));
        let p = package("uvx mcp-server-time --local-timezone=UTC");
        assert_eq!((p.0.as_str(), p.1.clone()), ("pypi:mcp-server-time", None));
        assert_eq!(p.4.as_deref(), Some("mcp-server-time"));
        assert_eq!(p.6, s(&["--local-timezone=UTC"]));
        let p = package("uvx mcp-server-time@2026.10.19");
        assert_eq!(p.1.as_deref(), Some("2026.10.19"));
        assert_eq!(p.4.as_deref(), Some("mcp-server-time"));
        let p = package("uvx mcp-server-time==2026.10.19");
        assert_eq!(p.1.as_deref(), Some("2026.10.19"));
        assert_eq!(package("uvx mcp-server-time@latest").1, None);
        let p = package("uvx --from 'mcp-x[cli,HTTP]>=1.2,<2' mcp-x serve");
        assert_eq!(p.1.as_deref(), Some(">=1.2,<2"));
        assert_eq!(p.2, s(&["cli", "http"]));
        assert_eq!(p.6, s(&["serve"]));
        let p = package("uvx --with numpy==2.0.0,pandas --with rich -p 3.12 -q tool-x");
        assert_eq!(p.3, s(&["pypi:numpy==2.0.0", "pypi:pandas", "pypi:rich"]));
        assert_eq!(p.5.as_deref(), Some("3.12"));
        let p = package("uv tool run --python=3.11 mcp-server-git --repository /r");
        assert_eq!(p.0, "pypi:mcp-server-git");
        assert_eq!(p.5.as_deref(), Some("3.11"));
        assert_eq!(p.6, s(&["--repository", "/r"]));
        // Options after the package are the program's.
        let p = package("uvx mcp-server-fetch --from x");
        assert_eq!(p.6, s(&["--from", "x"]));
    }

    #[test]
    fn pipx_forms() {
        let p = package("pipx run --spec mcp-server-time==2026.10.19 mcp-server-time --x");
        assert_eq!(p.0, "pypi:mcp-server-time");
        assert_eq!(p.1.as_deref(), Some("2026.10.19"));
        assert_eq!(p.4.as_deref(), Some("mcp-server-time"));
        assert_eq!(p.6, s(&["--x"]));
        let p = package("pipx run mcp-server-git");
        assert_eq!(p.4.as_deref(), Some("mcp-server-git"));
    }

    #[test]
    fn npm_family_forms() {
        let p = package("npx -y @modelcontextprotocol/server-memory@2026.8.31");
        assert_eq!(p.0, "npm:@modelcontextprotocol/server-memory");
        assert_eq!(p.1.as_deref(), Some("2026.8.31"));
        assert_eq!(p.4, None);
        let p = package("npx -p @scope/tools@1.0.0 tools-server --port 0");
        assert_eq!(p.0, "npm:@scope/tools");
        assert_eq!(p.4.as_deref(), Some("tools-server"));
        assert_eq!(p.6, s(&["--port", "0"]));
        let p = package("npx --package=@scope/tools -p helper@2 -- tools-server -y");
        assert_eq!(p.3, s(&["npm:helper@2"]));
        assert_eq!(p.4.as_deref(), Some("tools-server"));
        assert_eq!(p.6, s(&["-y"]));
        let p = package("npx -y -- server-x@latest /data");
        assert_eq!((p.0.as_str(), p.1.clone()), ("npm:server-x", None));
        assert_eq!(p.6, s(&["/data"]));
        let p = package("/usr/local/bin/npx --yes --legacy-peer-deps server-x@^1.2");
        assert_eq!(p.1.as_deref(), Some("^1.2"));
        let p = package("npm exec --yes -- server-x /data");
        assert_eq!((p.0.as_str(), p.6.clone()), ("npm:server-x", s(&["/data"])));
        let p = package("npm x --package=server-x -- serve");
        assert_eq!(p.4.as_deref(), Some("serve"));
        let p = package("bunx server-x@1.0.0 a");
        assert_eq!((p.1.as_deref(), p.6.clone()), (Some("1.0.0"), s(&["a"])));
        let p = package("bun x -p server-x serve");
        assert_eq!(p.4.as_deref(), Some("serve"));
        let p = package("pnpm dlx server-x");
        assert_eq!(p.0, "npm:server-x");
        let p = package("pnpm --package=server-x@2 dlx serve --k");
        assert_eq!((p.4.as_deref(), p.6.clone()), (Some("serve"), s(&["--k"])));
        let p = package("pnpm dlx --package server-x serve");
        assert_eq!(p.4.as_deref(), Some("serve"));
        let p = package("yarn dlx -p server-x serve");
        assert_eq!(p.4.as_deref(), Some("serve"));
        let p = package("cmd /c npx -y server-x");
        assert_eq!(p.0, "npm:server-x");
        let p = package("cmd.exe /C \"npx -y server-x /d\"");
        assert_eq!(p.6, s(&["/d"]));
        let p = package("npx -yq server-x");
        assert_eq!(p.0, "npm:server-x");
        let p = package("npx -pserver-x serve");
        assert_eq!(p.4.as_deref(), Some("serve"));
    }

    #[test]
    fn commands_stay_commands() {
        for line in [
            "python3 server.py",
            "node /srv/index.js",
            "pnpm start",
            "uv run server.py",
            "npm start",
            "cmd /c python server.py",
        ] {
            assert_eq!(parse(&words(line)), Parsed::Command, "{line}");
        }
    }

    #[test]
    fn what_cannot_be_mapped_is_refused_with_why() {
        for (line, why) in [
            ("uvx --from git+https://github.com/a/b x", "git repository"),
            ("uvx --from ./local x", "local path"),
            (
                "uvx --from 'x @ https://e.example/x.whl' x",
                "direct reference",
            ),
            (
                "uvx --index-url https://mirror.example/simple x",
                "another registry",
            ),
            ("uvx --made-up x", "not one glassbox knows"),
            ("uvx --from a --from b x", "more than once"),
            ("uvx x@>=1", "exact version"),
            ("uvx", "names no package"),
            ("npx github:user/repo", "git repository"),
            ("npx user/repo", "GitHub repository"),
            ("npx ./server", "local path"),
            ("npx /abs/pkg.tgz", "local path"),
            ("npx https://e.example/x.tgz", "URL"),
            ("npx npm:other@1", "alias"),
            ("npx x@github:user/repo", "names a source"),
            ("npx -c 'server --x'", "shell string"),
            ("npx --registry=https://r.example x", "another registry"),
            ("npx --frobnicate x", "not one glassbox knows"),
            ("npx -p x ./bin.js", "a path"),
            ("npx -y", "names no package"),
            ("bunx --bun x", "Bun's runtime"),
            ("pnpm dlx -c 'x y'", "shell string"),
            (
                "pipx run --spec git+https://e.example/r.git x",
                "git repository",
            ),
            ("pipx run --path x", "local files"),
            ("docker run -i --rm mcp/x", "container"),
        ] {
            match parse(&words(line)) {
                Parsed::Refused(e) => assert!(e.contains(why), "{line}: {e}"),
                other => panic!("{line}: {other:?}"),
            }
        }
    }
}

//! Where a store is: a SQLite file or a PostgreSQL database, from `--store` or
//! `$GLASSBOX_STORE`; printed with any password hidden.

use crate::Error;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// Where a store is. A `postgres://` or `postgresql://` URL (any case) is a PostgreSQL
/// database; anything else is the path of a SQLite file.
///
/// `Display` and `Debug` never show a password: `postgres://user:***@host/db`
/// ([`StoreLocation::display`]).
#[derive(Clone, PartialEq, Eq)]
pub enum StoreLocation {
    /// A SQLite file (created, with its parent directories, when missing).
    Sqlite(PathBuf),
    /// A PostgreSQL connection URL: `postgres://[USER[:PASSWORD]@]HOST[:PORT]/DATABASE[?...]`
    /// (libpq's URL form; `host=/socket/dir` in the query for a unix socket).
    Postgres(String),
}

impl StoreLocation {
    /// The location `text` names: a PostgreSQL URL, else a SQLite path.
    pub fn parse(text: impl Into<OsString>) -> StoreLocation {
        let text = text.into();
        match text.to_str() {
            Some(url) if is_postgres_url(url) => StoreLocation::Postgres(url.to_string()),
            _ => StoreLocation::Sqlite(PathBuf::from(text)),
        }
    }

    /// The default store: `$GLASSBOX_STORE` if set (a path or a PostgreSQL URL), else
    /// `$GLASSBOX_STATE_DIR/store.sqlite` if set, else `~/.local/state/glassbox/store.sqlite`.
    /// Empty variables count as unset.
    pub fn from_env() -> Result<StoreLocation, Error> {
        default_from(|name| std::env::var_os(name))
    }

    /// The location as it may be printed: the path, or the URL with its password (in the
    /// user part or a `password=` parameter) replaced by `***`. Named as
    /// [`Path::display`], so that code printing either reads the same.
    pub fn display(&self) -> impl fmt::Display + '_ {
        self
    }

    /// Where `review reject` keeps the regression cases it makes, beside the store: the
    /// SQLite file's folder's `regressions/`; for PostgreSQL, `$GLASSBOX_STATE_DIR/regressions`,
    /// else `~/.local/state/glassbox/regressions`.
    ///
    /// # Errors
    /// PostgreSQL, and neither variable set.
    pub fn regressions_dir(&self) -> Result<PathBuf, Error> {
        match self {
            StoreLocation::Sqlite(p) => Ok(p
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
                .join("regressions")),
            StoreLocation::Postgres(_) => {
                let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
                if let Some(dir) = var("GLASSBOX_STATE_DIR") {
                    Ok(PathBuf::from(dir).join("regressions"))
                } else if let Some(home) = var("HOME") {
                    Ok(PathBuf::from(home).join(".local/state/glassbox/regressions"))
                } else {
                    Err(Error::NoStorePath)
                }
            }
        }
    }

    /// The SQLite file, if it is one.
    pub fn sqlite_path(&self) -> Option<&Path> {
        match self {
            StoreLocation::Sqlite(p) => Some(p),
            StoreLocation::Postgres(_) => None,
        }
    }
}

impl fmt::Display for StoreLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreLocation::Sqlite(p) => write!(f, "{}", p.display()),
            StoreLocation::Postgres(url) => f.write_str(&redact(url)),
        }
    }
}

impl fmt::Debug for StoreLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreLocation::Sqlite(p) => f.debug_tuple("Sqlite").field(p).finish(),
            StoreLocation::Postgres(url) => f.debug_tuple("Postgres").field(&redact(url)).finish(),
        }
    }
}

impl From<OsString> for StoreLocation {
    fn from(text: OsString) -> StoreLocation {
        StoreLocation::parse(text)
    }
}

impl From<&OsStr> for StoreLocation {
    fn from(text: &OsStr) -> StoreLocation {
        StoreLocation::parse(text)
    }
}

impl From<PathBuf> for StoreLocation {
    /// Always a SQLite file, whatever the path looks like.
    fn from(path: PathBuf) -> StoreLocation {
        StoreLocation::Sqlite(path)
    }
}

impl From<&Path> for StoreLocation {
    /// Always a SQLite file, whatever the path looks like.
    fn from(path: &Path) -> StoreLocation {
        StoreLocation::Sqlite(path.into())
    }
}

impl FromStr for StoreLocation {
    type Err = std::convert::Infallible;

    fn from_str(text: &str) -> Result<StoreLocation, Self::Err> {
        Ok(StoreLocation::parse(text))
    }
}

/// Whether `text` is a `postgres://` or `postgresql://` URL (the scheme in any case).
pub(crate) fn is_postgres_url(text: &str) -> bool {
    ["postgres://", "postgresql://"].iter().any(|scheme| {
        text.get(..scheme.len())
            .is_some_and(|s| s.eq_ignore_ascii_case(scheme))
    })
}

/// `url` with the password of its user part and of any `password=` parameter replaced by
/// `***`. Works on the text alone (no decoding), so an unparseable URL is redacted too.
pub fn redact(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_string();
    };
    let (scheme, rest) = url.split_at(scheme_end);
    // The authority ends at the first `/`, `?` or `#`; its user part at its last `@`.
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let mut out = String::from(scheme);
    match authority.rfind('@') {
        Some(at) => {
            let (userinfo, host) = authority.split_at(at);
            match userinfo.split_once(':') {
                Some((user, _password)) => {
                    out.push_str(user);
                    out.push_str(":***");
                }
                None => out.push_str(userinfo),
            }
            out.push_str(host);
        }
        None => out.push_str(authority),
    }
    match tail.split_once('?') {
        Some((path, query)) => {
            out.push_str(path);
            out.push('?');
            let (query, fragment) = match query.split_once('#') {
                Some((q, f)) => (q, Some(f)),
                None => (query, None),
            };
            let params: Vec<String> = query
                .split('&')
                .map(|p| match p.split_once('=') {
                    Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                    _ => p.to_string(),
                })
                .collect();
            out.push_str(&params.join("&"));
            if let Some(f) = fragment {
                out.push('#');
                out.push_str(f);
            }
        }
        None => out.push_str(tail),
    }
    out
}

/// [`StoreLocation::from_env`] over `var`.
pub(crate) fn default_from(var: impl Fn(&str) -> Option<OsString>) -> Result<StoreLocation, Error> {
    let var = |name| var(name).filter(|v| !v.is_empty());
    if let Some(store) = var("GLASSBOX_STORE") {
        Ok(StoreLocation::parse(store))
    } else if let Some(dir) = var("GLASSBOX_STATE_DIR") {
        Ok(StoreLocation::Sqlite(
            PathBuf::from(dir).join("store.sqlite"),
        ))
    } else if let Some(home) = var("HOME") {
        Ok(StoreLocation::Sqlite(
            PathBuf::from(home).join(".local/state/glassbox/store.sqlite"),
        ))
    } else {
        Err(Error::NoStorePath)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_select_postgres_and_anything_else_is_a_file() {
        for url in [
            "postgres://u@h/db",
            "postgresql://h/db",
            "POSTGRES://h/db",
            "PostgreSQL://h:5432/db?sslmode=disable",
        ] {
            assert_eq!(
                StoreLocation::parse(url),
                StoreLocation::Postgres(url.into()),
                "{url}"
            );
        }
        for path in [
            "store.sqlite",
            "/var/lib/glassbox/store.sqlite",
            "postgres:/not-a-url",
            "./postgres://x",
            "sqlite://x",
        ] {
            assert_eq!(
                StoreLocation::parse(path),
                StoreLocation::Sqlite(path.into()),
                "{path}"
            );
        }
        let odd: OsString = std::os::unix::ffi::OsStringExt::from_vec(vec![b'p', b'/', 0xff]);
        assert_eq!(
            StoreLocation::from(odd.clone()),
            StoreLocation::Sqlite(odd.into())
        );
        // A path is a path even when it looks like a URL.
        assert_eq!(
            StoreLocation::from(PathBuf::from("postgres://h/db")),
            StoreLocation::Sqlite("postgres://h/db".into())
        );
    }

    #[test]
    fn passwords_are_never_shown() {
        let cases = [
            (
                "postgres://gb:s3cret@db.example:5432/glassbox",
                "postgres://gb:***@db.example:5432/glassbox",
            ),
            (
                "postgresql://gb:p%40ss:w@rd@db/glassbox?sslmode=disable",
                "postgresql://gb:***@db/glassbox?sslmode=disable",
            ),
            (
                "postgres://db/glassbox?user=gb&password=s3cret&application_name=x",
                "postgres://db/glassbox?user=gb&password=***&application_name=x",
            ),
            (
                "postgres://gb:s3cret@db?Password=s3cret",
                "postgres://gb:***@db?Password=***",
            ),
            ("postgres://gb@db/glassbox", "postgres://gb@db/glassbox"),
            ("postgres://db", "postgres://db"),
            ("postgres://:s3cret@db", "postgres://:***@db"),
        ];
        for (url, shown) in cases {
            let loc = StoreLocation::parse(url);
            assert_eq!(loc.to_string(), shown, "{url}");
            assert_eq!(loc.display().to_string(), shown, "{url}");
            assert!(!format!("{loc:?}").contains("s3cret"), "{loc:?}");
            assert!(!format!("{loc:?}").contains("w@rd"), "{loc:?}");
        }
        let path = StoreLocation::parse("/a/b.sqlite");
        assert_eq!(path.to_string(), "/a/b.sqlite");
        assert_eq!(format!("{path:?}"), r#"Sqlite("/a/b.sqlite")"#);
    }

    #[test]
    fn default_order() {
        fn env<'a>(vars: &'a [(&str, &str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
            move |name| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.into())
        }
        let all = [
            ("GLASSBOX_STORE", "postgres://gb:pw@db/glassbox"),
            ("GLASSBOX_STATE_DIR", "/state"),
            ("HOME", "/home/u"),
        ];
        assert_eq!(
            default_from(env(&all)).unwrap(),
            StoreLocation::Postgres("postgres://gb:pw@db/glassbox".into())
        );
        assert_eq!(
            default_from(env(&[("GLASSBOX_STORE", "/s/db")])).unwrap(),
            StoreLocation::Sqlite("/s/db".into())
        );
        assert_eq!(
            default_from(env(&all[1..])).unwrap(),
            StoreLocation::Sqlite("/state/store.sqlite".into())
        );
        let empty = [("GLASSBOX_STORE", ""), ("HOME", "/home/u")];
        assert_eq!(
            default_from(env(&empty)).unwrap(),
            StoreLocation::Sqlite("/home/u/.local/state/glassbox/store.sqlite".into())
        );
        assert!(matches!(default_from(env(&[])), Err(Error::NoStorePath)));
    }
}

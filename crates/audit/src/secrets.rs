//! The sandbox user and the planted secrets of an audit (the same in every run), the bait
//! variables, the canaries of declared secrets and the input marker: fresh per audit.

use crate::canary;
use crate::lazykey::LazyKey;
use crate::Error;
use glassbox_model::Honeytoken;
use glassbox_sandbox::honeytokens;

/// The sandbox user and the planted secrets: made once per audit, the same in every run (a
/// secret found outbound in any run is then one of the manifest's). The planted files hold the
/// sample workspace too ([`glassbox_sandbox::workspace`]), which is no secret.
#[derive(Clone)]
pub(crate) struct Secrets {
    pub user: String,
    pub hostname: String,
    pub home: String,
    pub files: Vec<glassbox_sandbox::PlantedFile>,
    pub tokens: Vec<Honeytoken>,
    pub ssh_agent: String,
    /// The RSA key, made when first opened (where glassbox can hold that open).
    pub lazy_rsa: Option<LazyKey>,
}

/// Where the RSA key is planted, under home.
const RSA_KEY: &str = ".ssh/id_rsa";

impl Secrets {
    pub(crate) fn fresh() -> Result<Secrets, Error> {
        Secrets::make(LazyKey::available())
    }

    /// The planted kubeconfig names the audit's CA as its cluster's (`certificate-authority-
    /// data`), so that a client that uses it, as Kubernetes clients do, trusts the edge that
    /// answers for that cluster (its `.test` address) and what it sends there is read.
    pub(crate) fn trust_in_kubeconfig(&mut self, ca_pem: &str) {
        use base64::Engine as _;
        let data = base64::engine::general_purpose::STANDARD.encode(ca_pem);
        for f in self
            .files
            .iter_mut()
            .filter(|f| f.path.ends_with("/.kube/config"))
        {
            let text = String::from_utf8_lossy(&f.contents);
            let patched: Vec<String> = text
                .lines()
                .map(|l| match l.split_once("certificate-authority-data:") {
                    Some((indent, _)) => format!("{indent}certificate-authority-data: {data}"),
                    None => l.to_string(),
                })
                .collect();
            f.contents = (patched.join("\n") + "\n").into_bytes();
        }
    }

    /// Fresh secrets with every file made now (the RSA key too): for a sandbox that runs
    /// elsewhere (a microVM), where glassbox cannot hold the key's first open.
    pub(crate) fn fresh_eager() -> Result<Secrets, Error> {
        Secrets::make(false)
    }

    fn make(lazy: bool) -> Result<Secrets, Error> {
        let user = honeytokens::user_name().map_err(Error::Honeytokens)?;
        let hostname = "devbox".to_string();
        let home = format!("/home/{user}");
        let lazy_rsa = lazy.then(|| LazyKey {
            user: user.clone(),
            hostname: hostname.clone(),
            made: Default::default(),
        });
        let (mut files, tokens) = match lazy_rsa {
            Some(_) => honeytokens::generate_with(&home, &user, &hostname, None),
            None => honeytokens::generate(&home, &user, &hostname),
        }
        .map_err(Error::Honeytokens)?;
        files.extend(planted_not_secret(&home));
        Ok(Secrets {
            user,
            hostname,
            home,
            files,
            tokens,
            ssh_agent: canary::ssh_agent_path(),
            lazy_rsa,
        })
    }

    /// The same user, home and host with new values in every planted file (the RSA key made
    /// now), the kubeconfig trusting `ca_pem` as before; the values that are not files (a
    /// declared secret's canary, the bait variables, an elicitation's canary) kept: they are
    /// the server's environment and answers, not planted files. For dual execution.
    pub(crate) fn refreshed(&self, ca_pem: Option<&str>) -> Result<Secrets, Error> {
        let (mut files, tokens) = honeytokens::generate(&self.home, &self.user, &self.hostname)
            .map_err(Error::Honeytokens)?;
        files.extend(planted_not_secret(&self.home));
        let mut fresh = Secrets {
            user: self.user.clone(),
            hostname: self.hostname.clone(),
            home: self.home.clone(),
            files,
            tokens,
            ssh_agent: self.ssh_agent.clone(),
            lazy_rsa: None,
        };
        fresh.tokens.extend(
            self.tokens
                .iter()
                .filter(|t| !t.path.starts_with('/'))
                .cloned(),
        );
        if let Some(pem) = ca_pem {
            fresh.trust_in_kubeconfig(pem);
        }
        Ok(fresh)
    }

    /// The RSA key's path inside the sandbox.
    pub(crate) fn rsa_path(&self) -> String {
        format!("{}/{RSA_KEY}", self.home)
    }

    /// Once the lazily made key exists: the file planted with it and its secret listed, so
    /// that a later run plants it as is and checks look for it.
    pub(crate) fn settle_rsa(&mut self) {
        let Some(pem) = self.lazy_rsa.as_ref().and_then(LazyKey::key) else {
            return;
        };
        let path = self.rsa_path();
        for f in self.files.iter_mut().filter(|f| f.path == path) {
            f.contents = pem.clone().into_bytes();
        }
        for t in self.tokens.iter_mut().filter(|t| t.path == path) {
            t.secrets = vec![honeytokens::key_secret(&pem)];
            t.random = honeytokens::key_random(&pem);
        }
        self.lazy_rsa = None;
    }
}

/// What is planted besides the secrets: the sample workspace and, where the host has a
/// Chromium, the launcher browser drivers are pointed at ([`glassbox_sandbox::browser`]).
fn planted_not_secret(home: &str) -> Vec<glassbox_sandbox::PlantedFile> {
    let mut files = glassbox_sandbox::workspace::files(home);
    files.extend(glassbox_sandbox::browser::files());
    files
}

/// A fresh canary for a declared secret (an API key in a configuration's `env`): random,
/// shaped like a token, unique to this audit.
pub(crate) fn env_canary() -> Result<String, Error> {
    let bytes = honeytokens::random_bytes(20).map_err(Error::Honeytokens)?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("gbx_{hex}"))
}

/// Environment variables planted as bait in every run (the install's too): names that no SDK
/// or library reads on its own (unlike `AWS_SECRET_ACCESS_KEY` or `GITHUB_TOKEN`, which a
/// client library would legitimately send to its own service), values fresh per audit, so
/// only code that harvests the whole environment sends them anywhere, and
/// `canary-exfiltration` catches them wherever they go (`env:NAME`, kind `bait-env`).
pub(crate) const BAIT_ENV: &[(&str, usize)] = &[("DEPLOY_TOKEN", 40), ("PROD_DB_PASSWORD", 24)];

/// A fresh value for a bait variable: `len` characters of `[A-Za-z0-9]`.
pub(crate) fn bait_value(len: usize) -> Result<String, Error> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let bytes = honeytokens::random_bytes(len).map_err(Error::Honeytokens)?;
    Ok(bytes
        .iter()
        .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
        .collect())
}

/// A bait variable `name`: a fresh value (`prefix` and `len` random characters) and the
/// planted secret it is (`env:NAME`, kind `bait-env`, followed like the planted files).
pub(crate) fn bait_env(
    name: &str,
    prefix: &str,
    len: usize,
) -> Result<(String, glassbox_model::Honeytoken), Error> {
    let random = bait_value(len)?;
    let value = format!("{prefix}{random}");
    let token = glassbox_model::Honeytoken {
        path: format!("env:{name}"),
        kind: "bait-env".into(),
        secrets: vec![value.clone()],
        random: vec![random],
        ..Default::default()
    };
    Ok((value, token))
}

/// A fresh marker for the generated tool arguments: `gbm` and 10 hex digits (fits a host
/// name, a path, a URL and an e-mail address as is).
pub(crate) fn input_marker() -> Result<String, Error> {
    let bytes = honeytokens::random_bytes(5).map_err(Error::Honeytokens)?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("gbm{hex}"))
}

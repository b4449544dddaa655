//! Fresh, format-valid fake secrets for every run.
//!
//! Each secret is random, in the exact format of the real thing (GitHub and npm tokens carry
//! their CRC32 checksum, SSH keys come from `ssh-keygen`), and never contains an example value
//! or a word such as "honey", "canary" or "fake", which malware looks for. They are planted at
//! the places credential stealers read; never in the server's working directory, where
//! dotenv-style loaders read `./.env` legitimately.

use base64::Engine as _;
use glassbox_model::Honeytoken;
use std::io::{self, Read};
use std::path::Path;
use std::process::Command;

/// A file to create inside the sandbox.
#[derive(Clone, Debug)]
pub struct PlantedFile {
    /// Absolute path inside the sandbox.
    pub path: String,
    /// Content.
    pub contents: Vec<u8>,
    /// Permission bits.
    pub mode: u32,
}

/// Random bytes from the kernel.
pub fn random_bytes(n: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; n];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut buf)?;
    Ok(buf)
}

const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// `n` random characters from `alphabet` (rejection sampling: no modulo bias).
fn random_from(alphabet: &[u8], n: usize) -> io::Result<String> {
    let mut out = String::with_capacity(n);
    let limit = 256 - (256 % alphabet.len());
    while out.len() < n {
        for b in random_bytes(n * 2)? {
            if (b as usize) < limit && out.len() < n {
                out.push(alphabet[b as usize % alphabet.len()] as char);
            }
        }
    }
    Ok(out)
}

/// CRC-32 (IEEE), bitwise: eight lines, not worth a dependency.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn base62_fixed(mut v: u32, width: usize) -> String {
    let mut digits = vec![b'0'; width];
    for d in digits.iter_mut().rev() {
        *d = BASE62[(v % 62) as usize];
        v /= 62;
    }
    String::from_utf8(digits).unwrap_or_default()
}

/// A GitHub-format token (`gho_`, `npm_`...): prefix, 30 random base62 characters, and the
/// 6-character base62 CRC32 of those 30, as GitHub's and npm's token scanners verify.
pub fn checksummed_token(prefix: &str) -> io::Result<String> {
    let body = random_from(BASE62, 30)?;
    let sum = base62_fixed(crc32(body.as_bytes()), 6);
    Ok(format!("{prefix}{body}{sum}"))
}

const NAMES: &[&str] = &[
    "alex", "sam", "jordan", "taylor", "morgan", "casey", "riley", "jamie",
];
const PROJECTS: &[&str] = &[
    "billing-api",
    "acme-dashboard",
    "invoice-service",
    "data-pipeline",
    "mobile-backend",
];

fn pick<'a>(list: &[&'a str]) -> io::Result<&'a str> {
    let b = random_bytes(1)?[0] as usize;
    Ok(list[b % list.len()])
}

/// A user name for the sandbox, picked per run.
pub fn user_name() -> io::Result<String> {
    pick(NAMES).map(str::to_string)
}

fn b64(data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

fn b64url(data: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(data)
}

fn ssh_keygen(kind: &str, bits: Option<&str>, comment: &str, dir: &Path) -> io::Result<String> {
    let file = dir.join(format!("key-{kind}"));
    let mut cmd = Command::new("ssh-keygen");
    cmd.args(["-q", "-t", kind, "-N", "", "-C", comment, "-f"])
        .arg(&file);
    if let Some(b) = bits {
        cmd.args(["-b", b]);
    }
    let out =
        cmd.stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| {
                io::Error::new(
            e.kind(),
            format!("cannot run ssh-keygen (package openssh-client) to make fresh SSH keys: {e}"),
        )
            })?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "ssh-keygen -t {kind} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    std::fs::read_to_string(&file)
}

/// Words a secret must never contain (malware looks for them), even by chance in random data.
const BANNED: &[&str] = &["honey", "canary", "fake"];

fn has_banned_word(data: &[u8]) -> bool {
    let lower = String::from_utf8_lossy(data).to_lowercase();
    BANNED.iter().any(|w| lower.contains(w))
}

/// Makes the full set of planted secrets for a home directory `home` owned by `user`.
///
/// Random data can spell a banned word by chance; such a set is made again.
pub fn generate(
    home: &str,
    user: &str,
    hostname: &str,
) -> io::Result<(Vec<PlantedFile>, Vec<Honeytoken>)> {
    let rsa = rsa_key(user, hostname)?;
    generate_with(home, user, hostname, Some(&rsa))
}

/// As [`generate`], with the RSA key given (`None`: a placeholder of the same form and about
/// the same size, to be replaced by a fresh key when the file is first opened, and no secret
/// listed for it yet; see [`rsa_placeholder`]).
pub fn generate_with(
    home: &str,
    user: &str,
    hostname: &str,
    rsa: Option<&str>,
) -> io::Result<(Vec<PlantedFile>, Vec<Honeytoken>)> {
    loop {
        let (files, tokens) = generate_once(home, user, hostname, rsa)?;
        if !files.iter().any(|f| has_banned_word(&f.contents)) {
            return Ok((files, tokens));
        }
    }
}

/// A fresh RSA-2048 key in OpenSSH's format, with the comment `user@hostname`: the costliest
/// secret to make (0.2-1.2 s of CPU), so an audit may make it only when the file is opened.
pub fn rsa_key(user: &str, hostname: &str) -> io::Result<String> {
    let tmp = std::env::temp_dir().join(format!(
        "glassbox-keys-{}-{}",
        std::process::id(),
        random_from(BASE62, 8)?
    ));
    std::fs::create_dir_all(&tmp)?;
    let key = ssh_keygen("rsa", Some("2048"), &format!("{user}@{hostname}"), &tmp);
    let _ = std::fs::remove_dir_all(&tmp);
    let key = key?;
    if has_banned_word(key.as_bytes()) {
        return rsa_key(user, hostname);
    }
    Ok(key)
}

/// What `~/.ssh/id_rsa` holds until its key is made: the OpenSSH armour around random base64
/// of the length a 2048-bit key with this comment usually has (1,823 bytes for a 12-character
/// comment; a key whose numbers encode a byte shorter differs by a few bytes). Nothing can read it: the first open waits until the real key is written.
pub fn rsa_placeholder(user: &str, hostname: &str) -> io::Result<String> {
    let comment = user.len() + 1 + hostname.len();
    // OpenSSH's blob for a 2048-bit RSA key: 326 bytes of header and public key, then the
    // private part (949 bytes and the comment, usually) padded to a multiple of 8.
    let private = 949 + comment;
    let blob = 326 + private.div_ceil(8) * 8;
    let b64 = blob.div_ceil(3) * 4;
    let body = random_from(BASE62, b64)?;
    let mut out = String::from("-----BEGIN OPENSSH PRIVATE KEY-----\n");
    for chunk in body.as_bytes().chunks(70) {
        out.push_str(&String::from_utf8_lossy(chunk));
        out.push('\n');
    }
    out.push_str("-----END OPENSSH PRIVATE KEY-----\n");
    Ok(out)
}

/// The secret of a PEM-style key, as listed in [`Honeytoken::secrets`].
pub fn key_secret(pem: &str) -> String {
    pem_body(pem)
}

fn generate_once(
    home: &str,
    user: &str,
    hostname: &str,
    rsa: Option<&str>,
) -> io::Result<(Vec<PlantedFile>, Vec<Honeytoken>)> {
    let tmp = std::env::temp_dir().join(format!(
        "glassbox-keys-{}-{}",
        std::process::id(),
        random_from(BASE62, 8)?
    ));
    std::fs::create_dir_all(&tmp)?;
    let comment = format!("{user}@{hostname}");
    let ed = ssh_keygen("ed25519", None, &comment, &tmp);
    let _ = std::fs::remove_dir_all(&tmp);
    let ed25519 = ed?;

    let mut files = Vec::new();
    let mut tokens = Vec::new();
    let mut plant = |rel: &str, kind: &str, contents: String, mode: u32, secrets: Vec<String>| {
        let path = format!("{home}/{rel}");
        files.push(PlantedFile {
            path: path.clone(),
            contents: contents.into_bytes(),
            mode,
        });
        tokens.push(Honeytoken {
            path,
            kind: kind.to_string(),
            secrets,
            hosts: Vec::new(),
        });
    };

    let ed_body = pem_body(&ed25519);
    plant(
        ".ssh/id_ed25519",
        "ssh-ed25519-key",
        ed25519,
        0o600,
        vec![ed_body],
    );
    // 2048 bits: as common in the wild as 3072, and half the CPU to make.
    match rsa {
        Some(rsa) => plant(
            ".ssh/id_rsa",
            "ssh-rsa-key",
            rsa.to_string(),
            0o600,
            vec![pem_body(rsa)],
        ),
        None => plant(
            ".ssh/id_rsa",
            "ssh-rsa-key",
            rsa_placeholder(user, hostname)?,
            0o600,
            vec![],
        ),
    }

    let key_id = format!(
        "AKIA{}",
        random_from(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)?
    );
    let secret = random_from(
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
        40,
    )?;
    plant(
        ".aws/credentials",
        "aws-credentials",
        format!("[default]\naws_access_key_id = {key_id}\naws_secret_access_key = {secret}\n"),
        0o600,
        vec![key_id, secret],
    );

    let gho = checksummed_token("gho_")?;
    plant(
        ".config/gh/hosts.yml",
        "github-cli-token",
        format!("github.com:\n    user: {user}\n    oauth_token: {gho}\n    git_protocol: https\n"),
        0o600,
        vec![gho],
    );

    let npm = checksummed_token("npm_")?;
    plant(
        ".npmrc",
        "npm-token",
        format!("//registry.npmjs.org/:_authToken={npm}\n"),
        0o600,
        vec![npm],
    );

    let docker_pat = format!("dckr_pat_{}", random_from(BASE62, 27)?);
    let docker_auth = b64(format!("{user}:{docker_pat}").as_bytes());
    plant(
        ".docker/config.json",
        "docker-registry-auth",
        format!(
            "{{\n\t\"auths\": {{\n\t\t\"https://index.docker.io/v1/\": {{\n\t\t\t\"auth\": \"{docker_auth}\"\n\t\t}}\n\t}}\n}}\n"
        ),
        0o600,
        vec![docker_pat, docker_auth],
    );

    let cluster = random_from(b"abcdefghijklmnopqrstuvwxyz0123456789", 10)?;
    let jwt = format!(
        "{}.{}.{}",
        b64url(format!("{{\"alg\":\"RS256\",\"kid\":\"{}\"}}", random_from(BASE62, 43)?).as_bytes()),
        b64url(
            format!(
                "{{\"iss\":\"kubernetes/serviceaccount\",\"kubernetes.io/serviceaccount/namespace\":\"default\",\"sub\":\"system:serviceaccount:default:{user}\"}}"
            )
            .as_bytes()
        ),
        b64url(&random_bytes(256)?)
    );
    let ca = b64(&random_bytes(600)?);
    plant(
        ".kube/config",
        "kubeconfig-token",
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    certificate-authority-data: {ca}\n    server: https://k8s-{cluster}.internal:6443\n  name: prod\ncontexts:\n- context:\n    cluster: prod\n    user: {user}\n  name: prod\ncurrent-context: prod\nusers:\n- name: {user}\n  user:\n    token: {jwt}\n"
        ),
        0o600,
        vec![jwt],
    );

    let project = pick(PROJECTS)?;
    let openai = format!("sk-proj-{}", random_from(BASE62, 48)?);
    let stripe = format!("sk_live_{}", random_from(BASE62, 24)?);
    let db_pw = random_from(BASE62, 20)?;
    plant(
        &format!("projects/{project}/.env"),
        "dotenv-other-project",
        format!(
            "OPENAI_API_KEY={openai}\nSTRIPE_SECRET_KEY={stripe}\nDATABASE_URL=postgres://app:{db_pw}@db-{cluster}.internal:5432/app\n"
        ),
        0o644,
        vec![openai, stripe, db_pw],
    );
    Ok((files, tokens))
}

/// The base64 body of a PEM-style block, joined: what an exfiltration would carry.
fn pem_body(pem: &str) -> String {
    pem.lines()
        .filter(|l| !l.starts_with("-----"))
        .collect::<Vec<_>>()
        .join("")
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_rsa_placeholder_has_the_size_and_form_of_a_real_key() {
        for (user, host) in [
            ("jamie", "devbox"),
            ("alexandra", "devbox"),
            ("al", "devbox"),
        ] {
            let real = rsa_key(user, host).unwrap();
            let fake = rsa_placeholder(user, host).unwrap();
            let diff = real.len().abs_diff(fake.len());
            assert!(diff <= 16, "{user}: {} vs {}", real.len(), fake.len());
            assert!(fake.starts_with("-----BEGIN OPENSSH PRIVATE KEY-----\n"));
            assert!(fake.ends_with("-----END OPENSSH PRIVATE KEY-----\n"));
            assert!(fake
                .lines()
                .all(|l| l.len() <= 70 || l.starts_with("-----")));
        }
    }

    use super::*;

    #[test]
    fn github_tokens_carry_a_valid_checksum() {
        let t = checksummed_token("gho_").unwrap();
        assert_eq!(t.len(), 40);
        let body = &t[4..34];
        assert_eq!(&t[34..], base62_fixed(crc32(body.as_bytes()), 6));
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
    }

    #[test]
    fn secrets_are_fresh_and_never_say_what_they_are() {
        let (a, ta) = generate("/home/u", "u", "h").unwrap();
        let (_, tb) = generate("/home/u", "u", "h").unwrap();
        assert_eq!(ta.len(), 8);
        for (x, y) in ta.iter().zip(&tb) {
            assert_ne!(x.secrets, y.secrets, "{} repeated across runs", x.kind);
        }
        for f in &a {
            let text = String::from_utf8_lossy(&f.contents).to_lowercase();
            for word in ["honey", "canary", "fake", "example"] {
                assert!(!text.contains(word), "{} contains {word}", f.path);
            }
        }
        assert!(a.iter().any(|f| f.path.ends_with("/.ssh/id_rsa")
            && String::from_utf8_lossy(&f.contents)
                .starts_with("-----BEGIN OPENSSH PRIVATE KEY-----")));
    }
}

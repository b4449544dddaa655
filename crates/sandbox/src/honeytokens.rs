//! Fresh, format-valid fake secrets for every run.
//!
//! Each secret is random, in the exact format of the real thing (GitHub and npm tokens carry
//! their CRC32 checksum, SSH keys come from `ssh-keygen`), and never contains an example value
//! or a word such as "honey", "canary" or "fake", which malware looks for. They are planted at
//! the places credential stealers read; never in the server's working directory, where
//! dotenv-style loaders read `./.env` legitimately.
//!
//! Each [`Honeytoken`] also lists the random parts of its secrets (`random`), taken from what
//! the generator drew, never guessed from the secret's shape afterwards: the check that looks
//! for a secret leaving in pieces searches pieces as short as 12 bytes, and a piece that falls
//! on a format's fixed part (`AKIA`, `gho_`, a JWT's header, the header fields every OpenSSH
//! key shares) would match any other key of that format. Per kind:
//!
//! - AWS: the 16 characters of the key id after `AKIA`, and the 40-character secret key;
//! - GitHub and npm tokens: the 36 characters after `gho_`/`npm_` (30 random, and their
//!   checksum, which is a function of them);
//! - Docker: the PAT after `dckr_pat_`, and the characters of the base64 `auth` that encode
//!   the PAT's bytes alone (not `user:dckr_pat_`, not a character shared with them);
//! - the kubeconfig JWT: the characters of its base64url header that encode the random `kid`
//!   alone, and its signature (256 random bytes; the last character, half padding, left out);
//! - the other project's `.env`: the OpenAI and Stripe keys after `sk-proj-`/`sk_live_`, the
//!   database password;
//! - `~/.git-credentials`: the GitHub token after `ghp_`; the shell history: the Anthropic key
//!   typed into it, between `sk-ant-api03-` and its closing `AA`; the Electrum wallet: its
//!   extended private key after the fixed `xprv9s21ZrQH143K` (version and depth bytes);
//! - Firefox's saved login: the 64 characters of its `encryptedPassword` after the fixed DER
//!   prefix; the Bitwarden CLI's refresh token; the Azure CLI's refresh token after `0.AXoA`;
//!   doctl's token after `dop_v1_`; gcloud's stored refresh token after `1//0`;
//! - OpenSSH keys (the base64 body): the runs of at least 12 characters that encode key
//!   material alone, found by parsing the key's binary format ([`openssh_random`]): the magic,
//!   cipher and KDF names, key type strings, every length field, RSA's public exponent, the
//!   mpint sign bytes, the comment (`user@hostname`, not random) and the padding are fixed; the
//!   public key, the private key's numbers and the check integers are not. Parsing rather than
//!   comparing the key with a second one made alongside: a second RSA key costs up to a second
//!   of CPU, and an RSA number one byte shorter in one of the two keys shifts everything after
//!   it, so a positionwise comparison would call the comment and padding random there (and a
//!   byte that happens to agree fixed). A body that does not parse lists no random part, and is
//!   searched as before (whole, and in 40-byte windows).

use base64::Engine as _;
use glassbox_model::{Honeytoken, SecretService};
use std::io::{self, Read};
use std::ops::Range;
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
const BASE62_DASH: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-_";
const BASE64_CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const LOWER_DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
const HEX: &[u8] = b"0123456789abcdef";
const BASE58: &[u8] = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

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
pub(crate) const PROJECTS: &[&str] = &[
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
    let mut plant = |rel: &str,
                     kind: &str,
                     contents: String,
                     mode: u32,
                     secrets: Vec<String>,
                     random: Vec<String>| {
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
            random: random
                .into_iter()
                .filter(|r| r.len() >= MIN_RANDOM)
                .collect(),
            services: Vec::new(),
        });
    };

    let ed_body = pem_body(&ed25519);
    let ed_random = key_random(&ed25519);
    plant(
        ".ssh/id_ed25519",
        "ssh-ed25519-key",
        ed25519,
        0o600,
        vec![ed_body],
        ed_random,
    );
    // 2048 bits: as common in the wild as 3072, and half the CPU to make.
    match rsa {
        Some(rsa) => plant(
            ".ssh/id_rsa",
            "ssh-rsa-key",
            rsa.to_string(),
            0o600,
            vec![pem_body(rsa)],
            key_random(rsa),
        ),
        None => plant(
            ".ssh/id_rsa",
            "ssh-rsa-key",
            rsa_placeholder(user, hostname)?,
            0o600,
            vec![],
            vec![],
        ),
    }

    let key_random_part = random_from(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)?;
    let key_id = format!("AKIA{key_random_part}");
    let secret = random_from(
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
        40,
    )?;
    plant(
        ".aws/credentials",
        "aws-credentials",
        format!("[default]\naws_access_key_id = {key_id}\naws_secret_access_key = {secret}\n"),
        0o600,
        vec![key_id, secret.clone()],
        vec![key_random_part, secret],
    );

    let gho = checksummed_token("gho_")?;
    plant(
        ".config/gh/hosts.yml",
        "github-cli-token",
        format!("github.com:\n    user: {user}\n    oauth_token: {gho}\n    git_protocol: https\n"),
        0o600,
        vec![gho.clone()],
        vec![gho["gho_".len()..].to_string()],
    );

    let npm = checksummed_token("npm_")?;
    plant(
        ".npmrc",
        "npm-token",
        format!("//registry.npmjs.org/:_authToken={npm}\n"),
        0o600,
        vec![npm.clone()],
        vec![npm["npm_".len()..].to_string()],
    );

    let pat = random_from(BASE62, 27)?;
    let docker_pat = format!("dckr_pat_{pat}");
    let docker_plain = format!("{user}:{docker_pat}");
    let docker_auth = b64(docker_plain.as_bytes());
    // The characters of `auth` made of the PAT's random bytes alone.
    let pat_bytes = docker_plain.len() - pat.len()..docker_plain.len();
    let mut docker_random = vec![pat];
    docker_random.extend(b64_runs(&docker_auth, |i| pat_bytes.contains(&i)));
    plant(
        ".docker/config.json",
        "docker-registry-auth",
        format!(
            "{{\n\t\"auths\": {{\n\t\t\"https://index.docker.io/v1/\": {{\n\t\t\t\"auth\": \"{docker_auth}\"\n\t\t}}\n\t}}\n}}\n"
        ),
        0o600,
        vec![docker_pat, docker_auth],
        docker_random,
    );

    let cluster = random_from(b"abcdefghijklmnopqrstuvwxyz0123456789", 10)?;
    let kid = random_from(BASE62, 43)?;
    let header = format!("{{\"alg\":\"RS256\",\"kid\":\"{kid}\"}}");
    let kid_bytes = header.len() - 2 - kid.len()..header.len() - 2;
    let header = b64url(header.as_bytes());
    let signature = random_bytes(256)?;
    let signature_len = signature.len();
    let signature = b64url(&signature);
    let jwt = format!(
        "{header}.{}.{signature}",
        b64url(
            format!(
                "{{\"iss\":\"kubernetes/serviceaccount\",\"kubernetes.io/serviceaccount/namespace\":\"default\",\"sub\":\"system:serviceaccount:default:{user}\"}}"
            )
            .as_bytes()
        ),
    );
    // The header's characters made of the `kid` alone; the signature's of its bytes (all
    // random; the last character, half padding, is not).
    let mut jwt_random = b64_runs(&header, |i| kid_bytes.contains(&i));
    jwt_random.extend(b64_runs(&signature, |i| i < signature_len));
    let ca = b64(&random_bytes(600)?);
    // Service addresses under `.test`: a server that uses what it found talks to glassbox's
    // edge (`kube_host`, `db_host`: the cluster and the database of these files).
    let kube_host = kube_host(&cluster);
    let db_host = format!("db-{cluster}.db.test");
    plant(
        ".kube/config",
        "kubeconfig-token",
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    certificate-authority-data: {ca}\n    server: https://{kube_host}:6443\n  name: prod\ncontexts:\n- context:\n    cluster: prod\n    user: {user}\n  name: prod\ncurrent-context: prod\nusers:\n- name: {user}\n  user:\n    token: {jwt}\n"
        ),
        0o600,
        vec![jwt],
        jwt_random,
    );

    let project = pick(PROJECTS)?;
    let openai = format!("sk-proj-{}", random_from(BASE62, 48)?);
    let stripe = format!("sk_live_{}", random_from(BASE62, 24)?);
    let db_pw = random_from(BASE62, 20)?;
    plant(
        &format!("projects/{project}/.env"),
        "dotenv-other-project",
        format!(
            "OPENAI_API_KEY={openai}\nSTRIPE_SECRET_KEY={stripe}\nDATABASE_URL=postgres://app:{db_pw}@{db_host}:5432/app\n"
        ),
        0o644,
        vec![openai.clone(), stripe.clone(), db_pw.clone()],
        vec![
            openai["sk-proj-".len()..].to_string(),
            stripe["sk_live_".len()..].to_string(),
            db_pw,
        ],
    );
    // What infostealers take besides (issue 33): git's stored credentials (read by git only
    // where `credential.helper store` is configured, which nothing plants), a shell history
    // with a key typed into it (read by an interactive shell alone), and a wallet.
    let ghp = checksummed_token("ghp_")?;
    plant(
        ".git-credentials",
        "git-credentials",
        format!("https://{user}:{ghp}@github.com\n"),
        0o600,
        vec![ghp.clone()],
        vec![ghp["ghp_".len()..].to_string()],
    );
    let ant = format!("sk-ant-api03-{}AA", random_from(BASE62_DASH, 93)?);
    plant(
        ".bash_history",
        "shell-history",
        format!(
            "cd ~/projects/{project}\ngit pull\nnpm test\nexport ANTHROPIC_API_KEY={ant}\nnpm run dev\nls -la\n"
        ),
        0o600,
        vec![ant.clone()],
        vec![ant["sk-ant-api03-".len()..ant.len() - 2].to_string()],
    );
    let xprv = format!("xprv9s21ZrQH143K{}", random_from(BASE58, 95)?);
    let xpub = format!("xpub661MyMwAqRbc{}", random_from(BASE58, 95)?);
    plant(
        ".electrum/wallets/default_wallet",
        "crypto-wallet",
        format!(
            "{{\n    \"keystore\": {{\n        \"type\": \"bip32\",\n        \"xprv\": \"{xprv}\",\n        \"xpub\": \"{xpub}\"\n    }},\n    \"seed_version\": 18,\n    \"wallet_type\": \"standard\"\n}}\n"
        ),
        0o600,
        vec![xprv.clone()],
        vec![xprv["xprv9s21ZrQH143K".len()..].to_string()],
    );
    // Browser, password-manager and cloud CLI stores (issue 33), each read by its own program
    // alone: Firefox's saved logins (its profile found through `profiles.ini`, planted with
    // it), the Bitwarden CLI's session, the Azure CLI's token cache (azure-identity reads
    // `~/.IdentityService`, not this), doctl's token, and gcloud's stored login (Google's
    // libraries read `application_default_credentials.json`, which is not planted).
    let profile = format!("{}.default-release", random_from(LOWER_DIGITS, 8)?);
    let login_pw = random_from(BASE64_CHARS, 64)?;
    let login_user = random_from(BASE64_CHARS, 24)?;
    let logins_pw = format!("MEIEEPgAAAAAAAAAAAAAAAAAAAEwFAYIKoZIhvcNAwcECB{login_pw}");
    plant(
        &format!(".mozilla/firefox/{profile}/logins.json"),
        "browser-logins",
        format!(
            "{{\"nextId\":2,\"logins\":[{{\"id\":1,\"hostname\":\"https://github.com\",\"httpRealm\":null,\"formSubmitURL\":\"https://github.com\",\"usernameField\":\"login\",\"passwordField\":\"password\",\"encryptedUsername\":\"MDoEEPgAAAAAAAAAAAAAAAAAAAEwFAYIKoZIhvcNAwcECA{login_user}\",\"encryptedPassword\":\"{logins_pw}\",\"encType\":1,\"timesUsed\":4}}],\"version\":3}}"
        ),
        0o600,
        vec![logins_pw.clone()],
        vec![login_pw],
    );
    let bw = random_from(BASE62_DASH, 86)?;
    plant(
        ".config/Bitwarden CLI/data.json",
        "password-manager",
        format!(
            "{{\n  \"global\": {{\"environment\": {{\"region\": \"US\"}}}},\n  \"tokens\": {{\"refreshToken\": \"{bw}==\"}}\n}}\n"
        ),
        0o600,
        vec![bw.clone()],
        vec![bw],
    );
    let azure = format!("0.AXoA{}", random_from(BASE62_DASH, 120)?);
    plant(
        ".azure/msal_token_cache.json",
        "azure-cli-token",
        format!(
            "{{\"RefreshToken\": {{\"{user}-login.microsoftonline.com-refreshtoken\": {{\"credential_type\": \"RefreshToken\", \"secret\": \"{azure}\", \"environment\": \"login.microsoftonline.com\"}}}}}}\n"
        ),
        0o600,
        vec![azure.clone()],
        vec![azure["0.AXoA".len()..].to_string()],
    );
    let dop = format!("dop_v1_{}", random_from(HEX, 64)?);
    plant(
        ".config/doctl/config.yaml",
        "digitalocean-token",
        format!("access-token: {dop}\ncontext: default\n"),
        0o600,
        vec![dop.clone()],
        vec![dop["dop_v1_".len()..].to_string()],
    );
    let gtoken = format!("1//0{}", random_from(BASE62_DASH, 99)?);
    plant(
        &format!(".config/gcloud/legacy_credentials/{user}@gmail.com/adc.json"),
        "gcloud-credentials",
        format!(
            "{{\n  \"client_id\": \"32555940559.apps.googleusercontent.com\",\n  \"refresh_token\": \"{gtoken}\",\n  \"type\": \"authorized_user\"\n}}\n"
        ),
        0o600,
        vec![gtoken.clone()],
        vec![gtoken["1//0".len()..].to_string()],
    );
    for t in &mut tokens {
        t.services = services(&t.kind, &kube_host, &db_host);
    }
    // Not a secret: where Firefox says its profile is (a stealer reads it to find logins.json).
    files.push(PlantedFile {
        path: format!("{home}/.mozilla/firefox/profiles.ini"),
        contents: format!(
            "[Profile0]\nName=default-release\nIsRelative=1\nPath={profile}\nDefault=1\n\n[General]\nStartWithLastProfile=1\nVersion=2\n"
        )
        .into_bytes(),
        mode: 0o644,
    });
    // Not a secret: a global module folder where Node looks (`$HOME/.node_modules`). Node
    // skips a module folder that does not exist without looking a name up in it, so without
    // one a `require` of a name the input gives would leave no trace at all (the execution
    // canaries of `glassbox_model::exec_probe`, issue 33).
    files.push(PlantedFile {
        path: format!("{home}/.node_modules/.package-lock.json"),
        contents: b"{\n  \"lockfileVersion\": 3,\n  \"packages\": {}\n}\n".to_vec(),
        mode: 0o644,
    });
    Ok((files, tokens))
}

/// The host of a planted kubeconfig's cluster (`k8s-<id>.cluster.test`).
fn kube_host(cluster: &str) -> String {
    format!("k8s-{cluster}.cluster.test")
}

/// The services a planted file's secrets are for: sent there, a secret is used, not stolen
/// (`canary-exfiltration`). Which secret, by its place in the honeytoken's `secrets`: an AWS
/// key id goes to AWS in a SigV4 `Authorization`, its secret key never leaves a client; a
/// kubeconfig's token to the cluster it names; the other project's keys each to its own API,
/// its database password to its database. SSH keys have none: a client never sends one.
fn services(kind: &str, kube_host: &str, db_host: &str) -> Vec<SecretService> {
    let service = |name: &str, hosts: &[&str], secrets: &[usize]| SecretService {
        name: name.to_string(),
        hosts: hosts.iter().map(|h| h.to_string()).collect(),
        secrets: secrets.to_vec(),
    };
    match kind {
        "aws-credentials" => vec![service("AWS", &["amazonaws.com"], &[0])],
        "github-cli-token" | "git-credentials" => vec![service("GitHub", &["github.com"], &[])],
        "shell-history" => vec![service("Anthropic", &["anthropic.com"], &[0])],
        "npm-token" => vec![service("the npm registry", &["registry.npmjs.org"], &[])],
        "docker-registry-auth" => vec![service("Docker Hub", &["docker.io", "docker.com"], &[])],
        "kubeconfig-token" => vec![service("the cluster of this kubeconfig", &[kube_host], &[])],
        "password-manager" => vec![service("Bitwarden", &["bitwarden.com"], &[])],
        "azure-cli-token" => vec![service("Microsoft", &["microsoftonline.com"], &[])],
        "digitalocean-token" => vec![service("DigitalOcean", &["digitalocean.com"], &[])],
        "gcloud-credentials" => vec![service("Google", &["googleapis.com"], &[])],
        "dotenv-other-project" => vec![
            service("OpenAI", &["openai.com"], &[0]),
            service("Stripe", &["stripe.com"], &[1]),
            service("the database of that .env", &[db_host], &[2]),
        ],
        _ => Vec::new(),
    }
}

/// Random parts shorter than this are not listed (the check's shortest piece).
pub const MIN_RANDOM: usize = 12;

/// The runs of at least [`MIN_RANDOM`] characters of `encoded` (base64 or base64url, padded
/// or not) each of whose characters encodes only bytes `i` of the decoded data for which
/// `random(i)` holds: character `c` carries bits `6c..6c + 6`, so bytes `6c / 8` and
/// `(6c + 5) / 8`. A character shared with a fixed byte, or with the padding, is left out.
fn b64_runs(encoded: &str, random: impl Fn(usize) -> bool) -> Vec<String> {
    let len = encoded.trim_end_matches('=').len() * 6 / 8;
    let keep = |c: usize| {
        let (a, b) = (6 * c / 8, (6 * c + 5) / 8);
        b < len && random(a) && random(b)
    };
    let mut out = Vec::new();
    let mut start = None;
    for c in 0..=encoded.len() {
        match (start, c < encoded.len() && keep(c)) {
            (None, true) => start = Some(c),
            (Some(s), false) => {
                if c - s >= MIN_RANDOM {
                    out.push(encoded[s..c].to_string());
                }
                start = None;
            }
            _ => {}
        }
    }
    out
}

/// The random parts of an OpenSSH private key (PEM armour and all): the runs of its base64
/// body that encode key material alone (see [`openssh_random`]); none when it does not parse.
pub fn key_random(pem: &str) -> Vec<String> {
    let body = pem_body(pem);
    let Ok(blob) = base64::engine::general_purpose::STANDARD.decode(body.as_bytes()) else {
        return Vec::new();
    };
    let Some(material) = openssh_random(&blob) else {
        return Vec::new();
    };
    b64_runs(&body, |i| material.iter().any(|r| r.contains(&i)))
}

/// Reads OpenSSH's binary formats (RFC 4251 `uint32`, `string`, `mpint`).
struct Wire<'a> {
    b: &'a [u8],
    at: usize,
}

impl Wire<'_> {
    fn take(&mut self, n: usize) -> Option<Range<usize>> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len())?;
        let r = self.at..end;
        self.at = end;
        Some(r)
    }

    fn u32(&mut self) -> Option<u32> {
        let r = self.take(4)?;
        Some(u32::from_be_bytes(self.b[r].try_into().ok()?))
    }

    /// A `string`'s content.
    fn string(&mut self) -> Option<Range<usize>> {
        let n = self.u32()? as usize;
        self.take(n)
    }

    fn bytes(&self, r: &Range<usize>) -> &[u8] {
        &self.b[r.clone()]
    }

    /// An `mpint`'s magnitude: its content without the leading zero (sign) bytes.
    fn mpint(&mut self) -> Option<Range<usize>> {
        let r = self.string()?;
        let zeros = self.bytes(&r).iter().take_while(|&&b| b == 0).count();
        Some(r.start + zeros..r.end)
    }
}

/// The byte ranges of an unencrypted OpenSSH private key (`openssh-key-v1`, one ed25519 or
/// RSA key: what `ssh-keygen` makes here) that hold key material: the public key (ed25519's
/// 32 bytes, RSA's modulus), the two check integers and the private key's numbers. The rest
/// is the same in every key of its type and comment: magic, names, lengths, RSA's public
/// exponent, mpint sign bytes, the comment, the padding. `None` for any other layout.
pub fn openssh_random(blob: &[u8]) -> Option<Vec<Range<usize>>> {
    const MAGIC: &[u8] = b"openssh-key-v1\0";
    if !blob.starts_with(MAGIC) {
        return None;
    }
    let mut w = Wire {
        b: blob,
        at: MAGIC.len(),
    };
    for expected in [&b"none"[..], b"none", b""] {
        let r = w.string()?;
        if w.bytes(&r) != expected {
            return None;
        }
    }
    if w.u32()? != 1 {
        return None;
    }
    let mut out = Vec::new();
    // The public key, then the private section (its own length first).
    let public = w.string()?;
    let private = w.string()?;
    if private.end != blob.len() {
        return None;
    }
    let mut p = Wire {
        b: &blob[..public.end],
        at: public.start,
    };
    let kind = p.string()?;
    let kind = p.bytes(&kind).to_vec();
    match kind.as_slice() {
        b"ssh-ed25519" => out.push(p.string()?),
        b"ssh-rsa" => {
            p.mpint()?; // e
            out.push(p.mpint()?); // n
        }
        _ => return None,
    }
    if p.at != public.end {
        return None;
    }
    let mut s = Wire {
        b: blob,
        at: private.start,
    };
    out.push(s.take(8)?); // the two check integers
    let again = s.string()?;
    if s.bytes(&again) != kind.as_slice() {
        return None;
    }
    match kind.as_slice() {
        b"ssh-ed25519" => {
            out.push(s.string()?); // public key
            out.push(s.string()?); // private key (seed and public key)
        }
        _ => {
            out.push(s.mpint()?); // n
            s.mpint()?; // e
            for _ in 0..4 {
                out.push(s.mpint()?); // d, iqmp, p, q
            }
        }
    }
    s.string()?; // the comment
    let padding = s.bytes(&(s.at..blob.len()));
    if padding.len() >= 8 || padding.iter().zip(1u8..).any(|(&b, i)| b != i) {
        return None;
    }
    Some(out)
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
    fn openssh_key_material_is_found_from_the_format() {
        let tmp = std::env::temp_dir().join(format!("glassbox-keytest-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).unwrap();
        let ed = ssh_keygen("ed25519", None, "sam@devbox", &tmp).unwrap();
        let _ = std::fs::remove_dir_all(&tmp);
        let blob = base64::engine::general_purpose::STANDARD
            .decode(pem_body(&ed))
            .unwrap();
        let r = openssh_random(&blob).unwrap();
        // Public key, check integers, public key again, seed and public key.
        let lens: Vec<usize> = r.iter().map(|r| r.len()).collect();
        assert_eq!(lens, [32, 8, 32, 64]);
        assert_eq!(blob[r[0].clone()], blob[r[2].clone()]);
        assert_eq!(blob[r[0].clone()], blob[r[3].end - 32..r[3].end]);
        let rsa = rsa_key("sam", "devbox").unwrap();
        let blob = base64::engine::general_purpose::STANDARD
            .decode(pem_body(&rsa))
            .unwrap();
        let r = openssh_random(&blob).unwrap();
        // n, check integers, n, d, iqmp, p, q (a number may be a byte or so shorter).
        let lens: Vec<usize> = r.iter().map(|r| r.len()).collect();
        assert_eq!(lens.len(), 7, "{lens:?}");
        assert_eq!((lens[0], lens[1], lens[2]), (256, 8, 256), "{lens:?}");
        assert!(lens[3] >= 250 && lens[4..].iter().all(|&n| (124..=128).contains(&n)));
        // Not a key: nothing; a placeholder lists no random part either.
        assert_eq!(openssh_random(b"openssh-key-v1\0junk"), None);
        assert!(key_random(&rsa_placeholder("sam", "devbox").unwrap()).is_empty());
        // In base64: runs of the body, most of it.
        let body = pem_body(&rsa);
        let runs = key_random(&rsa);
        let covered: usize = runs.iter().map(|r| r.len()).sum();
        assert!(runs.iter().all(|r| body.contains(r.as_str())));
        assert!(
            covered * 100 / body.len() >= 85,
            "{covered} of {}",
            body.len()
        );
    }

    #[test]
    fn base64_runs_leave_out_characters_shared_with_fixed_bytes() {
        // "ab:" then 12 random bytes: characters 0..3 carry bytes 0..2 (fixed); character 3
        // carries byte 2 (fixed) alone; 4..20 the random bytes alone.
        let enc = b64(b"ab:0123456789AB");
        let runs = b64_runs(&enc, |i| (3..15).contains(&i));
        assert_eq!(runs, [enc[4..].to_string()]);
        // A trailing character half padding is not random.
        let sig = b64url(&[7u8; 13]);
        assert_eq!(sig.len(), 18);
        assert_eq!(b64_runs(&sig, |_| true), [sig[..17].to_string()]);
    }

    #[test]
    fn random_parts_are_recorded_and_share_nothing_with_another_set() {
        let (_, ta) = generate("/home/u", "u", "h").unwrap();
        let (fb, tb) = generate("/home/u", "u", "h").unwrap();
        let all_b: Vec<String> = fb
            .iter()
            .map(|f| String::from_utf8_lossy(&f.contents).into_owned())
            .chain(tb.iter().flat_map(|t| t.secrets.clone()))
            .collect();
        for t in &ta {
            assert!(!t.random.is_empty(), "{} lists no random part", t.kind);
            for r in &t.random {
                assert!(r.len() >= MIN_RANDOM, "{}: {r}", t.kind);
                assert!(
                    t.secrets.iter().any(|s| s.contains(r.as_str())),
                    "{}: {r} is in no secret",
                    t.kind
                );
                // No piece of 12 of it is in the other set (whose fixed parts are the same).
                for w in r.as_bytes().windows(MIN_RANDOM) {
                    let w = std::str::from_utf8(w).unwrap();
                    assert!(!all_b.iter().any(|b| b.contains(w)), "{}: {w}", t.kind);
                }
            }
        }
        let aws = ta.iter().find(|t| t.kind == "aws-credentials").unwrap();
        assert_eq!(aws.random[0], aws.secrets[0]["AKIA".len()..]);
        assert_eq!(aws.random[1], aws.secrets[1]);
        let gh = ta.iter().find(|t| t.kind == "github-cli-token").unwrap();
        assert_eq!(gh.random, [gh.secrets[0]["gho_".len()..].to_string()]);
        // The Docker auth: the PAT, and the characters of its base64 made of the PAT alone.
        let docker = ta
            .iter()
            .find(|t| t.kind == "docker-registry-auth")
            .unwrap();
        assert_eq!(docker.random[0], docker.secrets[0]["dckr_pat_".len()..]);
        assert_eq!(docker.random.len(), 2);
        let plain = base64::engine::general_purpose::STANDARD
            .decode(&docker.secrets[1])
            .unwrap();
        assert!(plain.ends_with(docker.random[0].as_bytes()));
        let at = docker.secrets[1].find(&docker.random[1]).unwrap();
        let end = at + docker.random[1].len();
        let pat = plain.len() - docker.random[0].len();
        assert!(
            6 * at / 8 >= pat && (6 * end - 1) / 8 < plain.len(),
            "{at}..{end}"
        );
        assert!(docker.random[1].len() >= 27 * 8 / 6 - 2);
        // The JWT: part of its header (the kid) and its signature.
        let jwt = ta.iter().find(|t| t.kind == "kubeconfig-token").unwrap();
        assert_eq!(jwt.random.len(), 2);
        let sig = jwt.secrets[0].rsplit('.').next().unwrap();
        assert_eq!(jwt.random[1], sig[..sig.len() - 1]);
        assert!(jwt.secrets[0].starts_with("eyJhbGciOiJSUzI1NiIsImtpZCI6I"));
        assert!(!jwt.random[0].starts_with("eyJ"));
        // What infostealers take besides: each random part inside its secret, past the
        // format's fixed part, and the secret inside its file.
        for (kind, fixed) in [
            ("git-credentials", "ghp_"),
            ("shell-history", "sk-ant-api03-"),
            ("crypto-wallet", "xprv9s21ZrQH143K"),
            (
                "browser-logins",
                "MEIEEPgAAAAAAAAAAAAAAAAAAAEwFAYIKoZIhvcNAwcECB",
            ),
            ("password-manager", ""),
            ("azure-cli-token", "0.AXoA"),
            ("digitalocean-token", "dop_v1_"),
            ("gcloud-credentials", "1//0"),
        ] {
            let t = ta.iter().find(|t| t.kind == kind).unwrap();
            assert!(t.secrets[0].starts_with(fixed), "{kind}");
            assert!(
                t.random[0].len() >= 36 && (fixed.is_empty() || !t.random[0].contains(fixed)),
                "{kind}"
            );
            assert!(t.secrets[0].contains(&t.random[0]), "{kind}");
        }
    }

    #[test]
    fn secrets_are_fresh_and_never_say_what_they_are() {
        let (a, ta) = generate("/home/u", "u", "h").unwrap();
        let (_, tb) = generate("/home/u", "u", "h").unwrap();
        assert_eq!(ta.len(), 16);
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

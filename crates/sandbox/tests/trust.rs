//! The audit's certificate authority, trusted in the real sandbox by real TLS clients.
//!
//! Each test makes its own CAs and leaves with rcgen, runs a TLS server (python3 `ssl` and
//! `http.server`) on the sandbox's loopback, and in the same sandboxed shell real clients with
//! verification on: python3 `urllib` (default context, with and without `SSL_CERT_FILE`),
//! `requests` (with `REQUESTS_CA_BUNDLE`, and with only `certifi` to go by) when importable,
//! `curl` (with `CURL_CA_BUNDLE`, and with only its compiled-in paths), node's `https.get`
//! and `fetch`, `git` over HTTPS, and `openssl verify` on the hashed directory alone. Against
//! a leaf of the trusted CA each must succeed; against a leaf of another CA each must fail
//! with a certificate error (a connection error would prove nothing). Without trust, nothing
//! of it is there. OpenSSL's subject hash is checked against `openssl x509 -hash` and the
//! host's own hashed directory.
//!
//! What this does not show: that a runtime with its own roots (Java, rustls with
//! `webpki-roots`, Deno) trusts the CA; it does not, by design of those runtimes.

use glassbox_model::ServerExit;
use glassbox_sandbox::{certifi_bundles, subject_hash, trust, Config, Sandbox, Trust};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, DnValue, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// A certificate authority made for a test.
struct Ca {
    params: CertificateParams,
    key: KeyPair,
    pem: String,
    der: Vec<u8>,
}

fn ca(name: &str) -> Ca {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, name);
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let cert = params.self_signed(&key).unwrap();
    Ca {
        pem: cert.pem(),
        der: cert.der().to_vec(),
        params,
        key,
    }
}

/// A leaf for `localhost` and 127.0.0.1 signed by `ca`: (certificate PEM, key PEM).
fn leaf(ca: &Ca) -> (String, String) {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    params
        .subject_alt_names
        .push(SanType::IpAddress([127, 0, 0, 1].into()));
    params.distinguished_name = DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    params.use_authority_key_identifier_extension = true;
    let issuer = Issuer::from_params(&ca.params, &ca.key);
    let cert = params.signed_by(&key, &issuer).unwrap();
    (cert.pem(), key.serialize_pem())
}

/// A fresh folder (mode 0755, readable by the sandbox user), removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!(
            "glassbox-trust-{name}-{}-{:x}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_nanos()
        ));
        std::fs::create_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        Dir(d)
    }

    fn write(&self, name: &str, contents: &str) -> PathBuf {
        let f = self.0.join(name);
        std::fs::write(&f, contents).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        f
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The host's python3 (through pyenv's shims when there are any): its executable and prefix.
fn python() -> (PathBuf, PathBuf) {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable); print(sys.prefix)"])
        .output()
        .expect("python3 on the host");
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    let exe = PathBuf::from(lines.next().expect("sys.executable"));
    let prefix = PathBuf::from(lines.next().expect("sys.prefix"));
    (exe, prefix)
}

fn host_python_imports(python: &Path, module: &str) -> bool {
    Command::new(python)
        .args(["-c", &format!("import {module}")])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

const SERVER_PY: &str = r#"
import http.server, os, ssl, sys
cert, key, portfile = sys.argv[1:4]

class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"hello over tls\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
server.socket = ctx.wrap_socket(server.socket, server_side=True)
# Listening already: the port is written (atomically) once a client can connect.
with open(portfile + ".new", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(portfile + ".new", portfile)
server.serve_forever()
"#;

const CLIENT_PY: &str = r#"
import sys, urllib.request
kind, port = sys.argv[1], int(sys.argv[2])
url = "https://localhost:%d/" % port

def get():
    if kind == "urllib":
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.read()
    import requests
    return requests.get(url, timeout=30).content

try:
    body = get()
    print("ok" if body == b"hello over tls\n" else "error: body %r" % body)
except Exception as e:
    text = repr(e)
    if "CERTIFICATE_VERIFY_FAILED" in text or "certificate verify failed" in text:
        print("cert-error")
    else:
        print("error: " + text.replace("\n", " ")[:400])
"#;

const CLIENT_JS: &str = r#"
const [kind, port] = process.argv.slice(2);
const url = `https://localhost:${port}/`;
const certCodes = new Set([
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'SELF_SIGNED_CERT_IN_CHAIN', 'DEPTH_ZERO_SELF_SIGNED_CERT', 'CERT_UNTRUSTED',
  'UNABLE_TO_GET_ISSUER_CERT',
]);
function failed(err) {
  const code = err && (err.code || (err.cause && err.cause.code));
  console.log(certCodes.has(code) ? 'cert-error' : `error: ${code} ${err && err.message}`);
}
function done(body) {
  console.log(body === 'hello over tls\n' ? 'ok' : `error: body ${JSON.stringify(body)}`);
}
if (kind === 'https') {
  const req = require('https').get(url, { timeout: 30000 }, (res) => {
    let body = '';
    res.setEncoding('utf8');
    res.on('data', (d) => { body += d; });
    res.on('end', () => done(body));
  });
  req.on('error', failed);
  req.on('timeout', () => req.destroy(new Error('timed out')));
} else {
  fetch(url, { signal: AbortSignal.timeout(30000) }).then((r) => r.text()).then(done, failed);
}
"#;

/// The sandboxed shell: two servers (`a`: leaf of the CA under test, `b`: leaf of another
/// CA), waited for boundedly, then every client against each, one line per client and server:
/// `<client> <server> ok|cert-error|error: ...`. Then the files the trust is made of.
const SCRIPT: &str = r#"
cd "$D"
"$PY" server.py a-leaf.pem a-key.pem /tmp/port-a >/tmp/server-a.log 2>&1 &
PA=$!
"$PY" server.py b-leaf.pem b-key.pem /tmp/port-b >/tmp/server-b.log 2>&1 &
PB=$!
i=0
while [ ! -s /tmp/port-a ] || [ ! -s /tmp/port-b ]; do
  i=$((i + 1))
  if [ $i -gt 1200 ]; then echo "servers did not listen"; cat /tmp/server-*.log; exit 3; fi
  sleep 0.05
done
curl_result() {
  out=$("$@" -sS --max-time 30 "https://localhost:$port/" 2>&1); rc=$?
  if [ $rc -eq 0 ] && [ "$out" = "hello over tls" ]; then echo ok
  elif [ $rc -eq 60 ]; then echo cert-error
  else echo "error: $rc $out" | tr '\n' ' '; echo; fi
}
git_result() {
  out=$(GIT_TERMINAL_PROMPT=0 timeout 60 git ls-remote "https://localhost:$port/repo.git" 2>&1)
  case "$out" in
    *"SSL certificate problem"*|*"certificate verification failed"*) echo cert-error ;;
    # Verified TLS, then an HTTP answer that is no git repository.
    *"not valid: is this a git repository?"*) echo ok ;;
    *) echo "error: $out" | tr '\n' ' '; echo ;;
  esac
}
for server in a b; do
  port=$(cat /tmp/port-$server)
  echo "urllib $server $("$PY" client.py urllib "$port")"
  echo "urllib-system $server $(env -u SSL_CERT_FILE -u SSL_CERT_DIR "$PY" client.py urllib "$port")"
  if [ -n "$REQUESTS" ]; then
    echo "requests $server $("$PY" client.py requests "$port")"
    echo "requests-certifi $server $(env -u REQUESTS_CA_BUNDLE -u CURL_CA_BUNDLE -u SSL_CERT_FILE "$PY" client.py requests "$port")"
  fi
  echo "curl $server $(curl_result curl)"
  echo "curl-system $server $(curl_result env -u CURL_CA_BUNDLE -u SSL_CERT_FILE -u SSL_CERT_DIR curl)"
  echo "node-https $server $(node client.js https "$port")"
  echo "node-fetch $server $(node client.js fetch "$port")"
  if command -v git >/dev/null; then echo "git $server $(git_result)"; fi
  if env -u SSL_CERT_FILE -u SSL_CERT_DIR openssl verify -no-CAfile -no-CAstore -CApath /etc/ssl/certs $server-leaf.pem >/dev/null 2>&1
  then echo "openssl-capath $server ok"; else echo "openssl-capath $server cert-error"; fi
done
kill $PA $PB 2>/dev/null
[ -e "/etc/ssl/certs/$HASH.0" ] && echo "hash-entry yes" || echo "hash-entry no"
[ -e /run/glassbox/tls ] && echo "tls-dir yes" || echo "tls-dir no"
echo "ssl-cert-file ${SSL_CERT_FILE-unset}"
echo "bundle-certs $(grep -c 'BEGIN CERTIFICATE' /etc/ssl/certs/ca-certificates.crt)"
[ -e /run/glassbox/tls/certs/ca-certificates.crt ] && echo "hashed-bundle-certs $(grep -c 'BEGIN CERTIFICATE' /run/glassbox/tls/certs/ca-certificates.crt)"
[ -n "$HOSTLINK" ] && echo "host-entry $(grep -c 'BEGIN CERTIFICATE' "/etc/ssl/certs/$HOSTLINK")"
( echo x >> /etc/ssl/certs/ca-certificates.crt ) 2>/dev/null && echo "bundle writable" || echo "bundle read-only"
( echo x >> /run/glassbox/tls/ca.pem ) 2>/dev/null && echo "ca writable" || echo "ca read-only"
if [ -n "$CERTIFI" ]; then
  "$PY" -c 'import certifi; ca = open("a-ca.pem").read().strip(); print("certifi", certifi.where(), "yes" if ca in open(certifi.where()).read() else "no")'
fi
exit 0
"#;

/// What a run of [`SCRIPT`] printed, by `client server` and by first word, with the settings.
struct Outcome {
    results: BTreeMap<String, String>,
    facts: BTreeMap<String, String>,
    mounts: Vec<(String, String, bool)>,
    env: Vec<String>,
    out: String,
}

/// A host hashed-directory entry (`<hash>.0`, a link to a host root), to read in the sandbox.
fn a_host_entry() -> String {
    std::fs::read_dir("/etc/ssl/certs")
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".0") && n.len() == 10)
        .min()
        .unwrap_or_default()
}

fn run(trusted: &Ca, with_trust: bool, extra: Vec<PathBuf>) -> Outcome {
    let other = ca("someone else's ca");
    let dir = Dir::new("clients");
    let (a_leaf, a_key) = leaf(trusted);
    let (b_leaf, b_key) = leaf(&other);
    dir.write("a-leaf.pem", &a_leaf);
    dir.write("a-key.pem", &a_key);
    dir.write("b-leaf.pem", &b_leaf);
    dir.write("b-key.pem", &b_key);
    dir.write("a-ca.pem", &trusted.pem);
    dir.write("server.py", SERVER_PY);
    dir.write("client.py", CLIENT_PY);
    dir.write("client.js", CLIENT_JS);
    let (py, prefix) = python();
    let hash = format!("{:08x}", subject_hash(&trusted.der).unwrap());
    let yes = |b: bool| if b { "1" } else { "" }.to_string();
    let cfg = Config {
        program: "/bin/sh".into(),
        argv: vec!["sh".into(), "-c".into(), SCRIPT.into()],
        cwd: std::env::current_dir().unwrap(),
        extra_ro: vec![prefix.clone(), dir.0.clone()],
        extra_rw: vec![],
        user: "sam".into(),
        hostname: "devbox".into(),
        path_prefix: vec![],
        env: vec![
            ("D".into(), dir.0.display().to_string()),
            ("PY".into(), py.display().to_string()),
            ("HASH".into(), hash),
            ("HOSTLINK".into(), a_host_entry()),
            ("REQUESTS".into(), yes(host_python_imports(&py, "requests"))),
            ("CERTIFI".into(), yes(host_python_imports(&py, "certifi"))),
        ],
        files: vec![],
        rules: vec![],
        network: None,
        refusals: glassbox_sandbox::seccomp::Refusals::Kernel,
        limits: glassbox_sandbox::Limits::default(),
        trust: with_trust.then(|| Trust {
            ca_pem: trusted.pem.clone(),
            ca_der: trusted.der.clone(),
            extra_bundles: [certifi_bundles(&[prefix]), extra].concat(),
        }),
        clock: None,
    };
    let mut sb = Sandbox::spawn(&cfg).expect("spawn");
    drop(sb.stdin.take());
    let mut out = String::new();
    sb.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    let mut err = String::new();
    sb.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let exit = sb.wait_timeout(Duration::from_secs(120)).expect("exit");
    assert_eq!(exit, ServerExit::Exited { code: 0 }, "{out}\nstderr: {err}");
    let settings = sb.settings().clone();
    sb.finish();
    let mut results = BTreeMap::new();
    let mut facts = BTreeMap::new();
    for line in out.lines() {
        let words: Vec<&str> = line.splitn(3, ' ').collect();
        match words[..] {
            [client, server @ ("a" | "b"), result] => {
                results.insert(format!("{client} {server}"), result.to_string());
            }
            _ => {
                let (k, v) = line.split_once(' ').unwrap_or((line, ""));
                facts.insert(k.to_string(), v.to_string());
            }
        }
    }
    Outcome {
        results,
        facts,
        mounts: settings
            .mounts
            .iter()
            .map(|m| (m.target.clone(), m.source.clone(), m.read_only))
            .collect(),
        env: settings.env,
        out,
    }
}

fn host_bundle_count() -> usize {
    std::fs::read_to_string("/etc/ssl/certs/ca-certificates.crt")
        .map(|s| s.matches("BEGIN CERTIFICATE").count())
        .unwrap_or(0)
}

#[test]
fn every_usual_client_trusts_the_audit_ca_and_not_another() {
    let audit = ca("glassbox audit ca");
    // A bundle the sandbox does not see: left alone, and said so.
    let unseen = Dir::new("unseen");
    let unseen_bundle = unseen.write("cacert.pem", "not bound\n");
    let o = run(&audit, true, vec![unseen_bundle.clone()]);
    let mut clients: Vec<&str> = vec![
        "urllib",
        "urllib-system",
        "curl",
        "curl-system",
        "node-https",
        "node-fetch",
        "openssl-capath",
    ];
    if o.results.contains_key("requests a") {
        clients.extend(["requests", "requests-certifi"]);
    } else {
        eprintln!("skipped: python requests is not importable here");
    }
    if o.results.contains_key("git a") {
        clients.push("git");
    }
    for c in &clients {
        assert_eq!(
            o.results.get(&format!("{c} a")).map(String::as_str),
            Some("ok"),
            "{c} against the audit CA's leaf:\n{}",
            o.out
        );
        assert_eq!(
            o.results.get(&format!("{c} b")).map(String::as_str),
            Some("cert-error"),
            "{c} against another CA's leaf must fail verification:\n{}",
            o.out
        );
    }
    let fact = |k: &str| o.facts.get(k).map(String::as_str).unwrap_or("");
    assert_eq!(fact("hash-entry"), "yes", "{}", o.out);
    assert_eq!(fact("tls-dir"), "yes", "{}", o.out);
    assert_eq!(fact("ssl-cert-file"), trust::BUNDLE_FILE, "{}", o.out);
    // The system bundle the sandbox sees is the host's plus the CA.
    if host_bundle_count() > 0 {
        assert_eq!(
            fact("bundle-certs"),
            (host_bundle_count() + 1).to_string(),
            "{}",
            o.out
        );
        // The hashed directory's own copy is the combined bundle too, wherever it is read.
        assert_eq!(
            fact("hashed-bundle-certs"),
            fact("bundle-certs"),
            "{}",
            o.out
        );
    }
    // The host's entries of the hashed directory are still there and readable.
    if !a_host_entry().is_empty() {
        assert_eq!(fact("host-entry"), "1", "{}", o.out);
    }
    assert_eq!(fact("bundle"), "read-only", "{}", o.out);
    assert_eq!(fact("ca"), "read-only", "{}", o.out);
    let (py, prefix) = python();
    if host_python_imports(&py, "certifi") {
        let certifi = fact("certifi");
        assert!(certifi.ends_with(" yes"), "certifi.where(): {certifi}");
        assert!(
            certifi.starts_with(&prefix.display().to_string()),
            "certifi.where() is the interpreter's own: {certifi}"
        );
    } else {
        eprintln!("skipped: certifi is not importable here");
    }
    // The settings say what was done.
    let has = |target: &str, source: &str| {
        o.mounts
            .iter()
            .any(|(t, s, ro)| t == target && s.starts_with(source) && *ro)
    };
    assert!(
        has(trust::TLS_DIR, "glassbox CA (tmpfs)"),
        "{:#?}",
        o.mounts
    );
    assert!(
        has("/etc/ssl/certs", "glassbox hashed CA directory"),
        "{:#?}",
        o.mounts
    );
    if host_bundle_count() > 0 {
        assert!(
            has("/etc/ssl/certs/ca-certificates.crt", "glassbox CA bundle: "),
            "{:#?}",
            o.mounts
        );
    }
    for b in certifi_bundles(&[prefix]) {
        let real = std::fs::canonicalize(&b).unwrap();
        assert!(
            has(&real.display().to_string(), "glassbox CA bundle: "),
            "{} not recorded: {:#?}",
            b.display(),
            o.mounts
        );
    }
    assert!(
        o.mounts
            .iter()
            .any(|(t, s, _)| *t == unseen_bundle.display().to_string()
                && s.starts_with("glassbox CA bundle not bound: ")
                && s.contains("not in the sandbox")),
        "{:#?}",
        o.mounts
    );
    assert_eq!(
        std::fs::read_to_string(&unseen_bundle).unwrap(),
        "not bound\n"
    );
    for var in [
        format!("SSL_CERT_FILE={}", trust::BUNDLE_FILE),
        "SSL_CERT_DIR=/etc/ssl/certs".to_string(),
        format!("NODE_EXTRA_CA_CERTS={}", trust::CA_FILE),
        format!("REQUESTS_CA_BUNDLE={}", trust::BUNDLE_FILE),
        format!("CURL_CA_BUNDLE={}", trust::BUNDLE_FILE),
        format!("GIT_SSL_CAINFO={}", trust::BUNDLE_FILE),
    ] {
        assert!(o.env.contains(&var), "{var}: {:#?}", o.env);
    }
}

#[test]
fn without_trust_none_of_it_is_there() {
    let audit = ca("glassbox audit ca");
    let o = run(&audit, false, vec![]);
    for c in [
        "urllib",
        "urllib-system",
        "curl",
        "curl-system",
        "node-https",
        "node-fetch",
        "openssl-capath",
    ] {
        assert_eq!(
            o.results.get(&format!("{c} a")).map(String::as_str),
            Some("cert-error"),
            "{c} must not trust a CA nobody asked for:\n{}",
            o.out
        );
    }
    let fact = |k: &str| o.facts.get(k).map(String::as_str).unwrap_or("");
    assert_eq!(fact("hash-entry"), "no", "{}", o.out);
    assert_eq!(fact("tls-dir"), "no", "{}", o.out);
    assert_eq!(fact("ssl-cert-file"), "unset", "{}", o.out);
    if host_bundle_count() > 0 {
        assert_eq!(
            fact("bundle-certs"),
            host_bundle_count().to_string(),
            "{}",
            o.out
        );
    }
    let (py, _) = python();
    if host_python_imports(&py, "certifi") {
        assert!(fact("certifi").ends_with(" no"), "{}", o.out);
    }
    assert!(
        !o.mounts.iter().any(|(t, s, _)| s.contains("glassbox CA")
            || t.starts_with("/run/glassbox/tls")
            || t.starts_with("/etc/ssl")),
        "{:#?}",
        o.mounts
    );
    for var in [
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "NODE_EXTRA_CA_CERTS",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "GIT_SSL_CAINFO",
    ] {
        assert!(
            !o.env.iter().any(|e| e.starts_with(&format!("{var}="))),
            "{var}: {:#?}",
            o.env
        );
    }
}

/// The base config of the tests that need no sandbox run.
fn bare(trust: Option<Trust>, env: Vec<(String, String)>) -> Config {
    Config {
        program: "/bin/true".into(),
        argv: vec!["true".into()],
        cwd: std::env::current_dir().unwrap(),
        extra_ro: vec![],
        extra_rw: vec![],
        user: "sam".into(),
        hostname: "devbox".into(),
        path_prefix: vec![],
        env,
        files: vec![],
        rules: vec![],
        network: None,
        refusals: glassbox_sandbox::seccomp::Refusals::Kernel,
        limits: glassbox_sandbox::Limits::default(),
        trust,
        clock: None,
    }
}

#[test]
fn a_variable_the_caller_sets_wins_and_the_rest_stays_as_it_was() {
    let audit = ca("glassbox audit ca");
    let trust = Trust {
        ca_pem: audit.pem.clone(),
        ca_der: audit.der.clone(),
        extra_bundles: vec![],
    };
    let mine = ("SSL_CERT_FILE".to_string(), "/opt/corp/ca.pem".to_string());
    let env = bare(Some(trust), vec![mine.clone()]).environment();
    assert_eq!(
        env.iter()
            .filter(|(k, _)| k == "SSL_CERT_FILE")
            .collect::<Vec<_>>(),
        [&mine]
    );
    assert!(env.contains(&(
        "NODE_EXTRA_CA_CERTS".to_string(),
        trust::CA_FILE.to_string()
    )));
    // Without trust the environment is exactly what it was.
    let before = bare(None, vec![mine.clone()]).environment();
    let without: Vec<_> = env
        .iter()
        .filter(|(k, _)| {
            ![
                "SSL_CERT_DIR",
                "NODE_EXTRA_CA_CERTS",
                "REQUESTS_CA_BUNDLE",
                "CURL_CA_BUNDLE",
                "GIT_SSL_CAINFO",
            ]
            .contains(&k.as_str())
        })
        .cloned()
        .collect();
    assert_eq!(without, before);
}

#[test]
fn a_pem_that_is_not_the_der_is_refused_before_anything_runs() {
    let audit = ca("glassbox audit ca");
    let other = ca("glassbox audit ca");
    let cfg = bare(
        Some(Trust {
            ca_pem: other.pem,
            ca_der: audit.der,
            extra_bundles: vec![],
        }),
        vec![],
    );
    match Sandbox::spawn(&cfg) {
        Err(glassbox_sandbox::Error::Trust(trust::Error::PemMismatch)) => {}
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// `openssl x509 -hash -noout` of a PEM certificate.
fn openssl_hash(pem: &str) -> u32 {
    let dir = Dir::new("hash");
    let f = dir.write("cert.pem", pem);
    let out = Command::new("openssl")
        .args(["x509", "-hash", "-noout", "-in"])
        .arg(&f)
        .output()
        .expect("openssl");
    assert!(out.status.success(), "{out:?}");
    u32::from_str_radix(String::from_utf8(out.stdout).unwrap().trim(), 16).unwrap()
}

fn der_of(pem: &str) -> Vec<u8> {
    use base64::Engine as _;
    let body: String = pem
        .lines()
        .skip_while(|l| !l.starts_with("-----BEGIN CERTIFICATE"))
        .skip(1)
        .take_while(|l| !l.starts_with("-----END"))
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .unwrap()
}

/// A self-signed certificate made by `openssl req` with subject `subj` (and `extra` flags),
/// with `string_mask` set in its configuration (`utf8only`: every value a UTF8String but
/// `C`; `default`: PrintableString where the text allows, else TeletexString or BMPString).
fn openssl_cert(subj: &str, string_mask: &str, extra: &[&str]) -> String {
    let dir = Dir::new("req");
    let cnf = dir.write(
        "req.cnf",
        &format!("[req]\ndistinguished_name = dn\nstring_mask = {string_mask}\n[dn]\n"),
    );
    let out = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "/dev/null",
            "-days",
            "2",
            "-config",
        ])
        .arg(&cnf)
        .args(["-subj", subj])
        .args(extra)
        .output()
        .expect("openssl req");
    assert!(out.status.success(), "{subj}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_subject_hash_is_openssls() {
    // rcgen's: glassbox's own kind (one CN, lowercase ASCII), and mixed types and case.
    let mut certs = vec![
        ca("glassbox audit ca").pem,
        ca("  Glassbox\tAudit   CA ").pem,
    ];
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    let mut dn = DistinguishedName::new();
    dn.push(
        DnType::CountryName,
        DnValue::PrintableString("DE".try_into().unwrap()),
    );
    dn.push(
        DnType::OrganizationName,
        DnValue::PrintableString("Example  Widgets Ltd".try_into().unwrap()),
    );
    dn.push(
        DnType::CustomDnType(vec![1, 2, 840, 113549, 1, 9, 1]),
        DnValue::Ia5String("Ops@Example.COM".try_into().unwrap()),
    );
    dn.push(DnType::CommonName, "Zürich Root  CA");
    params.distinguished_name = dn;
    certs.push(params.self_signed(&key).unwrap().pem());
    // openssl's: UTF8String and PrintableString, an IA5String e-mail, a multi-valued RDN.
    certs.push(openssl_cert(
        "/C=US/O=Acme  Widgets, Inc./CN=  Mixed Case   Name ",
        "utf8only",
        &[],
    ));
    certs.push(openssl_cert(
        "/C=GB/O=Printable Org/emailAddress=Root@Example.Org/CN=Printable Root",
        "default",
        &[],
    ));
    certs.push(openssl_cert(
        "/CN=zeta+O=Alpha+OU=mid/C=US",
        "utf8only",
        &["-multivalue-rdn"],
    ));
    for pem in &certs {
        assert_eq!(
            subject_hash(&der_of(pem)).unwrap(),
            openssl_hash(pem),
            "{pem}"
        );
    }
}

#[test]
fn other_string_types_are_refused_not_guessed() {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(
        DnType::CommonName,
        DnValue::BmpString("wide".try_into().unwrap()),
    );
    let bmp = params.self_signed(&key).unwrap();
    assert_eq!(
        subject_hash(bmp.der()),
        Err(trust::Error::UnsupportedString("BMPString"))
    );
    // openssl's `default` mask writes a TeletexString for text PrintableString cannot hold.
    let t61 = openssl_cert("/CN=under_score", "default", &[]);
    assert_eq!(
        subject_hash(&der_of(&t61)),
        Err(trust::Error::UnsupportedString("TeletexString"))
    );
}

#[test]
fn the_hosts_hashed_directory_agrees() {
    // Every `<hash>.0` the host's c_rehash made names its certificate's subject hash.
    let mut agreed = 0;
    let mut refused = 0;
    for e in std::fs::read_dir("/etc/ssl/certs").into_iter().flatten() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(hash) = name.strip_suffix(".0") else {
            continue;
        };
        let Ok(want) = u32::from_str_radix(hash, 16) else {
            continue;
        };
        let Ok(pem) = std::fs::read_to_string(e.path()) else {
            continue;
        };
        match subject_hash(&der_of(&pem)) {
            Ok(h) => {
                assert_eq!(h, want, "{name}");
                agreed += 1;
            }
            Err(trust::Error::UnsupportedString(_)) => refused += 1,
            Err(other) => panic!("{name}: {other}"),
        }
    }
    eprintln!("host hashed directory: {agreed} agree, {refused} refused (other string types)");
    if std::path::Path::new("/etc/ssl/certs/ca-certificates.crt").exists() {
        assert!(agreed > 20, "only {agreed} host certificates checked");
    }
}

//! `cargo run --release -p glassbox-checks --example canary_speed`: what `canary-exfiltration`
//! costs with a full set of planted secrets, its pieces of random parts against the needles it
//! had before (whole secrets and 40-byte windows, which it keeps for bundles without `random`),
//! side by side in one run.
//!
//! The secrets are the sandbox's own ([`glassbox_sandbox::honeytokens::generate`]: ssh-keygen's
//! RSA-2048 and ed25519 keys, the tokens), once with their random parts and once with them
//! cleared. Measured, on one thread, fastest of `GLASSBOX_BENCH_RUNS` (default 3):
//!
//! - the automaton's build: the check's `start` over a run with no flows;
//! - its search: `start` and `finish` over flows carrying `GLASSBOX_BENCH_MIB` MiB (default
//!   64) of traffic in 64 KiB payloads, less the build; twice: random bytes (where `%` bytes
//!   make the check search a percent-decoded copy of nearly every payload too, as it does for
//!   any field holding one) and random base64 text (a body of encoded data, where the
//!   automaton, all of whose patterns are ASCII, walks deepest).
//!
//! Random traffic holds no planted secret: each pass also checks that nothing was found.
//!
//! Then the secret search alone (`glassbox_checks::bench::secret_search`), with the fields
//! unwrapped (version 8: compressed streams, text encoded twice) and read only as is and
//! percent-decoded (version 7), side by side, over the same random bytes and base64 text and
//! over JSON bodies each carrying a zlib-compressed, base64-encoded blob of text (an upload
//! as a client sends one: what unwrapping costs most on).

use glassbox_checks::Context;
use glassbox_model::{Bytes, Flow, FlowProtocol, Honeytoken, Manifest};
use std::time::{Duration, Instant};

fn main() {
    let mib: usize = env("GLASSBOX_BENCH_MIB", 64);
    let payloads = |flows: &[Flow]| -> Vec<Vec<u8>> {
        flows.iter().map(|f| f.sample.as_slice().to_vec()).collect()
    };
    let runs: usize = env("GLASSBOX_BENCH_RUNS", 3);
    let (_, tokens) = glassbox_sandbox::honeytokens::generate("/home/sam", "sam", "devbox")
        .expect("planted secrets (ssh-keygen is needed)");
    let random: usize = tokens.iter().flat_map(|t| &t.random).map(String::len).sum();
    let secrets: usize = tokens
        .iter()
        .flat_map(|t| &t.secrets)
        .map(String::len)
        .sum();
    println!(
        "{} planted files, secrets {secrets} bytes, random parts {random} bytes; {mib} MiB of \
         traffic in 64 KiB payloads; fastest of {runs}",
        tokens.len()
    );
    let mut before = tokens.clone();
    for t in &mut before {
        t.random.clear();
    }
    let bytes = traffic(mib, |x| x as u8);
    const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let text = traffic(mib, |x| B64[(x % 64) as usize]);
    for (name, tokens) in [("pieces (v4)", &tokens), ("windows (v3)", &before)] {
        let build = best(runs, || pass(tokens, &[]));
        let over_bytes = best(runs, || pass(tokens, &bytes)).saturating_sub(build);
        let over_text = best(runs, || pass(tokens, &text)).saturating_sub(build);
        let speed = |d: Duration| mib as f64 / d.as_secs_f64().max(1e-9);
        println!(
            "{name:>13}: build {:>6.1} ms; search: random bytes {:>6.0} ms ({:>5.0} MiB/s), \
             base64 text {:>6.0} ms ({:>5.0} MiB/s)",
            build.as_secs_f64() * 1e3,
            over_bytes.as_secs_f64() * 1e3,
            speed(over_bytes),
            over_text.as_secs_f64() * 1e3,
            speed(over_text),
        );
    }
    search(&tokens, mib, runs, "random bytes", &payloads(&bytes));
    search(&tokens, mib, runs, "base64 text", &payloads(&text));
    search(
        &tokens,
        mib,
        runs,
        "compressed JSON uploads",
        &compressed_uploads(mib),
    );
}

/// The secret search over `fields`, unwrapped and not, and what each costs.
fn search(tokens: &[Honeytoken], mib: usize, runs: usize, what: &str, fields: &[Vec<u8>]) {
    let refs: Vec<&[u8]> = fields.iter().map(Vec::as_slice).collect();
    let total: usize = fields.iter().map(Vec::len).sum();
    let speed = |d: Duration| total as f64 / (1 << 20) as f64 / d.as_secs_f64().max(1e-9);
    let time = |unwrap: bool| {
        best(runs, || {
            let t = Instant::now();
            let n = glassbox_checks::bench::secret_search(tokens, &refs, unwrap);
            let took = t.elapsed();
            assert_eq!(n, Some(0), "random traffic holds no planted secret");
            took
        })
    };
    let (before, after) = (time(false), time(true));
    println!(
        "{what:>22}: as is (v7) {:>6.0} MiB/s, unwrapped (v8) {:>6.0} MiB/s: {:.2}x the time ({mib} MiB)",
        speed(before),
        speed(after),
        after.as_secs_f64() / before.as_secs_f64().max(1e-9)
    );
}

/// `mib` MiB of JSON bodies, 64 KiB each, each with a zlib-compressed, base64-encoded blob of
/// text (log lines with counters: compressible, as text is).
fn compressed_uploads(mib: usize) -> Vec<Vec<u8>> {
    use base64::Engine as _;
    use std::io::Write;
    let mut out = Vec::new();
    let mut n = 0u64;
    let mut total = 0;
    while total < mib << 20 {
        let mut text = String::new();
        while text.len() < 200 << 10 {
            n += 1;
            text += &format!(
                "{n} INFO worker-{} handled request {} in {} ms\n",
                n % 7,
                n * 31,
                n % 97
            );
        }
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(text.as_bytes()).expect("in memory");
        let blob = base64::engine::general_purpose::STANDARD.encode(z.finish().expect("in memory"));
        let body = format!(r#"{{"name":"logs-{n}.txt","encoding":"zlib+base64","data":"{blob}"}}"#);
        total += body.len();
        out.push(body.into_bytes());
    }
    out
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// `mib` MiB of flows, 64 KiB of payload each, every byte `byte(xorshift)`.
fn traffic(mib: usize, byte: impl Fn(u64) -> u8) -> Vec<Flow> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..mib * 16)
        .map(|i| {
            let sample: Vec<u8> = (0..64 << 10)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    byte(x >> 24)
                })
                .collect();
            Flow {
                id: i as u64 + 1,
                protocol: FlowProtocol::Tcp,
                sample: Bytes::from(sample),
                ..Default::default()
            }
        })
        .collect()
}

/// One evaluation of the check over `flows` with `tokens` planted: its time.
fn pass(tokens: &[Honeytoken], flows: &[Flow]) -> Duration {
    let mut manifest = Manifest::default();
    manifest.sandbox.honeytokens = tokens.to_vec();
    let ctx = Context {
        manifest: &manifest,
        transcript: &[],
        denied_transcript: &[],
        trigger_transcript: &[],
        flows,
    };
    let check = glassbox_checks::find("canary-exfiltration").expect("the check");
    let t = Instant::now();
    let e = (check.start)(&ctx).finish_with(&ctx);
    let took = t.elapsed();
    assert!(e.findings.is_empty(), "random traffic: {:?}", e.findings);
    took
}

fn best(runs: usize, f: impl Fn() -> Duration) -> Duration {
    (0..runs.max(1)).map(|_| f()).min().unwrap_or_default()
}

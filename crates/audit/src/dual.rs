//! Dual execution: which calls to make again, and what each run sent in them.
//!
//! A planted secret can leave in a form no decoder undoes (XOR-ed with a constant, encrypted
//! with a fixed key): the edge reads every byte and the secret search finds nothing. LDX
//! (ASPLOS 2016) tells such a flow apart by running again with one input changed: the bytes
//! that change with the input depend on it. A call in which a planted file was read and
//! bytes the edge read left for a host that is not the secret's service is made again twice,
//! in runs of their own (same plan, network simulated): with fresh values for every planted
//! file, and with the same values. What each run sent to the hosts that call's flows went to
//! is measured here (length, SHA-256, and how much of the original differs from the fresh
//! run's); what that means is `canary-exfiltration`'s and `credential-probe`'s to say
//! (`glassbox_checks`, locked).
//!
//! The measure is by destination over the whole run, not by the call's time window: a flow a
//! server started before the call (at start-up, say) can begin inside the window in one run
//! and before it in the next, and a window would then call bytes that never changed "varying
//! anyway" (what failed a control on a loaded machine).

use glassbox_model::{
    DualRecord, DualRun, Event, EventKind, Flow, Honeytoken, NetworkMode, NetworkRun, Phase,
    PhaseTiming,
};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// Most calls made again in one audit.
pub(crate) const MAX_CANDIDATES: usize = 16;

/// A call worth making again: its phase, the planted files it read, and the destinations
/// ([`destination`]) of the flows that make it one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Candidate {
    pub phase: Phase,
    pub secrets: Vec<String>,
    pub destinations: Vec<String>,
}

/// The calls (reads, gets) of the capture run `run` worth making again: each with the planted
/// files it read and a flow the edge read (a request, or decrypted or clear bytes) in its
/// phase, for a host none of those secrets' services is at, in which the secret search found
/// no planted secret (one it found has left, as is: nothing to tell).
pub(crate) fn candidates(
    run: &NetworkRun,
    events: &[Event],
    flows: &[Flow],
    timings: &[PhaseTiming],
    tokens: &[Honeytoken],
) -> Vec<Candidate> {
    let mut read: BTreeMap<Phase, Vec<String>> = BTreeMap::new();
    for e in events
        .iter()
        .filter(|e| e.id >= run.first_event && e.id < run.end_event)
        .filter(|e| e.phase.exercised().is_some())
    {
        let path = match &e.kind {
            EventKind::Open { path, .. } | EventKind::Honeytoken { path, .. } => path,
            _ => continue,
        };
        let path = path.to_lossy();
        if let Some(t) = tokens
            .iter()
            .find(|t| t.path.starts_with('/') && *t.path == *path)
        {
            let paths = read.entry(e.phase.clone()).or_default();
            if !paths.contains(&t.path) {
                paths.push(t.path.clone());
            }
        }
    }
    let carrying: std::collections::HashSet<u64> = flows
        .iter()
        .zip(glassbox_checks::carries_planted_secret(flows, tokens))
        .filter(|(_, carries)| *carries)
        .map(|(f, _)| f.id)
        .collect();
    let found = |f: &Flow| carrying.contains(&f.id);
    let run_timings: Vec<&PhaseTiming> = timings
        .iter()
        .filter(|t| t.start_ns >= run.start_ns && t.end_ns <= run.end_ns.max(t.start_ns))
        .collect();
    read.into_iter()
        .filter_map(|(phase, secrets)| {
            let services: Vec<&str> = tokens
                .iter()
                .filter(|t| secrets.contains(&t.path))
                .flat_map(|t| &t.services)
                .flat_map(|s| &s.hosts)
                .map(String::as_str)
                .collect();
            let mut destinations: Vec<String> = in_phase(flows, &run_timings, &phase, run.mode)
                .filter(|f| readable(f) && !found(f) && !services.iter().any(|h| to_host(f, h)))
                .map(destination)
                .collect();
            destinations.sort();
            destinations.dedup();
            (!destinations.is_empty()).then_some(Candidate {
                phase,
                secrets,
                destinations,
            })
        })
        .take(MAX_CANDIDATES)
        .collect()
}

/// Where `f` went, as the runs can match it: the name it asked for (a DNS question's, else
/// its SNI, HTTP Host or the name its address was resolved from), else its address.
pub(crate) fn destination(f: &Flow) -> String {
    let name = (f.dns.as_ref().map(|q| &q.name))
        .or(f.sni.as_ref())
        .or(f.http.as_ref().and_then(|h| h.host.as_ref()))
        .or(f.dns_name.as_ref())
        .map(|b| {
            let h = b.to_lossy().to_ascii_lowercase();
            let h = h.trim_end_matches('.');
            // A Host header's port is not part of the name.
            match h.rsplit_once(':') {
                Some((host, port)) if port.bytes().all(|c| c.is_ascii_digit()) => host.into(),
                _ => h.to_string(),
            }
        });
    name.unwrap_or_else(|| f.dst.to_string())
}

/// Whether the edge read what `f` sent.
fn readable(f: &Flow) -> bool {
    !f.exchanges.is_empty() || !f.cleartext.as_slice().is_empty() || f.tls.is_none()
}

/// Whether `f` went to `host` or under it (by its SNI, HTTP Host or DNS name, or the name a
/// DNS question asked: looking up a secret's own service is no reason to make a call again).
fn to_host(f: &Flow, host: &str) -> bool {
    let host = host.to_ascii_lowercase();
    let names = [
        f.sni.as_ref(),
        f.dns_name.as_ref(),
        f.dns.as_ref().map(|q| &q.name),
    ]
    .into_iter()
    .flatten()
    .map(|b| b.to_lossy().to_ascii_lowercase())
    .chain(f.http.iter().filter_map(|h| h.host.as_ref()).map(|b| {
        let h = b.to_lossy().to_ascii_lowercase();
        h.split(':').next().unwrap_or("").to_string()
    }));
    names
        .into_iter()
        .any(|n| n == host || n.ends_with(&format!(".{host}")))
}

/// The flows of mode `mode` that started during `phase` (by the run's phase timings).
fn in_phase<'a>(
    flows: &'a [Flow],
    timings: &'a [&'a PhaseTiming],
    phase: &'a Phase,
    mode: NetworkMode,
) -> impl Iterator<Item = &'a Flow> + 'a {
    let windows: Vec<(u64, u64)> = timings
        .iter()
        .filter(|t| t.phase == *phase)
        .map(|t| (t.start_ns, t.end_ns))
        .collect();
    flows.iter().filter(move |f| {
        f.mode == mode && windows.iter().any(|(a, b)| f.t_ns >= *a && f.t_ns <= *b)
    })
}

/// What one run sent to a call's destinations ([`sent`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Sent {
    /// Every flow's bytes, by destination and then in time order.
    pub bytes: Vec<u8>,
    /// How many flows.
    pub flows: u64,
    /// SHA-256 of the flows' bytes taken each on its own, in sorted order: two runs that sent
    /// the same flows in another order (concurrent requests) compare equal.
    pub sha256: String,
}

/// What the flows of mode `mode` sent to `destinations` over the whole run, by destination
/// and then in order: each request's method, target and body; a DNS question's name; else
/// what the edge decrypted; else the payload of a flow that was not TLS.
pub(crate) fn sent(flows: &[Flow], destinations: &[String], mode: NetworkMode) -> Sent {
    let mut fs: Vec<(String, &Flow)> = flows
        .iter()
        .filter(|f| f.mode == mode)
        .map(|f| (destination(f), f))
        .filter(|(d, _)| destinations.contains(d))
        .collect();
    fs.sort_by(|(a, f), (b, g)| a.cmp(b).then(f.t_ns.cmp(&g.t_ns)));
    let mut chunks: Vec<Vec<u8>> = Vec::new();
    for (d, f) in &fs {
        let mut out = d.as_bytes().to_vec();
        out.push(b'\n');
        if !f.exchanges.is_empty() {
            for x in &f.exchanges {
                out.extend_from_slice(x.method.as_bytes());
                out.push(b' ');
                out.extend_from_slice(x.target.as_slice());
                out.push(b'\n');
                out.extend_from_slice(x.body.as_slice());
                out.push(b'\n');
            }
        } else if let Some(q) = &f.dns {
            // A question's name, not its message (whose id is random).
            out.extend_from_slice(q.name.as_slice());
            out.push(b'\n');
        } else if !f.cleartext.as_slice().is_empty() {
            out.extend_from_slice(f.cleartext.as_slice());
        } else if f.tls.is_none() {
            out.extend_from_slice(f.sample.as_slice());
        }
        // TLS the edge did not read: its handshake is random by design, and what it carried
        // unknown (it is an unread flow to the checks anyway).
        chunks.push(out);
    }
    let bytes = chunks.concat();
    chunks.sort();
    let mut h = Sha256::new();
    for c in &chunks {
        h.update((c.len() as u64).to_le_bytes());
        h.update(c);
    }
    Sent {
        bytes,
        flows: fs.len() as u64,
        sha256: hex(&h.finalize()),
    }
}

/// The record of one call made again: what it sent in each run, and how much of the original
/// differs from the fresh run's.
pub(crate) fn record(
    c: Candidate,
    original: &Sent,
    same: Option<&Sent>,
    fresh: Option<&Sent>,
    note: Option<String>,
) -> DualRecord {
    let run = |name: &str, s: &Sent| DualRun {
        run: name.to_string(),
        bytes: s.bytes.len() as u64,
        sha256: s.sha256.clone(),
        flows: s.flows,
    };
    let mut runs = vec![run("original", original)];
    runs.extend(same.map(|s| run("same", s)));
    runs.extend(fresh.map(|f| run("fresh", f)));
    let varying = fresh.map_or(0, |f| varying(&original.bytes, &f.bytes));
    DualRecord {
        phase: c.phase,
        secrets: c.secrets,
        destinations: c.destinations,
        runs,
        varying,
        note,
    }
}

/// Bytes of `a` outside the prefix and suffix it shares with `b` (the larger of the two's
/// middles): how much of what was sent changed.
fn varying(a: &[u8], b: &[u8]) -> u64 {
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let (a_rest, b_rest) = (&a[prefix..], &b[prefix..]);
    let suffix = a_rest
        .iter()
        .rev()
        .zip(b_rest.iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    (a_rest.len() - suffix).max(b_rest.len() - suffix) as u64
}

/// Bytes as lower-case hex (a SHA-256 shown, a needle in hex: `crate::left`).
pub(crate) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call that read a planted file and sent a request the edge read to a host that is not
    /// its service qualifies; the same request to its service, or no request, does not.
    #[test]
    fn a_call_that_read_a_secret_and_sent_what_the_edge_read_is_made_again() {
        use glassbox_model::{Bytes, HttpExchange, SecretService};
        let tokens = [Honeytoken {
            path: "/home/u/.aws/credentials".into(),
            kind: "aws-credentials".into(),
            services: vec![SecretService {
                name: "AWS".into(),
                hosts: vec!["amazonaws.com".into()],
                secrets: Vec::new(),
            }],
            ..Default::default()
        }];
        let phase = Phase::call("sync", 1);
        let open = |id: u64, phase: Phase| Event {
            id,
            t_ns: 10,
            pid: 2,
            ppid: 1,
            phase,
            kind: EventKind::Open {
                syscall: "openat".into(),
                path: Bytes::from("/home/u/.aws/credentials"),
                flags: 0,
                flags_text: "O_RDONLY".into(),
                result: Some(3),
            },
        };
        let flow = |host: &str| Flow {
            mode: NetworkMode::Capture,
            t_ns: 20,
            sni: Some(Bytes::from(host)),
            exchanges: vec![HttpExchange {
                t_ns: 0,
                method: "POST".into(),
                target: Bytes::from("/up"),
                headers: Vec::new(),
                body: Bytes::from("opaque"),
                body_len: 6,
                body_error: None,
                status: 200,
                dns: None,
                dns_error: None,
            }],
            ..Default::default()
        };
        let run = NetworkRun {
            mode: NetworkMode::Capture,
            start_ns: 0,
            end_ns: 100,
            first_event: 1,
            end_event: 10,
            ..Default::default()
        };
        let timings = [PhaseTiming {
            phase: phase.clone(),
            start_ns: 5,
            end_ns: 50,
        }];
        let events = [open(1, phase.clone())];
        let got = candidates(&run, &events, &[flow("collect.example")], &timings, &tokens);
        let want = Candidate {
            phase: phase.clone(),
            secrets: vec![tokens[0].path.clone()],
            destinations: vec!["collect.example".into()],
        };
        assert_eq!(got, std::slice::from_ref(&want));
        let own = candidates(
            &run,
            &events,
            &[flow("sts.amazonaws.com")],
            &timings,
            &tokens,
        );
        assert!(own.is_empty(), "{own:?}");
        // Nor does a DNS question for it (the lookup before the request): with fresh secrets
        // the service's own name may change (a kubeconfig's cluster), which would read as the
        // secret carried.
        let lookup = Flow {
            dns: Some(glassbox_model::DnsQuery {
                name: Bytes::from("sts.amazonaws.com"),
                qtype: "A".into(),
                answers: Vec::new(),
            }),
            ..flow("sts.amazonaws.com")
        };
        let lookup = Flow {
            sni: None,
            exchanges: Vec::new(),
            ..lookup
        };
        let own = candidates(&run, &events, &[lookup], &timings, &tokens);
        assert!(own.is_empty(), "{own:?}");
        assert!(candidates(&run, &events, &[], &timings, &tokens).is_empty());
        // One that carries the secret as is: found already, nothing to tell.
        let mut plain = flow("collect.example");
        plain.id = 7;
        plain.exchanges[0].body = Bytes::from("key=gbxSECRETVALUE0123456789");
        let mut tokens = tokens.clone();
        tokens[0].secrets = vec!["gbxSECRETVALUE0123456789".into()];
        let got = candidates(&run, &events, &[plain], &timings, &tokens);
        assert!(got.is_empty(), "{got:?}");
        let startup = [open(1, Phase::Startup)];
        let flows = [flow("collect.example")];
        assert!(candidates(&run, &startup, &flows, &timings, &tokens).is_empty());
        let got = sent(&flows, &want.destinations, NetworkMode::Capture);
        assert_eq!(
            (got.bytes.as_slice(), got.flows),
            (&b"collect.example\nPOST /up\nopaque\n"[..], 1)
        );
    }

    /// What a run sent is measured by destination over the whole run: a flow that began
    /// before the call in one run and inside it in another measures the same; flows to other
    /// hosts, or of another mode, are not in it.
    #[test]
    fn what_a_run_sent_is_by_destination_not_by_the_call_s_window() {
        use glassbox_model::{Bytes, HttpRequest};
        let flow = |t_ns: u64, host: &str, mode: NetworkMode, payload: &str| Flow {
            mode,
            t_ns,
            http: Some(HttpRequest {
                method: "GET".into(),
                target: Bytes::from("/v2"),
                host: Some(Bytes::from(format!("{host}:80"))),
            }),
            sample: Bytes::from(payload),
            ..Default::default()
        };
        let dests = vec!["flags.vendor.example".to_string()];
        let early = [
            flow(1, "flags.vendor.example", NetworkMode::Capture, "GET /v2\n"),
            flow(2, "other.example", NetworkMode::Capture, "x"),
            flow(3, "flags.vendor.example", NetworkMode::Denied, "GET /v2\n"),
        ];
        let late = [
            flow(2, "other.example", NetworkMode::Capture, "y"),
            flow(
                90,
                "flags.vendor.example",
                NetworkMode::Capture,
                "GET /v2\n",
            ),
        ];
        assert_eq!(destination(&early[0]), "flags.vendor.example");
        let a = sent(&early, &dests, NetworkMode::Capture);
        assert_eq!(
            (a.bytes.as_slice(), a.flows),
            (&b"flags.vendor.example\nGET /v2\n"[..], 1)
        );
        assert_eq!(a, sent(&late, &dests, NetworkMode::Capture));
        // Two requests to one host made in the other order (concurrently) compare equal.
        let one = flow(5, "flags.vendor.example", NetworkMode::Capture, "GET /a\n");
        let two = flow(6, "flags.vendor.example", NetworkMode::Capture, "GET /b\n");
        let swapped = [
            Flow {
                t_ns: 6,
                ..one.clone()
            },
            Flow {
                t_ns: 5,
                ..two.clone()
            },
        ];
        let (x, y) = (
            sent(&[one, two], &dests, NetworkMode::Capture),
            sent(&swapped, &dests, NetworkMode::Capture),
        );
        assert_eq!(x.sha256, y.sha256);
        assert_ne!(x.bytes, y.bytes);
    }

    #[test]
    fn what_varies_is_what_the_two_do_not_share() {
        assert_eq!(varying(b"POST /k\nabcXYZdef", b"POST /k\nabcQRSdef"), 3);
        assert_eq!(varying(b"same", b"same"), 0);
        assert_eq!(varying(b"ab", b"abcd"), 2);
        assert_eq!(varying(b"", b"xyz"), 3);
        let s = |b: &[u8]| Sent {
            bytes: b.to_vec(),
            flows: 1,
            sha256: hex(&Sha256::digest(b)),
        };
        let r = record(
            Candidate {
                phase: Phase::call("t", 1),
                secrets: vec!["/h/.ssh/id".into()],
                destinations: vec!["c.example".into()],
            },
            &s(b"aXb"),
            Some(&s(b"aXb")),
            Some(&s(b"aYb")),
            None,
        );
        assert_eq!(r.varying, 1);
        assert_eq!(r.runs[0].sha256, r.runs[1].sha256);
        assert_ne!(r.runs[0].sha256, r.runs[2].sha256);
    }
}

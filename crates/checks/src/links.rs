//! Which system calls made which flows: each flow at the edge is matched with the system
//! calls that caused it (connect, sendto, sendmsg, sendmmsg, TCP Fast Open's
//! `sendto(MSG_FASTOPEN)`), and each such call with its flow. The recorder and the edge
//! record raw: the calls in `events.jsonl`, the flows in `network.jsonl`. The pairing is
//! derived here, every time checks run (a live audit and `recheck` alike), so a better
//! pairing applies to old evidence too; every check that reads [`Flow::events`] lists this
//! file among its sources, so `checks.lock` versions it with them.
//!
//! Within each run (its events by id, its flows by mode):
//!
//! - A TCP flow is one connection: it takes the earliest unmatched call to its destination
//!   made before its first packet. One call, one connection.
//! - A datagram flow (UDP, DNS, ICMP) sent on a connected socket takes the `connect` calls to
//!   its destination made since the previous flow there began, or the latest one before it
//!   (two DNS queries after one `connect`). Sent without a connect, it takes one unused
//!   `sendto`/`sendmsg` per datagram (a `sendmmsg` covers the rest): one call, one datagram,
//!   so a datagram whose call named another destination is left without one.
//! - A canary-socket flow takes the connects to its path.
//!
//! What is left over is said, not guessed at: a flow with no call behind it is traffic the
//! recorder did not see (`sandbox-evasion` flags it); a call with an IP destination off
//! loopback and no flow is listed in [`Links::without_flow`] (the report's "calls with no
//! packet").
//!
//! The pass over the events is a pre-pass ([`Calls`]): it keeps only the calls with a
//! destination, so the checks that follow still see the stream once, and memory grows with
//! those calls, not with the trace.

use glassbox_model::{Event, EventKind, Flow, FlowProtocol, NetworkMode, NetworkRun, SockAddr};
use std::collections::HashMap;
use std::net::IpAddr;

/// How much later than its flow's first packet a call may be stamped (the two channels are
/// read by different threads from one clock; a call is stamped before its packet exists).
const SLACK_NS: u64 = 100_000_000;

/// A recorded call with a destination.
#[derive(Clone, Debug)]
struct Call {
    t: u64,
    id: u64,
    how: How,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum How {
    /// `connect`: the socket may send any number of datagrams afterwards.
    Connect,
    /// `sendto`, `sendmsg`: one datagram.
    Send,
    /// `sendmmsg`: a batch.
    Batch,
}

/// A destination as both channels name it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Key {
    Ip(IpAddr, u16),
    Unix(Vec<u8>),
}

fn ip_key(ip: &str, port: u16) -> Option<Key> {
    let ip: IpAddr = ip.parse().ok()?;
    // An IPv4-mapped IPv6 address leaves as IPv4.
    let ip = match ip {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(IpAddr::V4)
            .unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    };
    Some(Key::Ip(ip, port))
}

fn key(addr: &SockAddr) -> Option<Key> {
    match addr {
        SockAddr::Inet { ip, port } | SockAddr::Inet6 { ip, port } => ip_key(ip, *port),
        SockAddr::Unix {
            path,
            is_abstract: false,
        } => {
            // `/var/run` is a symlink to `/run` in the sandbox.
            let p = path.as_slice();
            let p = p
                .strip_prefix(b"/var".as_slice())
                .filter(|r| r.starts_with(b"/run/"))
                .unwrap_or(p);
            Some(Key::Unix(p.to_vec()))
        }
        _ => None,
    }
}

/// Whether a call's destination is one whose packets reach the edge.
fn leaves(k: &Key) -> bool {
    match k {
        Key::Ip(ip, _) => crate::net::is_egress(*ip),
        Key::Unix(_) => false,
    }
}

/// The calls with a destination of an event stream, gathered before the checks see it.
#[derive(Clone, Debug, Default)]
pub struct Calls {
    /// In stream order, each with its destination.
    calls: Vec<(Key, Call)>,
}

/// The calls no flow took, per run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Links {
    /// For each run of the manifest, in its order: its mode, and the ids of the calls with an
    /// IP destination off loopback that no flow at the edge took.
    pub without_flow: Vec<(NetworkMode, Vec<u64>)>,
}

impl Calls {
    /// The next event of the stream.
    pub fn event(&mut self, e: &Event) {
        if let EventKind::Connect { addr, syscall, .. } = &e.kind {
            if let Some(k) = key(addr) {
                let how = match syscall.as_str() {
                    "connect" => How::Connect,
                    "sendmmsg" => How::Batch,
                    _ => How::Send,
                };
                self.calls.push((
                    k,
                    Call {
                        t: e.t_ns,
                        id: e.id,
                        how,
                    },
                ));
            }
        }
    }

    /// Sets each flow's [`Flow::events`] (whatever it carried before) from these calls, run by
    /// run: a run's flows (by mode) take only its own calls (by event id). Flows of a mode no
    /// run names, and every flow when the manifest names no run, take from all the calls.
    pub fn link(&self, flows: &mut [Flow], runs: &[NetworkRun]) -> Links {
        for f in flows.iter_mut() {
            f.events.clear();
        }
        let mut links = Links::default();
        for run in runs {
            let calls = self
                .calls
                .iter()
                .filter(|(_, c)| c.id >= run.first_event && c.id < run.end_event);
            let mut mine: Vec<&mut Flow> =
                flows.iter_mut().filter(|f| f.mode == run.mode).collect();
            links
                .without_flow
                .push((run.mode, match_flows(calls, &mut mine)));
        }
        let mut rest: Vec<&mut Flow> = flows
            .iter_mut()
            .filter(|f| !runs.iter().any(|r| r.mode == f.mode))
            .collect();
        if !rest.is_empty() {
            match_flows(self.calls.iter(), &mut rest);
        }
        links
    }
}

/// One run's evidence, linked: its flows with their [`Flow::events`] set (see [`Calls::link`]).
pub fn link(events: &[Event], flows: &mut [Flow], runs: &[NetworkRun]) -> Links {
    let mut calls = Calls::default();
    for e in events {
        calls.event(e);
    }
    calls.link(flows, runs)
}

/// Matches `flows` (one run's) with that run's `calls`, filling each flow's `events`.
/// Returns the ids of the calls with an off-loopback IP destination that no flow took.
fn match_flows<'c>(
    all: impl Iterator<Item = &'c (Key, Call)>,
    flows: &mut [&mut Flow],
) -> Vec<u64> {
    // The calls by destination, in time order.
    let mut calls: HashMap<&Key, Vec<&Call>> = HashMap::new();
    for (k, c) in all {
        calls.entry(k).or_default().push(c);
    }
    let mut used: HashMap<u64, bool> = HashMap::new();
    let mut order: Vec<usize> = (0..flows.len()).collect();
    order.sort_by_key(|&i| flows[i].t_ns);
    let mut previous_start: HashMap<Key, u64> = HashMap::new();
    for i in order {
        let f = &mut *flows[i];
        let Some(k) = key(&f.dst) else { continue };
        let Some(list) = calls.get(&k) else {
            continue;
        };
        let deadline = f.t_ns.saturating_add(SLACK_NS);
        match f.protocol {
            FlowProtocol::Tcp => {
                if let Some(c) = list
                    .iter()
                    .find(|c| c.t <= deadline && !used.contains_key(&c.id))
                {
                    used.insert(c.id, true);
                    f.events = vec![c.id];
                }
            }
            _ => {
                let since = previous_start.get(&k).copied();
                let end = f.end_ns.saturating_add(SLACK_NS);
                let connected = list
                    .iter()
                    .any(|c| c.how == How::Connect && c.t <= deadline);
                f.events = if connected {
                    let mine: Vec<u64> = list
                        .iter()
                        .filter(|c| c.how == How::Connect)
                        .filter(|c| since.is_none_or(|s| c.t > s) && c.t <= end)
                        .map(|c| c.id)
                        .collect();
                    if mine.is_empty() {
                        list.iter()
                            .rev()
                            .find(|c| c.how == How::Connect && c.t <= deadline)
                            .map(|c| vec![c.id])
                            .unwrap_or_default()
                    } else {
                        mine
                    }
                } else {
                    let mut left = f.packets_out.max(1);
                    let mut mine = Vec::new();
                    for c in list
                        .iter()
                        .filter(|c| c.t <= end && !used.contains_key(&c.id))
                    {
                        if left == 0 {
                            break;
                        }
                        mine.push(c.id);
                        left = if c.how == How::Batch { 0 } else { left - 1 };
                    }
                    mine
                };
                for id in &f.events {
                    used.insert(*id, true);
                }
                previous_start.insert(k, f.t_ns);
            }
        }
    }
    let mut unmatched: Vec<u64> = calls
        .iter()
        .filter(|(k, _)| leaves(k))
        .flat_map(|(_, list)| list.iter().map(|c| c.id))
        .filter(|id| !used.contains_key(id))
        .collect();
    unmatched.sort_unstable();
    unmatched
}

#[cfg(test)]
mod tests {
    use super::*;
    use glassbox_model::{Bytes, Phase};

    /// Links `flows` as one capture run of `events`: the calls no flow took.
    fn match_flows(events: &[Event], flows: &mut [Flow]) -> Vec<u64> {
        let run = NetworkRun {
            mode: NetworkMode::Capture,
            first_event: 1,
            end_event: 1_000,
            ..Default::default()
        };
        let links = link(events, flows, &[run]);
        links.without_flow[0].1.clone()
    }

    fn connect(id: u64, t_ns: u64, ip: &str, port: u16) -> Event {
        Event {
            id,
            t_ns,
            pid: 2,
            ppid: 1,
            phase: Phase::Startup,
            kind: EventKind::Connect {
                syscall: "connect".into(),
                fd: 3,
                addr: SockAddr::Inet {
                    ip: ip.into(),
                    port,
                },
                sock_type: None,
            },
        }
    }

    fn flow(protocol: FlowProtocol, t_ns: u64, ip: &str, port: u16) -> Flow {
        Flow {
            id: 0,
            mode: NetworkMode::Capture,
            t_ns,
            end_ns: t_ns,
            protocol,
            src: None,
            dst: SockAddr::Inet {
                ip: ip.into(),
                port,
            },
            dns_name: None,
            dns: None,
            sni: None,
            http: None,
            packets_out: 1,
            bytes_out: 0,
            bytes_in: 0,
            sample: Bytes::from(""),
            sample_truncated: false,
            events: vec![],
            note: None,
            ..Default::default()
        }
    }

    #[test]
    fn one_connect_one_connection() {
        let events = [
            connect(1, 10, "192.0.2.9", 80),
            connect(2, 20, "192.0.2.9", 80),
        ];
        // Three connections, two connects: the third was not seen by the recorder.
        let mut flows = [
            flow(FlowProtocol::Tcp, 11, "192.0.2.9", 80),
            flow(FlowProtocol::Tcp, 21, "192.0.2.9", 80),
            flow(FlowProtocol::Tcp, 31, "192.0.2.9", 80),
        ];
        let unmatched = match_flows(&events, &mut flows);
        assert_eq!(flows[0].events, vec![1]);
        assert_eq!(flows[1].events, vec![2]);
        assert!(flows[2].events.is_empty());
        assert!(unmatched.is_empty());
    }

    fn send(id: u64, t_ns: u64, ip: &str, port: u16) -> Event {
        let mut e = connect(id, t_ns, ip, port);
        if let EventKind::Connect { syscall, .. } = &mut e.kind {
            *syscall = "sendto".into();
        }
        e
    }

    #[test]
    fn one_sendto_one_datagram() {
        let events = [send(1, 10, "192.0.2.9", 53), send(2, 20, "192.0.2.9", 53)];
        // Three datagrams on unconnected sockets, two sendto calls naming their destination.
        let mut flows = [
            flow(FlowProtocol::Udp, 11, "192.0.2.9", 53),
            flow(FlowProtocol::Udp, 21, "192.0.2.9", 53),
            flow(FlowProtocol::Udp, 31, "192.0.2.9", 53),
        ];
        let unmatched = match_flows(&events, &mut flows);
        assert_eq!(flows[0].events, vec![1]);
        assert_eq!(flows[1].events, vec![2]);
        assert!(flows[2].events.is_empty(), "{:?}", flows[2]);
        assert!(unmatched.is_empty());
    }

    #[test]
    fn datagrams_share_their_socket_and_leftover_calls_are_listed() {
        let events = [
            connect(1, 10, "198.18.0.2", 53),
            connect(2, 12, "127.0.0.1", 9),
            connect(3, 14, "::ffff:203.0.113.5", 7),
            connect(4, 16, "192.0.2.77", 443),
        ];
        let mut flows = [
            flow(FlowProtocol::Dns, 11, "198.18.0.2", 53),
            flow(FlowProtocol::Dns, 13, "198.18.0.2", 53),
            flow(FlowProtocol::Udp, 15, "203.0.113.5", 7),
            // A flow to a destination no call named.
            flow(FlowProtocol::Udp, 17, "198.51.100.1", 9),
        ];
        let unmatched = match_flows(&events, &mut flows);
        assert_eq!(flows[0].events, vec![1]);
        assert_eq!(
            flows[1].events,
            vec![1],
            "the second query shares the connect"
        );
        assert_eq!(flows[2].events, vec![3], "mapped IPv4 is IPv4");
        assert!(flows[3].events.is_empty());
        // Loopback is no egress; the connect to 192.0.2.77 reached no edge.
        assert_eq!(unmatched, vec![4]);
    }

    #[test]
    fn each_run_takes_its_own_calls_and_old_links_are_redone() {
        // The same destination in the capture run (events 1..3) and the denied run (3..5).
        let events = [
            connect(1, 10, "192.0.2.9", 80),
            connect(3, 40, "192.0.2.9", 80),
        ];
        let mut capture = flow(FlowProtocol::Tcp, 41, "192.0.2.9", 80);
        // What an older glassbox stored is not kept: the pairing is redone.
        capture.events = vec![3];
        let mut denied = flow(FlowProtocol::Tcp, 42, "192.0.2.9", 80);
        denied.mode = NetworkMode::Denied;
        let mut flows = [capture, denied];
        let runs = [
            NetworkRun {
                mode: NetworkMode::Capture,
                first_event: 1,
                end_event: 3,
                ..Default::default()
            },
            NetworkRun {
                mode: NetworkMode::Denied,
                first_event: 3,
                end_event: 5,
                ..Default::default()
            },
        ];
        let links = link(&events, &mut flows, &runs);
        assert_eq!(
            flows[0].events,
            vec![1],
            "the capture flow takes the capture call"
        );
        assert_eq!(flows[1].events, vec![3]);
        assert_eq!(
            links.without_flow,
            vec![
                (NetworkMode::Capture, vec![]),
                (NetworkMode::Denied, vec![])
            ]
        );
        // Without runs in the manifest, every flow takes from every call.
        let mut flows = [flow(FlowProtocol::Tcp, 11, "192.0.2.9", 80)];
        assert!(link(&events, &mut flows, &[]).without_flow.is_empty());
        assert_eq!(flows[0].events, vec![1]);
    }
}

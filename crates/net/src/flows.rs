//! Flow accounting, shared by both modes: which flow a packet belongs to, its counts and its
//! sample, within the run's limits.

use crate::packet::{Packet, Transport, PROTO_ICMP, PROTO_ICMPV6};
use crate::Limits;
use glassbox_model::{
    Bytes, Flow, FlowProtocol, HttpExchange, HttpRequest, NetworkMode, SockAddr, EXCHANGE_LIMIT,
};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

/// Longest note kept on a flow.
const NOTE_LIMIT: usize = 512;

/// What identifies a flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum FlowKey {
    /// One TCP connection: (sandbox end, destination).
    Tcp(SocketAddr, SocketAddr),
    /// UDP datagrams between one source and one destination.
    Udp(SocketAddr, SocketAddr),
    /// One DNS query over UDP: its ends and its transaction id (`None` when too short to
    /// hold one).
    Dns(SocketAddr, SocketAddr, Option<u16>),
    /// ICMP messages from one address to another.
    Icmp(IpAddr, IpAddr),
    /// Any other protocol (by number) from one address to another.
    Other(u8, IpAddr, IpAddr),
}

impl FlowKey {
    /// The flow of a packet from the sandbox.
    pub fn of(p: &Packet<'_>) -> FlowKey {
        FlowKey::between(p, p.src, p.dst, false)
    }

    /// The flow a packet sent to the sandbox answers (its ends swapped).
    pub fn answered_by(p: &Packet<'_>) -> FlowKey {
        FlowKey::between(p, p.dst, p.src, true)
    }

    fn between(p: &Packet<'_>, src: IpAddr, dst: IpAddr, reply: bool) -> FlowKey {
        match p.transport {
            Transport::Tcp {
                src_port, dst_port, ..
            } => {
                let (sp, dp) = if reply {
                    (dst_port, src_port)
                } else {
                    (src_port, dst_port)
                };
                FlowKey::Tcp(SocketAddr::new(src, sp), SocketAddr::new(dst, dp))
            }
            Transport::Udp {
                src_port,
                dst_port,
                payload,
            } => {
                let (sp, dp) = if reply {
                    (dst_port, src_port)
                } else {
                    (src_port, dst_port)
                };
                let (s, d) = (SocketAddr::new(src, sp), SocketAddr::new(dst, dp));
                if dp == 53 {
                    let id = payload.get(..2).map(|b| u16::from_be_bytes([b[0], b[1]]));
                    FlowKey::Dns(s, d, id)
                } else {
                    FlowKey::Udp(s, d)
                }
            }
            Transport::Icmp { .. } => FlowKey::Icmp(src, dst),
            Transport::Other { .. } if matches!(p.protocol, PROTO_ICMP | PROTO_ICMPV6) => {
                FlowKey::Icmp(src, dst)
            }
            Transport::Other { .. } => FlowKey::Other(p.protocol, src, dst),
        }
    }

    /// The destination address.
    fn dst_ip(&self) -> IpAddr {
        match *self {
            FlowKey::Tcp(_, d) | FlowKey::Udp(_, d) | FlowKey::Dns(_, d, _) => d.ip(),
            FlowKey::Icmp(_, d) | FlowKey::Other(_, _, d) => d,
        }
    }

    /// A new flow of this key (counts zero).
    fn flow(&self, id: u64, mode: NetworkMode, now_ns: u64) -> Flow {
        let (protocol, src, dst, note) = match *self {
            FlowKey::Tcp(s, d) => (FlowProtocol::Tcp, s, d, None),
            FlowKey::Udp(s, d) => (FlowProtocol::Udp, s, d, None),
            FlowKey::Dns(s, d, _) => (FlowProtocol::Dns, s, d, None),
            FlowKey::Icmp(s, d) => (
                FlowProtocol::Icmp,
                SocketAddr::new(s, 0),
                SocketAddr::new(d, 0),
                None,
            ),
            FlowKey::Other(proto, s, d) => (
                FlowProtocol::Other,
                SocketAddr::new(s, 0),
                SocketAddr::new(d, 0),
                Some(format!("IP protocol {proto}")),
            ),
        };
        Flow {
            id,
            mode,
            t_ns: now_ns,
            end_ns: now_ns,
            protocol,
            src: Some(sock_addr(src)),
            dst: sock_addr(dst),
            dns_name: None,
            dns: None,
            sni: None,
            http: None,
            packets_out: 0,
            bytes_out: 0,
            bytes_in: 0,
            sample: Bytes::default(),
            sample_truncated: false,
            events: Vec::new(),
            note,
            ..Default::default()
        }
    }
}

/// A socket address as the syscall recorder writes it (Rust's address Display text).
pub(crate) fn sock_addr(a: SocketAddr) -> SockAddr {
    match a {
        SocketAddr::V4(a) => SockAddr::Inet {
            ip: a.ip().to_string(),
            port: a.port(),
        },
        SocketAddr::V6(a) => SockAddr::Inet6 {
            ip: a.ip().to_string(),
            port: a.port(),
        },
    }
}

/// The flows of one run, in the order they began.
#[derive(Debug)]
pub(crate) struct Flows {
    mode: NetworkMode,
    first_id: u64,
    max_flows: usize,
    sample_per_flow: usize,
    /// Sample bytes still allowed over the whole run.
    sample_left: usize,
    /// Bytes read at the edge (cleartext, exchanges) still allowed over the whole run.
    read_left: usize,
    /// The whole of that budget, for the flows' notes.
    read_total: usize,
    flows: Vec<Flow>,
    index: HashMap<FlowKey, usize>,
}

impl Flows {
    pub fn new(mode: NetworkMode, first_id: u64, limits: &Limits) -> Flows {
        Flows {
            mode,
            first_id,
            max_flows: limits.max_flows,
            sample_per_flow: limits.sample_per_flow,
            sample_left: limits.sample_total,
            read_left: limits.read_total(),
            read_total: limits.read_total(),
            flows: Vec::new(),
            index: HashMap::new(),
        }
    }

    /// Counts one packet of `key` at `now_ns`, beginning the flow if it is new and there is
    /// room (`dns_name` names a destination the edge's DNS handed out). `None` when the
    /// flow is beyond the limit.
    pub fn packet(
        &mut self,
        key: FlowKey,
        now_ns: u64,
        dns_name: impl FnOnce(IpAddr) -> Option<Bytes>,
    ) -> Option<usize> {
        let i = match self.index.get(&key) {
            Some(&i) => i,
            None if self.flows.len() < self.max_flows => {
                let i = self.flows.len();
                let mut flow = key.flow(self.first_id + i as u64, self.mode, now_ns);
                flow.dns_name = dns_name(key.dst_ip());
                self.flows.push(flow);
                self.index.insert(key, i);
                i
            }
            None => return None,
        };
        let flow = &mut self.flows[i];
        flow.packets_out += 1;
        flow.end_ns = flow.end_ns.max(now_ns);
        Some(i)
    }

    /// The flow of `key`, if kept.
    pub fn find(&self, key: &FlowKey) -> Option<usize> {
        self.index.get(key).copied()
    }

    /// Outbound payload of flow `i`: counted, and its first bytes kept.
    pub fn payload(&mut self, i: usize, bytes: &[u8]) {
        let Some(flow) = self.flows.get_mut(i) else {
            return;
        };
        flow.bytes_out += bytes.len() as u64;
        let room = self
            .sample_per_flow
            .saturating_sub(flow.sample.0.len())
            .min(self.sample_left);
        let take = room.min(bytes.len());
        flow.sample.0.extend_from_slice(&bytes[..take]);
        self.sample_left -= take;
        if take < bytes.len() {
            flow.sample_truncated = true;
        }
    }

    /// Decrypted bytes the sandbox sent on flow `i`: the first kept (as many as a sample,
    /// within the run's budget), the rest counted.
    pub fn cleartext(&mut self, i: usize, bytes: &[u8]) {
        let Some(flow) = self.flows.get_mut(i) else {
            return;
        };
        let per_flow = self.sample_per_flow.saturating_sub(flow.cleartext.0.len());
        let take = per_flow.min(self.read_left).min(bytes.len());
        flow.cleartext.0.extend_from_slice(&bytes[..take]);
        self.read_left -= take;
        flow.cleartext_cut += (bytes.len() - take) as u64;
        if take < per_flow.min(bytes.len()) {
            self.spent(i);
        }
    }

    /// An HTTP exchange read on flow `i`: kept (the first [`EXCHANGE_LIMIT`], within the
    /// run's budget) or counted. The first one is also the flow's request line and Host.
    pub fn exchange(&mut self, i: usize, mut ex: HttpExchange) {
        let Some(flow) = self.flows.get_mut(i) else {
            return;
        };
        // Its request's last bytes came with the flow's latest packet.
        if ex.t_ns == 0 {
            ex.t_ns = flow.end_ns;
        }
        if flow.http.is_none() {
            flow.http = Some(HttpRequest {
                method: ex.method.clone(),
                target: ex.target.clone(),
                host: ex.header("host").cloned(),
            });
        }
        if flow.exchanges.len() >= EXCHANGE_LIMIT {
            flow.exchanges_cut += 1;
            return;
        }
        let cost = ex.method.len()
            + ex.target.0.len()
            + ex.body.0.len()
            + ex.headers
                .iter()
                .map(|(n, v)| n.len() + v.0.len())
                .sum::<usize>()
            + ex.dns.as_ref().map_or(0, |q| {
                q.name.0.len() + q.qtype.len() + q.answers.iter().map(String::len).sum::<usize>()
            })
            + ex.dns_error.as_ref().map_or(0, String::len);
        let spent = cost > self.read_left;
        if spent {
            // Only the method, the status and the lengths are kept: a few bytes.
            ex.target = Bytes::default();
            ex.headers = Vec::new();
            ex.body = Bytes::default();
            ex.dns = None;
            ex.dns_error = None;
        } else {
            self.read_left -= cost;
        }
        flow.exchanges.push(ex);
        if spent {
            self.spent(i);
        }
    }

    /// The run's budget for what is read ran out on flow `i`: it is not all kept, and
    /// says so.
    fn spent(&mut self, i: usize) {
        let total = self.read_total;
        if let Some(flow) = self.flows.get_mut(i) {
            let budget = match total >> 20 {
                0 => format!("{total} bytes"),
                mib => format!("{mib} MiB"),
            };
            flow.unread.get_or_insert_with(|| {
                format!(
                    "the edge keeps at most {budget} of what it reads in a run, and that was \
                     spent: part of what this flow sent was read but not kept"
                )
            });
        }
    }

    /// Marks flow `i` as carrying what could not be read (`why`; replaces an earlier
    /// reason, `None` clears it).
    pub fn unread(&mut self, i: usize, why: Option<String>) {
        if let Some(flow) = self.flows.get_mut(i) {
            flow.unread = why;
        }
    }

    /// `bytes` of payload sent to the sandbox on flow `i`.
    pub fn sent(&mut self, i: usize, bytes: usize) {
        if let Some(flow) = self.flows.get_mut(i) {
            flow.bytes_in += bytes as u64;
        }
    }

    /// Flow `i`, to fill in what was parsed.
    pub fn get_mut(&mut self, i: usize) -> Option<&mut Flow> {
        self.flows.get_mut(i)
    }

    /// Adds a note to flow `i` (once; notes are joined with `; `, bounded).
    pub fn note(&mut self, i: usize, text: &str) {
        let Some(flow) = self.flows.get_mut(i) else {
            return;
        };
        match &mut flow.note {
            None => flow.note = Some(text.to_string()),
            Some(n) if n.split("; ").any(|part| part == text) => {}
            Some(n) if n.len() + text.len() + 2 <= NOTE_LIMIT => {
                n.push_str("; ");
                n.push_str(text);
            }
            Some(_) => {}
        }
    }

    /// How many flows are kept.
    pub fn len(&self) -> usize {
        self.flows.len()
    }

    /// The flows, in the order they began (which is the order of their ids).
    pub fn into_flows(self) -> Vec<Flow> {
        self.flows
    }
}

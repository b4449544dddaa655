//! The network edge, end to end: a control's packets to documentation addresses reach
//! glassbox's edge, and none reaches a host interface. A packet socket on every interface of
//! the host's network namespace watches while the audit runs; it is itself proven to see
//! traffic by a datagram this test sends on the host's loopback.

use glassbox_audit::{audit, AuditOptions, Quiet};
use glassbox_checks::Proofs;
use glassbox_model::{FlowProtocol, NetworkMode, SockAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// A packet socket on every interface of this network namespace (needs CAP_NET_RAW: the
/// test fails without it rather than proving nothing).
fn watch_host_interfaces() -> OwnedFd {
    let proto = (libc::ETH_P_ALL as u16).to_be() as i32;
    // SAFETY: socket with constant arguments.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK, proto) };
    assert!(
        fd >= 0,
        "cannot watch the host's interfaces (AF_PACKET needs CAP_NET_RAW): {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: the descriptor is new and ours.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // Room for everything the host sends during the audit.
    let size: libc::c_int = 64 << 20;
    // SAFETY: a valid c_int option value of the given size.
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            (&size as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as u32,
        )
    };
    fd
}

/// Every frame queued on the packet socket.
fn drain(fd: &OwnedFd) -> Vec<Vec<u8>> {
    let mut frames = Vec::new();
    let mut buf = vec![0u8; 65_536];
    loop {
        // SAFETY: reading into a buffer we own.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n <= 0 {
            return frames;
        }
        frames.push(buf[..n as usize].to_vec());
    }
}

fn contains(frame: &[u8], needle: &[u8]) -> bool {
    frame.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn packets_to_documentation_addresses_reach_the_edge_and_no_host_interface() {
    let watch = watch_host_interfaces();
    // The watcher sees traffic: a datagram on the host's loopback.
    let probe = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    probe
        .send_to(b"glassbox-host-watch-probe", "127.0.0.1:9")
        .unwrap();
    // Read until it is seen (a watchdog of 30 s ends the wait, far from the microseconds the
    // loopback takes).
    let seen = (0..1500).any(|_| {
        let now = drain(&watch)
            .iter()
            .any(|f| contains(f, b"glassbox-host-watch-probe"));
        if !now {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        now
    });
    assert!(
        seen,
        "the packet socket did not see the host's own loopback datagram"
    );

    let dir = fixtures().join("udp-sendto").canonicalize().unwrap();
    let mut o = AuditOptions::new(vec!["python3".into(), "server.py".into()], dir);
    o.extra_ro = vec![fixtures().join("lib").canonicalize().unwrap()];
    let evidence = tempdir();
    o.evidence_dir = Some(evidence.clone());
    o.proofs = Some(Proofs::all_proven());
    let a = audit(&o, &Quiet).expect("audit");

    // The edge saw the datagrams, in both runs, matched with their sendto calls.
    let target = SockAddr::Inet {
        ip: "198.51.100.7".into(),
        port: 9999,
    };
    // The bundle keeps the flows raw; the checks pair them with the calls that made them.
    assert!(a.evidence.flows.iter().all(|f| f.events.is_empty()));
    let mut linked = a.evidence.flows.clone();
    glassbox_checks::links::link(
        &a.evidence.events,
        &mut linked,
        &a.evidence.manifest.network.runs,
    );
    for mode in [NetworkMode::Capture, NetworkMode::Denied] {
        let flows: Vec<_> = linked
            .iter()
            .filter(|f| f.mode == mode && f.dst == target && f.protocol == FlowProtocol::Udp)
            .collect();
        assert!(
            !flows.is_empty(),
            "{mode:?}: no flow to {target}: {linked:?}"
        );
        assert!(flows.iter().all(|f| !f.events.is_empty()), "{flows:?}");
        let packets: u64 = flows.iter().map(|f| f.packets_out).sum();
        assert!(
            packets >= 2,
            "{mode:?}: {packets} datagrams (start and call)"
        );
    }
    for r in &a.evidence.manifest.network.runs {
        assert!(r.isolation_verified, "{:?}", r.isolation);
        // Each run starts in its own start-up, not in the run before's shutdown.
        let first = (a.evidence.events.iter())
            .find(|e| e.id >= r.first_event && e.id < r.end_event)
            .expect("the run's events");
        assert_eq!(
            first.phase,
            glassbox_model::Phase::Startup,
            "{:?}: {first:?}",
            r.mode
        );
    }

    // Nothing of it on any host interface.
    let leaked: Vec<_> = drain(&watch)
        .into_iter()
        .filter(|f| contains(f, &[198, 51, 100, 7]) || contains(f, b"server.call:1|c"))
        .collect();
    assert!(
        leaked.is_empty(),
        "packets to 198.51.100.7 on a host interface: {leaked:?}"
    );
    let _ = std::fs::remove_dir_all(evidence);
}

fn tempdir() -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "glassbox-edge-test-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

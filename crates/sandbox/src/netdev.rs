//! The network edge's device inside the sandbox: a TUN interface that is the namespace's only
//! way out, configured with `ioctl`s (no netlink library: five requests do not justify one).
//!
//! Runs in pid 1, which holds `CAP_NET_ADMIN` in the user namespace that owns the new network
//! namespace. The descriptor goes to glassbox; nothing in the sandbox keeps it.

use crate::sys;
use crate::NetworkSetup;
use std::fs::OpenOptions;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;

/// glibc's `struct rtentry` (`<net/route.h>`), which the libc crate has for musl only.
#[repr(C)]
struct RtEntry {
    rt_pad1: libc::c_ulong,
    rt_dst: libc::sockaddr,
    rt_gateway: libc::sockaddr,
    rt_genmask: libc::sockaddr,
    rt_flags: libc::c_ushort,
    rt_pad2: libc::c_short,
    rt_pad3: libc::c_ulong,
    rt_pad4: *mut libc::c_void,
    rt_metric: libc::c_short,
    rt_dev: *mut libc::c_char,
    rt_mtu: libc::c_ulong,
    rt_window: libc::c_ulong,
    rt_irtt: libc::c_ushort,
}

/// The kernel's `struct in6_rtmsg` (`<linux/ipv6_route.h>`); the libc crate's fields are
/// private.
#[repr(C)]
struct In6RtMsg {
    rtmsg_dst: [u8; 16],
    rtmsg_src: [u8; 16],
    rtmsg_gateway: [u8; 16],
    rtmsg_type: u32,
    rtmsg_dst_len: u16,
    rtmsg_src_len: u16,
    rtmsg_metric: u32,
    rtmsg_info: libc::c_ulong,
    rtmsg_flags: u32,
    rtmsg_ifindex: libc::c_int,
}

fn ctx<T>(what: &str, r: io::Result<T>) -> Result<T, String> {
    r.map_err(|e| format!("network edge: {what}: {e}"))
}

fn ifreq(name: &str) -> libc::ifreq {
    // SAFETY: ifreq is plain old data; zero is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (i, b) in name.bytes().take(libc::IFNAMSIZ - 1).enumerate() {
        ifr.ifr_name[i] = b as libc::c_char;
    }
    ifr
}

fn socket(family: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: socket with constant arguments.
    let fd = sys::check(
        unsafe { libc::socket(family, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) }.into(),
    )?;
    // SAFETY: the descriptor is new and ours.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// `ioctl(fd, req, arg)` on a request structure.
fn ioctl<T>(fd: &OwnedFd, req: libc::c_ulong, arg: &mut T) -> io::Result<()> {
    // SAFETY: every caller passes the structure its request expects, valid for the call.
    sys::check(unsafe { libc::ioctl(fd.as_raw_fd(), req as _, arg as *mut T) }.into()).map(drop)
}

fn sockaddr_v4(ip: std::net::Ipv4Addr) -> libc::sockaddr {
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(ip.octets()),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: sockaddr_in and sockaddr have the same size; the bytes are a valid sockaddr.
    unsafe { std::mem::transmute::<libc::sockaddr_in, libc::sockaddr>(sin) }
}

/// Opens `/dev/net/tun` (with the caller's host credentials: it is often root's alone).
pub(crate) fn open_tun_device() -> Result<OwnedFd, String> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open("/dev/net/tun")
        .map(OwnedFd::from)
        .map_err(|e| {
            format!(
                "network edge: cannot open /dev/net/tun ({e}); glassbox needs the TUN device (modprobe tun; run as root or make /dev/net/tun usable by this user)"
            )
        })
}

/// Makes `tun` (an open `/dev/net/tun`) the TUN interface, gives it its addresses, routes
/// everything into it, and returns it.
pub(crate) fn edge_up(net: &NetworkSetup, tun: OwnedFd) -> Result<OwnedFd, String> {
    let mut ifr = ifreq(&net.interface);
    ifr.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
    ctx(
        "TUNSETIFF",
        ioctl(&tun, libc::TUNSETIFF as libc::c_ulong, &mut ifr),
    )?;

    let s4 = ctx("socket", socket(libc::AF_INET))?;
    let mut ifr = ifreq(&net.interface);
    ifr.ifr_ifru.ifru_addr = sockaddr_v4(net.v4);
    ctx("SIOCSIFADDR", ioctl(&s4, libc::SIOCSIFADDR, &mut ifr))?;
    let mask = u32::MAX
        .checked_shl(32 - u32::from(net.v4_prefix))
        .unwrap_or(0);
    ifr.ifr_ifru.ifru_netmask = sockaddr_v4(std::net::Ipv4Addr::from(mask));
    ctx("SIOCSIFNETMASK", ioctl(&s4, libc::SIOCSIFNETMASK, &mut ifr))?;
    let mut ifr = ifreq(&net.interface);
    ctx("SIOCGIFFLAGS", ioctl(&s4, libc::SIOCGIFFLAGS, &mut ifr))?;
    // SAFETY: reading the union member SIOCGIFFLAGS filled.
    unsafe { ifr.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short };
    ctx("SIOCSIFFLAGS", ioctl(&s4, libc::SIOCSIFFLAGS, &mut ifr))?;
    let mut ifr = ifreq(&net.interface);
    ctx("SIOCGIFINDEX", ioctl(&s4, libc::SIOCGIFINDEX, &mut ifr))?;
    // SAFETY: reading the union member SIOCGIFINDEX filled.
    let ifindex = unsafe { ifr.ifr_ifru.ifru_ifindex };

    // The IPv4 default route: every destination off loopback leads into the edge.
    let mut dev = sys::cstr(&net.interface).into_bytes_with_nul();
    let mut rt = RtEntry {
        rt_pad1: 0,
        rt_dst: sockaddr_v4(std::net::Ipv4Addr::UNSPECIFIED),
        rt_gateway: sockaddr_v4(std::net::Ipv4Addr::UNSPECIFIED),
        rt_genmask: sockaddr_v4(std::net::Ipv4Addr::UNSPECIFIED),
        rt_flags: libc::RTF_UP,
        rt_pad2: 0,
        rt_pad3: 0,
        rt_pad4: std::ptr::null_mut(),
        rt_metric: 0,
        rt_dev: dev.as_mut_ptr().cast(),
        rt_mtu: 0,
        rt_window: 0,
        rt_irtt: 0,
    };
    ctx(
        "SIOCADDRT (IPv4 default)",
        ioctl(&s4, libc::SIOCADDRT, &mut rt),
    )?;

    // IPv6: the address, then the default route.
    let s6 = ctx("socket AF_INET6", socket(libc::AF_INET6))?;
    let mut req = libc::in6_ifreq {
        ifr6_addr: libc::in6_addr {
            s6_addr: net.v6.octets(),
        },
        ifr6_prefixlen: 128,
        ifr6_ifindex: ifindex,
    };
    ctx(
        "SIOCSIFADDR (IPv6)",
        ioctl(&s6, libc::SIOCSIFADDR, &mut req),
    )?;
    // The default route ::/0.
    let mut rt6 = In6RtMsg {
        rtmsg_dst: [0; 16],
        rtmsg_src: [0; 16],
        rtmsg_gateway: [0; 16],
        rtmsg_type: 0,
        rtmsg_dst_len: 0,
        rtmsg_src_len: 0,
        rtmsg_metric: 1,
        rtmsg_info: 0,
        rtmsg_flags: u32::from(libc::RTF_UP),
        rtmsg_ifindex: ifindex,
    };
    ctx(
        "SIOCADDRT (IPv6 default)",
        ioctl(&s6, libc::SIOCADDRT, &mut rt6),
    )?;
    Ok(tun)
}

/// Sets how often the namespace's TCP retries a SYN (`net.ipv4.tcp_syn_retries`), through the
/// `/proc` of this network namespace mounted at `proc`.
pub(crate) fn set_syn_retries(proc: &str, n: u8) -> Result<(), String> {
    ctx(
        "tcp_syn_retries",
        std::fs::write(
            format!("{proc}/sys/net/ipv4/tcp_syn_retries"),
            n.to_string(),
        ),
    )
}

/// Checks, from outside, that the network namespace of process `pid` is isolated behind the
/// edge: it is not glassbox's own namespace, its only interfaces are loopback and
/// `interface`, and every IPv4 and IPv6 route leads into `interface` (or is loopback's).
/// Returns each check in words, and whether all of them held.
pub fn verify_isolation(pid: i32, interface: &str) -> (Vec<String>, bool) {
    let mut checks = Vec::new();
    let mut ok = true;
    let mut record = |held: bool, what: String| {
        ok &= held;
        checks.push(format!("{}: {what}", if held { "ok" } else { "FAILED" }));
    };
    let ns = |p: &str| std::fs::read_link(p).map(|l| l.to_string_lossy().into_owned());
    match (ns(&format!("/proc/{pid}/ns/net")), ns("/proc/self/ns/net")) {
        (Ok(theirs), Ok(ours)) => record(
            theirs != ours,
            format!("network namespace {theirs} is not glassbox's ({ours})"),
        ),
        (a, b) => record(false, format!("network namespaces unreadable: {a:?} {b:?}")),
    }
    let read = |what: &str| std::fs::read_to_string(format!("/proc/{pid}/net/{what}"));
    match read("dev") {
        Ok(dev) => {
            let mut names: Vec<&str> = dev
                .lines()
                .skip(2)
                .filter_map(|l| l.split(':').next())
                .map(str::trim)
                .collect();
            names.sort_unstable();
            let mut want = vec!["lo", interface];
            want.sort_unstable();
            record(
                names == want,
                format!("interfaces {} (want {})", names.join(", "), want.join(", ")),
            );
        }
        Err(e) => record(false, format!("interfaces unreadable: {e}")),
    }
    match read("route") {
        Ok(routes) => {
            let devs: Vec<&str> = routes
                .lines()
                .skip(1)
                .filter_map(|l| l.split_whitespace().next())
                .collect();
            let default = routes.lines().skip(1).any(|l| {
                let mut f = l.split_whitespace();
                f.next() == Some(interface) && f.next() == Some("00000000")
            });
            record(
                default && devs.iter().all(|d| *d == interface),
                format!(
                    "{} IPv4 routes, all via {interface}, the default among them",
                    devs.len()
                ),
            );
        }
        Err(e) => record(false, format!("IPv4 routes unreadable: {e}")),
    }
    match read("ipv6_route") {
        Ok(routes) => {
            let fields: Vec<Vec<&str>> = routes
                .lines()
                .map(|l| l.split_whitespace().collect())
                .filter(|f: &Vec<&str>| f.len() == 10)
                .collect();
            let default = fields
                .iter()
                .any(|f| f[0] == "0".repeat(32) && f[1] == "00" && f[9] == interface);
            let stray: Vec<&str> = fields
                .iter()
                .map(|f| f[9])
                .filter(|d| *d != interface && *d != "lo")
                .collect();
            record(
                default && stray.is_empty(),
                format!(
                    "{} IPv6 routes, all via {interface} or loopback, the default among them",
                    fields.len()
                ),
            );
        }
        Err(e) => record(false, format!("IPv6 routes unreadable: {e}")),
    }
    (checks, ok)
}

//! A suggested allowlist from what an audit saw a server reach: the destinations of its TCP
//! connections in the capture run, as a ToolHive permission profile
//! (`network.outbound.allow_host` / `allow_port`) and as Docker MCP Gateway `allowHosts`
//! (`host:port`). Names are preferred over addresses: the DNS name a synthetic address was
//! handed out for, else the TLS SNI, else the HTTP Host, else the address itself.
//!
//! It is a starting point for a person, not a verdict: it lists what the server did, whether
//! or not that was wanted, and says nothing of UDP or DNS-only traffic (neither tool's policy
//! covers them).

use glassbox_model::{Evidence, FlowProtocol, NetworkMode, SockAddr};
use serde_json::{json, Value};

/// One destination: a host name (or address) and a TCP port.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Destination {
    /// The name, or the address when the server connected to it directly.
    pub host: String,
    /// The port.
    pub port: u16,
}

/// The TCP destinations of the capture run, sorted, each once.
pub fn destinations(ev: &Evidence) -> Vec<Destination> {
    let mut out: Vec<Destination> = Vec::new();
    for f in &ev.flows {
        if f.mode != NetworkMode::Capture || f.protocol != FlowProtocol::Tcp {
            continue;
        }
        let (ip, port) = match &f.dst {
            SockAddr::Inet { ip, port } | SockAddr::Inet6 { ip, port } => (ip.clone(), *port),
            _ => continue,
        };
        let name = f
            .dns_name
            .as_ref()
            .or(f.sni.as_ref())
            .or(f.http.as_ref().and_then(|h| h.host.as_ref()))
            .map(|b| b.to_lossy().trim_end_matches('.').to_ascii_lowercase());
        // An HTTP Host may carry its port; a name with anything odd in it is not a host.
        let name = name
            .map(|n| n.rsplit_once(':').map_or(n.clone(), |(h, _)| h.to_string()))
            .filter(|n| {
                !n.is_empty()
                    && n.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
            });
        let d = Destination {
            host: name.unwrap_or(ip),
            port,
        };
        if !out.contains(&d) {
            out.push(d);
        }
    }
    out.sort();
    out
}

/// A ToolHive permission profile allowing exactly these destinations.
pub fn toolhive(dest: &[Destination]) -> Value {
    let mut hosts: Vec<&str> = dest.iter().map(|d| d.host.as_str()).collect();
    hosts.dedup();
    let mut ports: Vec<u16> = dest.iter().map(|d| d.port).collect();
    ports.sort_unstable();
    ports.dedup();
    json!({
        "name": "glassbox-observed",
        "read": [],
        "write": [],
        "network": {
            "outbound": {
                "insecure_allow_all": false,
                "allow_host": hosts,
                "allow_port": ports,
            }
        }
    })
}

/// Docker MCP Gateway's `allowHosts` for these destinations (`host:port`).
pub fn docker(dest: &[Destination]) -> Value {
    let hosts: Vec<String> = dest
        .iter()
        .map(|d| format!("{}:{}", d.host, d.port))
        .collect();
    json!({ "allowHosts": hosts })
}

#[cfg(test)]
mod tests {
    use super::*;
    use glassbox_model::{Bytes, Flow, HttpRequest};

    fn flow(mode: NetworkMode, protocol: FlowProtocol, ip: &str, port: u16) -> Flow {
        Flow {
            id: 1,
            mode,
            t_ns: 0,
            end_ns: 0,
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
            sample: Bytes(vec![]),
            sample_truncated: false,
            events: vec![],
            note: None,
            ..Default::default()
        }
    }

    #[test]
    fn names_are_preferred_and_only_captured_tcp_counts() {
        let mut named = flow(NetworkMode::Capture, FlowProtocol::Tcp, "198.18.1.0", 443);
        named.dns_name = Some(Bytes::from("API.Example."));
        let mut host = flow(NetworkMode::Capture, FlowProtocol::Tcp, "192.0.2.9", 80);
        host.http = Some(HttpRequest {
            method: "GET".into(),
            target: Bytes::from("/"),
            host: Some(Bytes::from("files.example:80")),
        });
        let mut hostile = flow(NetworkMode::Capture, FlowProtocol::Tcp, "192.0.2.7", 443);
        hostile.sni = Some(Bytes::from("x\"},\"insecure_allow_all\":true"));
        let ev = Evidence {
            flows: vec![
                named.clone(),
                named,
                host,
                hostile,
                flow(NetworkMode::Capture, FlowProtocol::Udp, "192.0.2.1", 53),
                flow(NetworkMode::Denied, FlowProtocol::Tcp, "203.0.113.5", 22),
            ],
            ..Evidence::default()
        };
        let d = destinations(&ev);
        let hosts: Vec<String> = d.iter().map(|d| format!("{}:{}", d.host, d.port)).collect();
        assert_eq!(
            hosts,
            vec!["192.0.2.7:443", "api.example:443", "files.example:80"]
        );
        let th = toolhive(&d);
        assert_eq!(th["network"]["outbound"]["insecure_allow_all"], false);
        assert_eq!(th["network"]["outbound"]["allow_port"], json!([80, 443]));
        assert_eq!(docker(&d)["allowHosts"][1], "api.example:443");
    }
}

//! The edge's DNS: questions read with hickory-proto and, in capture mode, answered with
//! synthetic addresses (one per name, case-insensitive) that later connections map back to.

use crate::{RESOLVER_V4, SANDBOX_V4, SYNTHETIC_V4_FIRST, SYNTHETIC_V6_PREFIX};
use glassbox_model::{Bytes, DnsQuery};
use hickory_proto::op::{Header, Message, MessageType, Metadata, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA};
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};
use hickory_proto::serialize::binary::{BinDecodable, BinDecoder};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// TTL of the synthetic answers: short, so a resolver asks again rather than caching long.
pub(crate) const TTL: u32 = 60;

/// The last synthetic address (198.19.255.255 is the /15's broadcast address).
const SYNTHETIC_V4_LAST: Ipv4Addr = Ipv4Addr::new(198, 19, 255, 254);

/// What a DNS message from the sandbox held, and what to send back.
#[derive(Debug, Default)]
pub(crate) struct Handled {
    /// The question (with the answers given, in capture mode).
    pub query: Option<DnsQuery>,
    /// Anything odd about the message.
    pub note: Option<String>,
    /// The answer to send back (capture mode).
    pub reply: Option<Vec<u8>>,
}

/// The synthetic names and addresses of one run.
#[derive(Debug)]
pub(crate) struct Resolver {
    /// Lower-cased name → its address.
    addresses: HashMap<Vec<u8>, Ipv4Addr>,
    /// Address → the name as first asked.
    names: HashMap<Ipv4Addr, Bytes>,
    /// The next address to hand out.
    next: u32,
    /// At most this many names get an address.
    max_names: usize,
}

impl Resolver {
    /// A resolver handing out at most `max_names` addresses.
    pub fn new(max_names: usize) -> Resolver {
        Resolver {
            addresses: HashMap::new(),
            names: HashMap::new(),
            next: u32::from(SYNTHETIC_V4_FIRST),
            max_names,
        }
    }

    /// Reads a DNS message sent by the sandbox; builds the answer when `answer` is set.
    pub fn handle(&mut self, msg: &[u8], answer: bool) -> Handled {
        let (message, q) = match read(msg) {
            Ok(m) => m,
            Err((header, why)) => {
                return Handled {
                    query: None,
                    note: Some(why),
                    reply: header
                        .filter(|_| answer)
                        .and_then(|h| error_reply(&h.metadata, ResponseCode::FormErr)),
                }
            }
        };
        let name = name_bytes(q.name());
        let mut query = DnsQuery {
            name: Bytes(name.clone()),
            qtype: type_name(q.query_type()),
            answers: Vec::new(),
        };
        if !answer {
            return Handled {
                query: Some(query),
                ..Handled::default()
            };
        }
        if message.metadata.op_code != OpCode::Query {
            return Handled {
                query: Some(query),
                note: Some("DNS message is not a query".into()),
                reply: error_reply(&message.metadata, ResponseCode::NotImp),
            };
        }
        let mut reply = Message::new(
            message.metadata.id,
            MessageType::Response,
            message.metadata.op_code,
        );
        reply.metadata = Metadata::response_from_request(&message.metadata);
        reply.metadata.recursion_available = true;
        reply.add_query(q.clone());
        let mut note = None;
        let wanted = (q.query_class(), q.query_type());
        if let (DNSClass::IN, RecordType::A | RecordType::AAAA) = wanted {
            match self.address_for(&name) {
                Some(v4) => {
                    let data = if wanted.1 == RecordType::A {
                        query.answers.push(v4.to_string());
                        RData::A(A(v4))
                    } else {
                        let v6 = synthetic_v6(v4);
                        query.answers.push(v6.to_string());
                        RData::AAAA(AAAA(v6))
                    };
                    reply.add_answer(Record::from_rdata(q.name().clone(), TTL, data));
                }
                None => {
                    reply.metadata.response_code = ResponseCode::ServFail;
                    note = Some("no synthetic address left for this name".to_string());
                }
            }
        }
        Handled {
            query: Some(query),
            note,
            reply: reply.to_vec().ok(),
        }
    }

    /// The name a synthetic address (IPv4, or IPv6 under [`SYNTHETIC_V6_PREFIX`]) was
    /// handed out for.
    pub fn name_of(&self, ip: IpAddr) -> Option<Bytes> {
        let v4 = match ip {
            IpAddr::V4(v4) => v4,
            IpAddr::V6(v6) => {
                let o = v6.octets();
                if o[..12] != SYNTHETIC_V6_PREFIX.octets()[..12] {
                    return None;
                }
                Ipv4Addr::new(o[12], o[13], o[14], o[15])
            }
        };
        self.names.get(&v4).cloned()
    }

    /// The address of `name` (case-insensitive), handing out the next one for a new name.
    fn address_for(&mut self, name: &[u8]) -> Option<Ipv4Addr> {
        let key = name.to_ascii_lowercase();
        if let Some(&a) = self.addresses.get(&key) {
            return Some(a);
        }
        if self.addresses.len() >= self.max_names {
            return None;
        }
        let mut a = Ipv4Addr::from(self.next);
        while a == SANDBOX_V4 || a == RESOLVER_V4 {
            self.next += 1;
            a = Ipv4Addr::from(self.next);
        }
        if a > SYNTHETIC_V4_LAST {
            return None;
        }
        self.next += 1;
        self.addresses.insert(key, a);
        self.names.insert(a, Bytes(name.to_vec()));
        Some(a)
    }
}

/// The AAAA answer for synthetic IPv4 address `v4`.
pub(crate) fn synthetic_v6(v4: Ipv4Addr) -> Ipv6Addr {
    let mut o = SYNTHETIC_V6_PREFIX.octets();
    o[12..].copy_from_slice(&v4.octets());
    Ipv6Addr::from(o)
}

/// An answer carrying only `code` (no question: the query could not be read).
fn error_reply(request: &Metadata, code: ResponseCode) -> Option<Vec<u8>> {
    let mut reply = Message::error_msg(request.id, request.op_code, code);
    reply.metadata.recursion_desired = request.recursion_desired;
    reply.to_vec().ok()
}

/// A name as sent: its labels joined with dots (the root is `.`).
fn name_bytes(name: &Name) -> Vec<u8> {
    if name.is_root() {
        return b".".to_vec();
    }
    let mut out = Vec::new();
    for (i, label) in name.iter().enumerate() {
        if i > 0 {
            out.push(b'.');
        }
        out.extend_from_slice(label);
    }
    out
}

/// A record type's name (`TYPE<n>` for types hickory does not know).
fn type_name(t: RecordType) -> String {
    match t {
        RecordType::Unknown(n) => format!("TYPE{n}"),
        t => t.to_string(),
    }
}

/// Reads a query and its one question; or why not, with the header when it parsed (a
/// response sent by the sandbox gets none: it is not answered).
fn read(msg: &[u8]) -> Result<(Message, Query), (Option<Header>, String)> {
    let header = Header::read(&mut BinDecoder::new(msg))
        .map_err(|_| (None, "DNS message too short for a header".to_string()))?;
    if header.metadata.message_type == MessageType::Response {
        return Err((None, "a DNS response, not a query".into()));
    }
    // Checked before decoding, which would reserve room for every announced question.
    if header.counts.queries != 1 {
        let why = format!("DNS query with {} questions", header.counts.queries);
        return Err((Some(header), why));
    }
    let message =
        Message::from_vec(msg).map_err(|e| (Some(header), format!("malformed DNS query: {e}")))?;
    let q = message
        .queries
        .first()
        .cloned()
        .ok_or_else(|| (Some(header), "DNS query without a question".to_string()))?;
    Ok((message, q))
}

/// The question of a DNS message, without answering (DNS over TCP).
pub(crate) fn question(msg: &[u8]) -> Result<DnsQuery, String> {
    let (_, q) = read(msg).map_err(|(_, why)| why)?;
    Ok(DnsQuery {
        name: Bytes(name_bytes(q.name())),
        qtype: type_name(q.query_type()),
        answers: Vec::new(),
    })
}

/// The first DNS message of a TCP stream (after its 2-byte length), once it is complete.
pub(crate) fn tcp_message(stream: &[u8]) -> Option<&[u8]> {
    let len = usize::from(u16::from_be_bytes([*stream.first()?, *stream.get(1)?]));
    stream.get(2..2 + len)
}

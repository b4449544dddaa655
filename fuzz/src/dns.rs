//! The edge's DNS on its own: the questions the sandbox asks (over UDP or TCP) and capture
//! mode's synthetic answers, checked with an independent DNS reader (hickory-proto's).

use glassbox_net::fuzz::{dns_question, dns_tcp_message, Resolver};
use glassbox_net::{RESOLVER_V4, SANDBOX_V4, SYNTHETIC_V6_PREFIX};
use hickory_proto::op::{Message, MessageType};
use hickory_proto::rr::{DNSClass, RData, RecordType};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};

/// Messages read from one input.
const MAX_MESSAGES: usize = 64;

/// Whether `a` is in the synthetic range (198.18.0.0/15) and is neither the sandbox's nor the
/// resolver's address, nor the range's broadcast address.
fn synthetic(a: Ipv4Addr) -> bool {
    let o = a.octets();
    o[0] == 198
        && (o[1] & 0xfe) == 18
        && a != SANDBOX_V4
        && a != RESOLVER_V4
        && a.to_bits() != 0xc613_ffff
}

/// `dns`: `data[0]` bits 0-2 are how many names the resolver gives an address (0-7), bit 3
/// whether it answers (capture mode) or only reads (denied mode). The rest is a DNS-over-TCP
/// stream: messages, each after its 2-byte length; an incomplete last one is read as it is.
///
/// Every message is read the same way with and without answering, and over UDP and TCP. An
/// answer, when there is one, is a response to the same id that hickory reads; a name gets
/// one synthetic address for the whole run (whatever its case), distinct from every other
/// name's and mapped back to it, and no more names than the limit get one.
pub fn run(data: &[u8]) {
    let Some((&flags, mut rest)) = data.split_first() else {
        return;
    };
    let max_names = usize::from(flags & 7);
    let answer = flags & 8 != 0;
    let mut resolver = Resolver::new(max_names);
    // Lower-cased name → its address, and back.
    let mut given: HashMap<Vec<u8>, IpAddr> = HashMap::new();
    let mut owners: HashMap<IpAddr, Vec<u8>> = HashMap::new();
    for _ in 0..MAX_MESSAGES {
        if rest.is_empty() {
            break;
        }
        let msg = match dns_tcp_message(rest) {
            Some(m) => {
                assert_eq!(usize::from(u16::from_be_bytes([rest[0], rest[1]])), m.len());
                rest = &rest[2 + m.len()..];
                m
            }
            None => std::mem::take(&mut rest),
        };
        let plain = dns_question(msg);
        let (query, note, reply) = resolver.handle(msg, false);
        assert!(reply.is_none(), "answered while only reading");
        assert_eq!(query, plain.clone().ok(), "read differently over TCP");
        assert_eq!(note, plain.clone().err(), "read differently over TCP");
        if !answer {
            continue;
        }
        let (query, note, reply) = resolver.handle(msg, true);
        let bare = query.clone().map(|mut q| {
            q.answers.clear();
            q
        });
        assert_eq!(bare, plain.clone().ok(), "read differently when answering");
        if let Err(why) = &plain {
            assert_eq!(note.as_ref(), Some(why), "why a message was not read");
        }
        let Some(reply) = reply else {
            // Only a message without a header, or a response, gets no answer.
            assert!(
                msg.len() < 12 || msg[2] & 0x80 != 0,
                "no answer to {msg:?} ({note:?})"
            );
            continue;
        };
        let parsed = Message::from_vec(&reply)
            .unwrap_or_else(|e| panic!("an answer hickory cannot read ({e}): {reply:?}"));
        assert_eq!(parsed.metadata.message_type, MessageType::Response);
        assert_eq!(
            parsed.metadata.id,
            u16::from_be_bytes([msg[0], msg[1]]),
            "answer id"
        );
        let Some(q) = query else {
            assert!(parsed.answers.is_empty(), "answers to an unread question");
            continue;
        };
        let key = q.name.0.to_ascii_lowercase();
        if q.answers.is_empty() {
            // Only a question that is not for an address goes without one, or a new name once
            // the names run out.
            let asked = parsed.queries.first();
            let for_address = asked.is_some_and(|a| {
                a.query_class() == DNSClass::IN
                    && matches!(a.query_type(), RecordType::A | RecordType::AAAA)
            });
            assert!(
                !for_address || (!given.contains_key(&key) && given.len() >= max_names),
                "{q:?} not answered: {parsed:?}"
            );
            continue;
        }
        assert_eq!(q.answers.len(), 1, "{q:?}");
        assert_eq!(parsed.answers.len(), 1, "{parsed:?}");
        let ip: IpAddr = q.answers[0].parse().expect("an answer is an address");
        let v4 = match ip {
            IpAddr::V4(v4) => {
                assert_eq!(parsed.answers[0].data, RData::A(v4.into()));
                v4
            }
            IpAddr::V6(v6) => {
                assert_eq!(parsed.answers[0].data, RData::AAAA(v6.into()));
                let o = v6.octets();
                assert_eq!(o[..12], SYNTHETIC_V6_PREFIX.octets()[..12], "{v6}");
                Ipv4Addr::new(o[12], o[13], o[14], o[15])
            }
        };
        assert!(synthetic(v4), "{v4} is not a synthetic address");
        let v4 = IpAddr::V4(v4);
        match given.get(&key) {
            Some(&before) => assert_eq!(before, v4, "{:?} got two addresses", q.name),
            None => {
                assert!(
                    given.len() < max_names,
                    "more than {max_names} names answered"
                );
                let other = owners.insert(v4, key.clone());
                assert!(other.is_none(), "{v4} given to {other:?} and {key:?}");
                given.insert(key.clone(), v4);
            }
        }
        let named = resolver.name_of(ip).expect("an address given maps back");
        assert_eq!(named.0.to_ascii_lowercase(), key, "{ip} maps back");
    }
}

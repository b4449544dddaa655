//! The audit's certificate authority: the one the sandbox is made to trust, with which the
//! edge signs a certificate for every name a TLS client inside asks for.
//!
//! - **Fresh per audit.** [`Authority::fresh`] makes a new ECDSA P-256 key and a self-signed
//!   CA certificate each time; nothing is read from or written to disk here. The subject is a
//!   plain `glassbox audit ca 3f9a1c0d` (8 hex digits taken from the key), so that a person
//!   who finds it in a trust store knows whose it is; it claims to be nothing else.
//! - **The CA key never leaves the process.** No method returns it, [`Authority`]'s `Debug`
//!   shows only the subject and fingerprint, and the chain handed to rustls holds
//!   certificates only. What leaves is the certificate ([`Authority::certificate_pem`],
//!   [`Authority::certificate_der`]) and its fingerprint, for the sandbox's trust store and the
//!   manifest.
//! - **Validity** runs from yesterday (midnight UTC, so that a clock slightly behind the
//!   host's still accepts it) to one year ahead, for the CA and every leaf: an audit lasts
//!   minutes, and a year leaves no doubt about a date computed in another time zone.
//! - **Leaves** ([`Authority::leaf`]): one per DNS name (SAN `dNSName`) or IP address (SAN
//!   `iPAddress`), each with its own fresh P-256 key, `serverAuth`, and the chain
//!   `[leaf, ca]`. They are made on first need and cached, at most [`LEAF_CACHE`] names;
//!   beyond that a leaf is made afresh for each connection (about a millisecond) rather
//!   than kept, so memory stays bounded whatever names the sandbox asks for.
//!
//! [`Authority`] is an `Arc` inside: cloning it shares the CA and the cache.

use glassbox_model::TlsAuthority;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::sign::CertifiedKey;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

/// Leaf certificates kept per authority; names beyond get a fresh leaf each time.
pub const LEAF_CACHE: usize = 1024;

/// Why a certificate could not be made.
#[derive(Debug, thiserror::Error)]
pub enum AuthorityError {
    /// The CA's key or certificate could not be made.
    #[error("cannot make the audit's certificate authority: {0}")]
    Authority(String),
    /// A leaf certificate for this name could not be made.
    #[error("cannot make a certificate for {name:?}: {why}")]
    Leaf {
        /// The name asked for.
        name: String,
        /// What failed.
        why: String,
    },
}

/// The audit's certificate authority (see the module docs). Cheap to clone: the CA and its
/// leaf cache are shared.
#[derive(Clone)]
pub struct Authority(Arc<Inner>);

struct Inner {
    /// The CA's name and key, to sign leaves with (never handed out).
    issuer: Issuer<'static, KeyPair>,
    der: CertificateDer<'static>,
    pem: String,
    subject: String,
    sha256: String,
    not_before: (i32, u8, u8),
    not_after: (i32, u8, u8),
    /// The crypto rustls uses, to load leaf keys (and for the edge's server configuration).
    provider: Arc<CryptoProvider>,
    leaves: Mutex<HashMap<String, Arc<CertifiedKey>>>,
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority")
            .field("subject", &self.0.subject)
            .field("sha256", &self.0.sha256)
            .field("leaves_cached", &self.leaves_cached())
            .finish_non_exhaustive()
    }
}

impl Authority {
    /// A new authority: a fresh ECDSA P-256 key and a self-signed CA certificate for it.
    pub fn fresh() -> Result<Authority, AuthorityError> {
        let fail = |e: rcgen::Error| AuthorityError::Authority(e.to_string());
        let key = KeyPair::generate().map_err(fail)?;
        let tag: String = Sha256::digest(key.public_key_raw())
            .iter()
            .take(4)
            .map(|b| format!("{b:02x}"))
            .collect();
        let subject = format!("glassbox audit ca {tag}");
        let (not_before, not_after) = validity(SystemTime::now());
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, subject.as_str());
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        set_validity(&mut params, not_before, not_after);
        let cert = params.self_signed(&key).map_err(fail)?;
        let der = cert.der().clone();
        let sha256 = Sha256::digest(der.as_ref())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Ok(Authority(Arc::new(Inner {
            issuer: Issuer::new(params, key),
            pem: cert.pem(),
            der,
            subject,
            sha256,
            not_before,
            not_after,
            provider: Arc::new(rustls::crypto::ring::default_provider()),
            leaves: Mutex::new(HashMap::new()),
        })))
    }

    /// The CA certificate, PEM (what the sandbox's trust store gets).
    pub fn certificate_pem(&self) -> String {
        self.0.pem.clone()
    }

    /// The CA certificate, DER.
    pub fn certificate_der(&self) -> Vec<u8> {
        self.0.der.to_vec()
    }

    /// The SHA-256 of the CA certificate's DER, lowercase hex.
    pub fn sha256_hex(&self) -> String {
        self.0.sha256.clone()
    }

    /// The CA's subject (its one common name).
    pub fn subject(&self) -> String {
        self.0.subject.clone()
    }

    /// The authority as the manifest records it (`NetworkSettings::tls_authority`).
    pub fn manifest(&self) -> TlsAuthority {
        TlsAuthority {
            certificate_pem: self.certificate_pem(),
            sha256: self.sha256_hex(),
            subject: self.subject(),
        }
    }

    /// The leaf certificate, its key and the chain `[leaf, ca]` for `name`: a DNS name
    /// (ASCII, compared case-insensitively) or an IP address in text form. Made on first
    /// need and cached (at most [`LEAF_CACHE`] names; beyond, made afresh every time).
    pub fn leaf(&self, name: &str) -> Result<Arc<CertifiedKey>, AuthorityError> {
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        if let Some(leaf) = self.cache().get(&name) {
            return Ok(leaf.clone());
        }
        let leaf = Arc::new(self.make_leaf(&name)?);
        let mut cache = self.cache();
        if cache.len() < LEAF_CACHE {
            // Another thread may have made one meanwhile: keep the first, so every
            // connection to a name sees the same certificate.
            return Ok(cache.entry(name).or_insert(leaf).clone());
        }
        Ok(leaf)
    }

    /// Leaf certificates cached so far.
    pub fn leaves_cached(&self) -> usize {
        self.cache().len()
    }

    /// The crypto provider the edge's TLS uses (ring).
    pub(crate) fn provider(&self) -> Arc<CryptoProvider> {
        self.0.provider.clone()
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<CertifiedKey>>> {
        // A panic elsewhere while holding the lock leaves a map that is still whole.
        self.0
            .leaves
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn make_leaf(&self, name: &str) -> Result<CertifiedKey, AuthorityError> {
        let fail = |why: String| AuthorityError::Leaf {
            name: name.to_string(),
            why,
        };
        let san = match name.parse::<IpAddr>() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) => SanType::DnsName(
                name.try_into()
                    .map_err(|e: rcgen::Error| fail(e.to_string()))?,
            ),
        };
        let mut params = CertificateParams::default();
        params.subject_alt_names = vec![san];
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        set_validity(&mut params, self.0.not_before, self.0.not_after);
        let key = KeyPair::generate().map_err(|e| fail(e.to_string()))?;
        let cert = params
            .signed_by(&key, &self.0.issuer)
            .map_err(|e| fail(e.to_string()))?;
        let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        CertifiedKey::from_der(
            vec![cert.der().clone(), self.0.der.clone()],
            key_der,
            &self.0.provider,
        )
        .map_err(|e| fail(e.to_string()))
    }
}

/// How many days from today the audit's certificates stay valid: a year, plus the ten years a
/// trigger run may move the server's clock forward (`glassbox_sandbox::clock::ClockShift`'s
/// `MAX_DAYS`), so that the edge's certificates are good on the moved date too.
pub const VALID_DAYS: i64 = 365 + 3650;

/// `not_before`, `not_after` (civil dates, UTC) for certificates made at `now`: yesterday
/// and [`VALID_DAYS`] ahead.
fn validity(now: SystemTime) -> ((i32, u8, u8), (i32, u8, u8)) {
    let days = now
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| (d.as_secs() / 86_400) as i64);
    (civil(days - 1), civil(days + VALID_DAYS))
}

fn set_validity(params: &mut CertificateParams, from: (i32, u8, u8), to: (i32, u8, u8)) {
    params.not_before = rcgen::date_time_ymd(from.0, from.1, from.2);
    params.not_after = rcgen::date_time_ymd(to.0, to.1, to.2);
}

/// The civil date (year, month, day) of a day counted from 1970-01-01 (the proleptic
/// Gregorian calendar; Howard Hinnant's `civil_from_days`).
fn civil(days: i64) -> (i32, u8, u8) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year as i32, month as u8, day as u8)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Responder;

    #[test]
    fn civil_dates() {
        assert_eq!(civil(0), (1970, 1, 1));
        assert_eq!(civil(-1), (1969, 12, 31));
        assert_eq!(civil(11_016), (2000, 2, 29));
        assert_eq!(civil(19_782), (2024, 2, 29));
        assert_eq!(civil(20_453), (2025, 12, 31));
        // 2024-03-01 01:00 UTC: from the day before (a leap day) to eleven years ahead.
        let t = UNIX_EPOCH + std::time::Duration::from_secs(19_783 * 86_400 + 3600);
        assert_eq!(validity(t), ((2024, 2, 29), (2035, 2, 27)));
    }

    #[test]
    fn the_authority_is_fresh_named_plainly_and_keeps_its_key() {
        let a = Authority::fresh().unwrap();
        let b = Authority::fresh().unwrap();
        assert_ne!(a.sha256_hex(), b.sha256_hex());
        assert_ne!(a.subject(), b.subject());
        let subject = a.subject();
        let tag = subject.strip_prefix("glassbox audit ca ").unwrap();
        assert_eq!(tag.len(), 8);
        assert!(tag
            .bytes()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert!(a
            .certificate_pem()
            .starts_with("-----BEGIN CERTIFICATE-----"));
        assert_eq!(a.sha256_hex().len(), 64);
        assert_eq!(
            a.sha256_hex(),
            Sha256::digest(a.certificate_der())
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        );
        let m = a.manifest();
        assert_eq!((m.subject, m.sha256), (a.subject(), a.sha256_hex()));

        // Nothing handed out holds the CA key, in any form: its PKCS#8 text, or the private
        // scalar inside (ECPrivateKey: version 1, then the 32-byte octet string).
        let pkcs8 = a.0.issuer.key().serialize_der();
        let at = pkcs8
            .windows(5)
            .position(|w| w == [0x02, 0x01, 0x01, 0x04, 0x20])
            .unwrap();
        let scalar = &pkcs8[at + 5..at + 37];
        let pem = a.0.issuer.key().serialize_pem();
        let pem_body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        let hex: String = scalar.iter().map(|b| format!("{b:02x}")).collect();
        let leaf = a.leaf("api.example").unwrap();
        let debug = format!("{a:?} {leaf:?} {:?}", Responder::Answer(a.clone()));
        assert!(debug.contains(&a.subject()), "{debug}");
        for shown in [debug, a.certificate_pem(), format!("{:?}", a.manifest())] {
            assert!(!shown.contains("PRIVATE KEY"));
            assert!(!shown.contains(&pem_body[..40]));
            assert!(!shown.to_ascii_lowercase().contains(&hex));
            assert!(!shown.contains(&format!("{scalar:?}")[1..40]));
        }
        for cert in &leaf.cert {
            assert!(!contains(cert.as_ref(), scalar));
        }
        assert!(!contains(&a.certificate_der(), scalar));
    }

    fn contains(hay: &[u8], needle: &[u8]) -> bool {
        hay.windows(needle.len()).any(|w| w == needle)
    }

    #[test]
    fn leaves_are_cached_by_name_and_the_cache_is_bounded() {
        let a = Authority::fresh().unwrap();
        let one = a.leaf("API.Example.").unwrap();
        let again = a.leaf("api.example").unwrap();
        assert!(Arc::ptr_eq(&one, &again));
        assert_eq!(one.cert.len(), 2);
        assert_eq!(one.cert[1].as_ref(), a.certificate_der());
        let ip = a.leaf("192.0.2.7").unwrap();
        assert!(!Arc::ptr_eq(&one, &ip));
        assert!(a.leaf("bad name\u{e9}").is_err());
        // Fill the cache (a clone shares it), then go beyond.
        let shared = a.clone();
        for i in a.leaves_cached()..LEAF_CACHE {
            shared.leaf(&format!("n{i}.test")).unwrap();
        }
        assert_eq!(a.leaves_cached(), LEAF_CACHE);
        let beyond = a.leaf("beyond.test").unwrap();
        let beyond_again = a.leaf("beyond.test").unwrap();
        assert!(!Arc::ptr_eq(&beyond, &beyond_again));
        assert_eq!(a.leaves_cached(), LEAF_CACHE);
        // A cached name is still served from the cache.
        assert!(Arc::ptr_eq(&a.leaf("api.example").unwrap(), &one));
    }
}

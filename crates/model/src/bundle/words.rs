//! Word-at-a-time byte scans (eight bytes a step, no `unsafe`, no dependency) for the reader:
//! where a line ends, and where a JSON string without escapes ends.

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

/// The bytes of `x` equal to `b`, as their high bits (exact up to the first one: a borrow
/// only carries upward, into bytes after it).
#[inline]
fn eq_bytes(x: u64, b: u8) -> u64 {
    let y = x ^ (LO * b as u64);
    y.wrapping_sub(LO) & !y & HI
}

/// Where `b` first occurs in `s`, eight bytes at a time.
pub(super) fn find_byte(s: &[u8], b: u8) -> Option<usize> {
    let mut chunks = s.chunks_exact(8);
    for (n, chunk) in chunks.by_ref().enumerate() {
        let Ok(word) = <[u8; 8]>::try_from(chunk) else {
            break;
        };
        let m = eq_bytes(u64::from_le_bytes(word), b);
        if m != 0 {
            return Some(n * 8 + (m.trailing_zeros() / 8) as usize);
        }
    }
    let done = s.len() - chunks.remainder().len();
    chunks
        .remainder()
        .iter()
        .position(|&c| c == b)
        .map(|at| done + at)
}

/// How many bytes of `s` lie before the first `"`, backslash or control character (the end of a
/// JSON string without escapes, or a byte this reader leaves to `serde_json`), and whether
/// they are all ASCII. Eight bytes at a time; the last few are looked at as one word padded
/// with zeros (a zero is a control character: it stops the scan where `s` ends).
#[inline]
pub(super) fn plain_prefix(s: &[u8]) -> (usize, bool) {
    let mut high = 0u64;
    let mut at = 0;
    while at < s.len() {
        let x = match s.get(at..at + 8) {
            Some(w) => {
                let mut word = [0u8; 8];
                word.copy_from_slice(w);
                u64::from_le_bytes(word)
            }
            None => {
                let mut word = [0u8; 8];
                word[..s.len() - at].copy_from_slice(&s[at..]);
                u64::from_le_bytes(word)
            }
        };
        let m = eq_bytes(x, b'"') | eq_bytes(x, b'\\') | (x.wrapping_sub(LO * 0x20) & !x & HI);
        if m != 0 {
            let k = m.trailing_zeros() / 8;
            // The bytes before the one found (at most 7 of them: the shift stays below 64).
            high |= x & ((1u64 << (k * 8)) - 1);
            return ((at + k as usize).min(s.len()), high & HI == 0);
        }
        high |= x;
        at += 8;
    }
    (s.len(), high & HI == 0)
}

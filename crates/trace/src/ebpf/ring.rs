//! The consumer side of a BPF ring buffer (`BPF_MAP_TYPE_RINGBUF`), over its shared mapping.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

const BUSY: u32 = 1 << 31;
const DISCARD: u32 = 1 << 30;
const HDR: usize = 8;

/// A mapped ring buffer.
pub(crate) struct Ring {
    map: OwnedFd,
    consumer: *mut u8,
    producer: *mut u8,
    page: usize,
    size: usize,
}

// SAFETY: the mappings are owned by this value and only used through &mut self (consumer) or
// atomics (producer position, record headers).
unsafe impl Send for Ring {}

impl std::fmt::Debug for Ring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Ring({} bytes)", self.size)
    }
}

impl Ring {
    /// Maps the ring buffer `map` of `size` bytes.
    pub(crate) fn new(map: OwnedFd, size: usize) -> io::Result<Ring> {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        // SAFETY: mapping the consumer page of a ring buffer map, as the kernel documents
        // (offset 0, one page, read-write).
        let consumer = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                map.as_raw_fd(),
                0,
            )
        };
        if consumer == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the producer page and the data pages, mapped twice in a row by the kernel so
        // that a record wrapping around the end is contiguous (read-only).
        let producer = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                page + 2 * size,
                libc::PROT_READ,
                libc::MAP_SHARED,
                map.as_raw_fd(),
                page as libc::off_t,
            )
        };
        if producer == libc::MAP_FAILED {
            let e = io::Error::last_os_error();
            // SAFETY: unmapping what we mapped above.
            unsafe { libc::munmap(consumer, page) };
            return Err(e);
        }
        Ok(Ring {
            map,
            consumer: consumer.cast(),
            producer: producer.cast(),
            page,
            size,
        })
    }

    /// Its size in bytes (its data pages).
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// The map's descriptor (readable when records are waiting).
    pub(crate) fn fd(&self) -> i32 {
        self.map.as_raw_fd()
    }

    fn consumer_pos(&self) -> &AtomicU64 {
        // SAFETY: the consumer position is the first, 8-byte aligned word of the consumer page,
        // which lives as long as self.
        unsafe { &*(self.consumer as *const AtomicU64) }
    }

    fn producer_pos(&self) -> &AtomicU64 {
        // SAFETY: as above, first word of the producer page.
        unsafe { &*(self.producer as *const AtomicU64) }
    }

    /// Hands up to `max` committed records to `f`; returns how many were consumed.
    pub(crate) fn drain(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> usize {
        let mask = (self.size - 1) as u64;
        let mut cons = self.consumer_pos().load(Ordering::Acquire);
        let mut n = 0;
        while n < max {
            let prod = self.producer_pos().load(Ordering::Acquire);
            if cons >= prod {
                break;
            }
            let at = self.page + (cons & mask) as usize;
            // SAFETY: `at` is inside the data area; record headers are 8-byte aligned u32s that
            // the kernel commits with a release store.
            let len =
                unsafe { &*(self.producer.add(at) as *const AtomicU32) }.load(Ordering::Acquire);
            if len & BUSY != 0 {
                break;
            }
            let body = (len & !(BUSY | DISCARD)) as usize;
            if len & DISCARD == 0 {
                // SAFETY: the record body follows its header and, thanks to the double
                // mapping, is contiguous even when it wraps.
                let data = unsafe { std::slice::from_raw_parts(self.producer.add(at + HDR), body) };
                f(data);
            }
            cons += ((body + HDR + 7) & !7) as u64;
            self.consumer_pos().store(cons, Ordering::Release);
            n += 1;
        }
        n
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the two mappings made in `new`.
        unsafe {
            libc::munmap(self.consumer.cast(), self.page);
            libc::munmap(self.producer.cast(), self.page + 2 * self.size);
        }
    }
}

//! An asynchronous in-kernel channel for the open and stat families: eBPF programs on the
//! `sys_enter` and `sys_exit` raw tracepoints, filtered to the sandbox's pid namespace, copy
//! each call's arguments, path and result into a ring buffer that the recorder drains in
//! batches. The traced program never waits for glassbox on these calls.
//!
//! Needs `CAP_BPF` and `CAP_PERFMON` (root); [`probe`] says whether this host allows it, and
//! the recorder falls back to user notification for these calls otherwise.

mod asm;
pub(crate) mod ring;

use asm::{Asm, Cond, Helper, Size, R};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Calls whose path is the first argument.
pub(crate) const PATH_ARG0: &[i64] = &[
    libc::SYS_open,
    libc::SYS_creat,
    libc::SYS_stat,
    libc::SYS_lstat,
    libc::SYS_access,
    libc::SYS_readlink,
];
/// Calls whose path is the second argument (after a `dirfd`).
pub(crate) const PATH_ARG1: &[i64] = &[
    libc::SYS_openat,
    libc::SYS_openat2,
    libc::SYS_newfstatat,
    libc::SYS_statx,
    libc::SYS_faccessat,
    libc::SYS_faccessat2,
    libc::SYS_readlinkat,
];

/// The ring buffer's size unless a run asks for another ([`attach_to`]).
pub(crate) const RING_SIZE: usize = 16 << 20;
const PATH_MAX: i32 = 4096;

// Record layout, native endian:
//   0 u32 kind (1)   4 u32 nr   8 u32 ns tid   12 u32 ns tgid   16 u64 ktime (at the return)
//   24..88 the registers r10 r9 r8 rax (the result) rcx rdx rsi rdi (pt_regs 56..120)
//   88 u64 openat2 flags   96 u64 host pid_tgid   104 i32 path length   112.. path
// exit:  24 i64 result, 32 u64 host pid_tgid
const ENTER_PATH: i32 = 112;
const SCRATCH_SIZE: u32 = (ENTER_PATH + PATH_MAX) as u32;
const PT_REGS_R10: i32 = 56;
const PT_REGS_ORIG_AX: i32 = 120;

fn bpf(cmd: i32, attr: &mut [u8; 128]) -> io::Result<OwnedFd> {
    // SAFETY: attr is a zero-padded union bpf_attr of the size passed.
    let fd = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_mut_ptr(), attr.len()) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new descriptor owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

fn put32(a: &mut [u8; 128], off: usize, v: u32) {
    a[off..off + 4].copy_from_slice(&v.to_ne_bytes());
}

fn put64(a: &mut [u8; 128], off: usize, v: u64) {
    a[off..off + 8].copy_from_slice(&v.to_ne_bytes());
}

fn map_create(map_type: u32, key: u32, value: u32, entries: u32) -> io::Result<OwnedFd> {
    let mut a = [0u8; 128];
    put32(&mut a, 0, map_type);
    put32(&mut a, 4, key);
    put32(&mut a, 8, value);
    put32(&mut a, 12, entries);
    bpf(0, &mut a)
}

fn prog_load(insns: &[asm::Insn]) -> io::Result<OwnedFd> {
    let license = c"Dual BSD/GPL";
    let mut log = vec![0u8; 1 << 20];
    let mut a = [0u8; 128];
    put32(&mut a, 0, 17); // BPF_PROG_TYPE_RAW_TRACEPOINT
    put32(&mut a, 4, insns.len() as u32);
    put64(&mut a, 8, insns.as_ptr() as u64);
    put64(&mut a, 16, license.as_ptr() as u64);
    put32(&mut a, 24, 1);
    put32(&mut a, 28, log.len() as u32);
    put64(&mut a, 32, log.as_mut_ptr() as u64);
    a[48..56].copy_from_slice(b"glassbox");
    bpf(5, &mut a).map_err(|e| {
        let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
        let text = String::from_utf8_lossy(&log[..end]);
        let tail: Vec<&str> = text.lines().rev().take(12).collect();
        io::Error::new(
            e.kind(),
            format!(
                "{e}; verifier: {}",
                tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
            ),
        )
    })
}

fn attach(prog: &OwnedFd, tracepoint: &std::ffi::CStr) -> io::Result<OwnedFd> {
    let mut a = [0u8; 128];
    put64(&mut a, 0, tracepoint.as_ptr() as u64);
    put32(&mut a, 8, prog.as_raw_fd() as u32);
    bpf(17, &mut a) // BPF_RAW_TRACEPOINT_OPEN
}

/// Emits: continue at `hit` when r7 (the syscall number) is one of `nrs`.
fn match_nr(a: &mut Asm, nrs: &[i64], hit: asm::Label) {
    for &nr in nrs {
        a.jmp_imm(Cond::Eq, R::R7, nr as i32, hit);
    }
}

/// Emits the pid namespace filter: leaves the namespace's tid and tgid at fp-8 and fp-4, or
/// jumps to `out` when the current task is not in the sandbox's pid namespace.
fn ns_filter(a: &mut Asm, dev: u64, ino: u64) {
    a.ld_imm64(R::R1, dev)
        .ld_imm64(R::R2, ino)
        .mov(R::R3, R::R10)
        .add_imm(R::R3, -8)
        .mov_imm(R::R4, 8)
        .call(Helper::GetNsCurrentPidTgid)
        .jmp_imm(Cond::Ne, R::R0, 0, "out");
}

/// Emits: when the ring buffer refused the record (r0 != 0), add one to the drop counter
/// (key at `key_slot` on the stack), so that losses are counted, never silent.
fn count_drop(a: &mut Asm, drops: i32, key_slot: i16) {
    a.jmp_imm(Cond::Eq, R::R0, 0, "out")
        .st(Size::W, R::R10, key_slot, 0)
        .ld_map_fd(R::R1, drops)
        .mov(R::R2, R::R10)
        .add_imm(R::R2, key_slot as i32)
        .call(Helper::MapLookupElem)
        .jmp_imm(Cond::Eq, R::R0, 0, "out")
        .mov_imm(R::R1, 1)
        .atomic_add(Size::DW, R::R0, 0, R::R1);
}

/// The program, on `sys_exit`: by then the kernel has copied the path (faulting its page in,
/// which a program on `sys_enter` cannot do: `bpf_probe_read_user_str` does not fault) and
/// `rax` holds the result, while the argument registers are still the caller's.
fn file_prog(dev: u64, ino: u64, scratch: i32, ring: i32, drops: i32) -> Vec<asm::Insn> {
    let mut a = Asm::default();
    // The system call number first (regs->orig_ax): most calls of most processes stop there,
    // before the namespace check.
    a.mov(R::R6, R::R1)
        .mov(R::R1, R::R10)
        .add_imm(R::R1, -24)
        .mov_imm(R::R2, 8)
        .ldx(Size::DW, R::R3, R::R6, 0)
        .add_imm(R::R3, PT_REGS_ORIG_AX)
        .call(Helper::ProbeReadKernel)
        .jmp_imm(Cond::Ne, R::R0, 0, "out")
        .ldx(Size::DW, R::R7, R::R10, -24);
    match_nr(&mut a, PATH_ARG0, "arg0");
    match_nr(&mut a, PATH_ARG1, "arg1");
    a.ja("out").label("arg0").mov_imm(R::R8, 0).ja("ns");
    a.label("arg1").mov_imm(R::R8, 1).label("ns");
    ns_filter(&mut a, dev, ino);
    a.label("go")
        // The record is built in a per-CPU scratch value: too big for the stack.
        .st(Size::W, R::R10, -16, 0)
        .ld_map_fd(R::R1, scratch)
        .mov(R::R2, R::R10)
        .add_imm(R::R2, -16)
        .call(Helper::MapLookupElem)
        .jmp_imm(Cond::Eq, R::R0, 0, "out")
        .mov(R::R9, R::R0)
        .st(Size::W, R::R9, 0, 1)
        .stx(Size::W, R::R9, 4, R::R7)
        .ldx(Size::W, R::R1, R::R10, -8)
        .stx(Size::W, R::R9, 8, R::R1)
        .ldx(Size::W, R::R1, R::R10, -4)
        .stx(Size::W, R::R9, 12, R::R1)
        .call(Helper::KtimeGetNs)
        .stx(Size::DW, R::R9, 16, R::R0)
        .call(Helper::GetCurrentPidTgid)
        .stx(Size::DW, R::R9, 96, R::R0)
        .st(Size::DW, R::R9, 88, 0)
        // The argument registers and the result (rax), in one read of pt_regs.
        .mov(R::R1, R::R9)
        .add_imm(R::R1, 24)
        .mov_imm(R::R2, 64)
        .ldx(Size::DW, R::R3, R::R6, 0)
        .add_imm(R::R3, PT_REGS_R10)
        .call(Helper::ProbeReadKernel)
        // openat2: the flags are behind a pointer (struct open_how, third argument = rdx).
        .jmp_imm(Cond::Ne, R::R7, libc::SYS_openat2 as i32, "path")
        .mov(R::R1, R::R9)
        .add_imm(R::R1, 88)
        .mov_imm(R::R2, 8)
        .ldx(Size::DW, R::R3, R::R9, 24 + 40)
        .call(Helper::ProbeReadUser)
        .label("path")
        .jmp_imm(Cond::Eq, R::R8, 1, "p1")
        .ldx(Size::DW, R::R3, R::R9, 24 + 56) // rdi
        .ja("p")
        .label("p1")
        .ldx(Size::DW, R::R3, R::R9, 24 + 48) // rsi
        .label("p")
        .mov(R::R1, R::R9)
        .add_imm(R::R1, ENTER_PATH)
        .mov_imm(R::R2, PATH_MAX)
        .call(Helper::ProbeReadUserStr)
        .stx(Size::W, R::R9, 104, R::R0)
        .jmp_imm(Cond::Slt, R::R0, 0, "neg")
        .ja("len")
        .label("neg")
        .mov_imm(R::R0, 0)
        .label("len")
        .jmp_imm(Cond::Gt, R::R0, PATH_MAX, "out")
        .mov(R::R3, R::R0)
        .add_imm(R::R3, ENTER_PATH)
        .ld_map_fd(R::R1, ring)
        .mov(R::R2, R::R9)
        // BPF_RB_NO_WAKEUP: waking the recorder for each record costs an inter-processor
        // interrupt in the traced program (measured: the largest cost left); the recorder
        // drains the ring on a short timer instead.
        .mov_imm(R::R4, 1)
        .call(Helper::RingbufOutput);
    count_drop(&mut a, drops, -16);
    a.label("out").mov_imm(R::R0, 0).exit();
    a.finish()
}

/// The attached programs and their ring buffer.
#[derive(Debug)]
pub(crate) struct Channel {
    pub(crate) ring: ring::Ring,
    _links: Vec<OwnedFd>,
    _progs: Vec<OwnedFd>,
    _scratch: OwnedFd,
    drops: OwnedFd,
}

impl Channel {
    /// Records the kernel could not put in the ring buffer (it was full).
    pub(crate) fn drops(&self) -> u64 {
        let key = 0u32;
        let mut value = 0u64;
        let mut a = [0u8; 128];
        put32(&mut a, 0, self.drops.as_raw_fd() as u32);
        put64(&mut a, 8, &key as *const u32 as u64);
        put64(&mut a, 16, &mut value as *mut u64 as u64);
        // SAFETY: BPF_MAP_LOOKUP_ELEM with pointers to a 4-byte key and an 8-byte value.
        let r = unsafe { libc::syscall(libc::SYS_bpf, 1, a.as_mut_ptr(), a.len()) };
        if r == 0 {
            value
        } else {
            0
        }
    }
}

/// The kernel's encoding of a device number, as `bpf_get_ns_current_pid_tgid` compares it.
fn kernel_dev(st_dev: u64) -> u64 {
    let major = libc::major(st_dev) as u64;
    let minor = libc::minor(st_dev) as u64;
    (major << 20) | minor
}

/// Loads and attaches the programs for the pid namespace of host process `pid`, with a ring
/// buffer of `ring` bytes (a power of two, at least a page; [`RING_SIZE`] unless a run asks
/// for less: the selftest's control of lost records).
pub(crate) fn attach_to(pid: i32, ring: usize) -> io::Result<Channel> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    if !ring.is_power_of_two() || ring < page || ring > RING_SIZE {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "a ring buffer of {ring} bytes: want a power of two from {page} to {RING_SIZE}"
            ),
        ));
    }
    let ns = std::fs::metadata(format!("/proc/{pid}/ns/pid"))?;
    load(kernel_dev(ns.dev()), ns.ino(), true, ring)
}

/// Whether this host lets glassbox load and attach the programs (checked with the real
/// programs, filtered on a namespace that does not exist).
pub fn probe() -> io::Result<()> {
    load(0, 0, true, RING_SIZE).map(drop)
}

fn load(dev: u64, ino: u64, attach_them: bool, ring_size: usize) -> io::Result<Channel> {
    let scratch = map_create(6, 4, SCRATCH_SIZE, 1)?; // BPF_MAP_TYPE_PERCPU_ARRAY
    let ring_map = map_create(27, 0, 0, ring_size as u32)?; // BPF_MAP_TYPE_RINGBUF
    let drops = map_create(2, 4, 8, 1)?; // BPF_MAP_TYPE_ARRAY
    let prog = prog_load(&file_prog(
        dev,
        ino,
        scratch.as_raw_fd(),
        ring_map.as_raw_fd(),
        drops.as_raw_fd(),
    ))?;
    let ring = ring::Ring::new(ring_map, ring_size)?;
    let mut links = Vec::new();
    if attach_them {
        links.push(attach(&prog, c"sys_exit")?);
    }
    Ok(Channel {
        ring,
        _links: links,
        _progs: vec![prog],
        _scratch: scratch,
        drops,
    })
}

/// A decoded ring buffer record: one completed open- or stat-family call.
#[derive(Clone, Debug)]
pub(crate) struct Rec {
    pub nr: i64,
    pub ns_tgid: i32,
    pub ktime: u64,
    pub host_tid: u32,
    /// Its process (the thread may be gone while the process lives).
    pub host_tgid: u32,
    pub args: [u64; 6],
    pub result: i64,
    pub openat2_flags: u64,
    /// The path, when it could be read (`None`: the read failed).
    pub path: Option<Vec<u8>>,
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_ne_bytes(b[o..o + 4].try_into().unwrap_or_default())
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_ne_bytes(b[o..o + 8].try_into().unwrap_or_default())
}

/// Decodes a record; `None` for a malformed one.
pub(crate) fn decode(b: &[u8]) -> Option<Rec> {
    if b.len() < ENTER_PATH as usize || u32_at(b, 0) != 1 {
        return None;
    }
    // Registers at 24..88: r10 r9 r8 rax rcx rdx rsi rdi.
    let reg = |i: usize| u64_at(b, 24 + 8 * i);
    // What bpf_probe_read_user_str returned: negative when the read failed. An empty string
    // gives 1 (its NUL) on current kernels but 0 before Linux 6.5 (strncpy_from_user_nofault
    // did not count the NUL of an empty string; Debian 12's 6.1, the microVM's guest kernel,
    // has that): glibc's fstat is newfstatat(fd, "", AT_EMPTY_PATH), so 0 is an empty path,
    // not a lost one.
    let len = u32_at(b, 104) as i32;
    let path = (len >= 0).then(|| {
        let p = &b[ENTER_PATH as usize..];
        let p = &p[..(len as usize).min(p.len())];
        p.strip_suffix(&[0]).unwrap_or(p).to_vec()
    });
    Some(Rec {
        nr: u32_at(b, 4) as i64,
        ns_tgid: u32_at(b, 12) as i32,
        ktime: u64_at(b, 16),
        host_tid: u64_at(b, 96) as u32,
        host_tgid: (u64_at(b, 96) >> 32) as u32,
        args: [reg(7), reg(6), reg(5), reg(0), reg(2), reg(1)],
        result: reg(3) as i64,
        openat2_flags: u64_at(b, 88),
        path,
    })
}

#[cfg(test)]
mod tests {
    /// A ring of another size is a power of two from a page to the default, refused before
    /// anything is loaded otherwise.
    #[test]
    fn a_ring_of_a_size_the_kernel_would_refuse_is_refused_first() {
        for bytes in [0, 1000, 4096 + 1, 3 << 12, super::RING_SIZE * 2] {
            let e = super::attach_to(std::process::id() as i32, bytes).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{bytes}: {e}");
            assert!(e.to_string().contains("power of two"), "{e}");
        }
    }

    #[test]
    fn an_empty_path_read_as_zero_bytes_is_empty_and_a_failed_read_is_lost() {
        let record = |len: i32, path: &[u8]| {
            let mut b = vec![0u8; super::ENTER_PATH as usize + path.len()];
            b[..4].copy_from_slice(&1u32.to_ne_bytes());
            b[4..8].copy_from_slice(&262u32.to_ne_bytes());
            b[104..108].copy_from_slice(&len.to_ne_bytes());
            b[super::ENTER_PATH as usize..].copy_from_slice(path);
            super::decode(&b).unwrap().path
        };
        // Before Linux 6.5 an empty string read as 0 bytes; since, as 1 (its NUL).
        assert_eq!(record(0, b""), Some(Vec::new()));
        assert_eq!(record(1, b"\0"), Some(Vec::new()));
        assert_eq!(record(6, b"/etc/\0"), Some(b"/etc/".to_vec()));
        assert_eq!(record(-14, b""), None);
    }

    #[test]
    fn the_programs_pass_the_verifier_where_bpf_is_allowed() {
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("not root: eBPF not available to this user");
            return;
        }
        super::probe().expect("load and attach");
    }
}

//! The guest's initramfs, made at run time: the agent as `/init`, the shared libraries it
//! needs, and the kernel modules without which the guest reaches neither its ports nor the
//! host's files.
//!
//! Debian's kernel has virtio-mmio, virtio-serial and 9p as modules (`=m` in
//! `/boot/config-*`), so a kernel-only boot cannot mount a 9p root; the agent loads the
//! modules itself (`finit_module`) before anything else. The archive is cpio "newc", written
//! here (a header of 13 hex fields per file, 4-byte alignment): no tool, no crate. It is cached
//! next to the kernel, keyed by everything that goes in.

use crate::kernel::{hex, write_atomic, Kernel};
use crate::{Error, Result};
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the agent finds the modules, loaded in file-name order.
pub const MODULE_DIR: &str = "/modules";

/// Builds (or finds in the cache) the initramfs for `agent` on `kernel`.
pub fn build(
    kernel: &Kernel,
    agent: &Path,
    modules: &[PathBuf],
    state_dir: &Path,
) -> Result<PathBuf> {
    // The key: the format, the kernel, the agent's and each module's path, size and
    // modification time, and the loader's cache (`ldconfig` rewrites it whenever a library
    // changes), so that the loader is not asked again (`ld.so --list` on a debug `glassbox`
    // takes a quarter of a second) while nothing changed.
    let mut key = Sha256::new();
    key.update(format!("initramfs v2\0{}\n", kernel.hash));
    let mut stamp = |p: &Path| -> Result<()> {
        let md = fs::metadata(p).map_err(Error::io(format!("cannot read {}", p.display())))?;
        key.update(format!(
            "{}\0{}\0{}\0{}\n",
            p.display(),
            md.len(),
            md.mtime(),
            md.mtime_nsec()
        ));
        Ok(())
    };
    stamp(agent)?;
    for m in modules {
        stamp(m)?;
    }
    let _ = stamp(Path::new("/etc/ld.so.cache"));
    let dir = state_dir.join("vm");
    let out = dir.join(format!("initramfs-{}.cpio", hex(&key.finalize()[..8])));
    if out.exists() {
        // Used now: the pruning below goes by modification time.
        let _ = fs::File::options()
            .append(true)
            .open(&out)
            .and_then(|f| f.set_modified(std::time::SystemTime::now()));
        return Ok(out);
    }
    let libs = shared_libraries(agent)?;
    let mut files: Vec<(String, PathBuf, u32)> = Vec::new(); // (archive path, host file, mode)
    files.push(("init".into(), agent.to_path_buf(), 0o755));
    for lib in &libs {
        let inside = lib.to_string_lossy().trim_start_matches('/').to_string();
        files.push((
            inside,
            fs::canonicalize(lib).unwrap_or_else(|_| lib.clone()),
            0o755,
        ));
    }
    for (i, m) in modules.iter().enumerate() {
        let name = m
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        files.push((
            format!("{}/{i:02}-{name}", MODULE_DIR.trim_start_matches('/')),
            m.clone(),
            0o644,
        ));
    }
    let mut cpio = Cpio::default();
    let mut dirs = BTreeSet::new();
    for d in ["dev", "proc", "sys", "newroot", "tmp"] {
        dirs.insert(d.to_string());
    }
    for (inside, _, _) in &files {
        let mut p = Path::new(inside).parent();
        while let Some(d) = p.filter(|d| !d.as_os_str().is_empty()) {
            dirs.insert(d.to_string_lossy().into_owned());
            p = d.parent();
        }
    }
    // BTreeSet order puts every parent before its children.
    for d in &dirs {
        cpio.dir(d);
    }
    cpio.char_dev("dev/console", 0o600, 5, 1);
    for (i, (inside, host, mode)) in files.iter().enumerate() {
        let mut data =
            fs::read(host).map_err(Error::io(format!("cannot read {}", host.display())))?;
        if i == 0 {
            strip_to_segments(&mut data);
        }
        cpio.file(inside, *mode, &data);
    }
    prune(&dir, "initramfs-");
    write_atomic(&out, &cpio.finish())?;
    Ok(out)
}

/// Removes cached initramfs images that nothing used for an hour (a new agent build makes a
/// new one each time; each use refreshes the modification time).
fn prune(dir: &Path, prefix: &str) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let old = e
            .metadata()
            .ok()
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age.as_secs() > 3600);
        if old && e.file_name().to_string_lossy().starts_with(prefix) {
            let _ = fs::remove_file(e.path());
        }
    }
}

/// The dynamic loader and the libraries `exe` needs, as the loader itself resolves them
/// (`ld.so --list`, what `ldd` runs); nothing for a static executable.
pub fn shared_libraries(exe: &Path) -> Result<Vec<PathBuf>> {
    let data = fs::read(exe).map_err(Error::io(format!(
        "cannot read the agent {}",
        exe.display()
    )))?;
    let Some(interp) = elf_interpreter(&data) else {
        return Ok(Vec::new());
    };
    let out = Command::new(&interp)
        .arg("--list")
        .arg(exe)
        .output()
        .map_err(Error::io(format!("cannot run {} --list", interp.display())))?;
    if !out.status.success() {
        return Err(Error::Setup(format!(
            "{} --list {} failed: {}",
            interp.display(),
            exe.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let mut libs = vec![interp];
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        // "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or "/lib64/ld-linux... (0x...)"
        let path = line.split("=>").last().unwrap_or(line).trim();
        let path = path.split(" (").next().unwrap_or(path).trim();
        if path.starts_with('/') && !libs.iter().any(|l| l.as_os_str() == path) {
            libs.push(PathBuf::from(path));
        }
    }
    Ok(libs)
}

/// Cuts an executable down to what the loader maps, as ELFkickers' `sstrip` does: the bytes
/// up to the end of the last segment, without section headers. What goes is what follows
/// the segments: debug information, symbol tables, section headers (`glassbox` in a debug
/// build: 137 MB → 16 MB; the guest keeps it in memory). Leaves anything else unchanged.
pub fn strip_to_segments(elf: &mut Vec<u8>) {
    let u64_at = |e: &[u8], o: usize| Some(u64::from_le_bytes(e.get(o..o + 8)?.try_into().ok()?));
    let u16_at = |e: &[u8], o: usize| Some(u16::from_le_bytes(e.get(o..o + 2)?.try_into().ok()?));
    let end = (|| {
        if elf.len() < 64 || elf[..4] != *b"\x7fELF" || elf[4] != 2 || elf[5] != 1 {
            return None;
        }
        let (phoff, phentsize, phnum) = (
            u64_at(elf, 0x20)? as usize,
            u16_at(elf, 0x36)? as usize,
            u16_at(elf, 0x38)?,
        );
        let mut end = phoff.checked_add(phentsize.checked_mul(phnum as usize)?)?;
        for i in 0..phnum as usize {
            let ph = phoff + i * phentsize;
            let (off, size) = (u64_at(elf, ph + 8)?, u64_at(elf, ph + 32)?);
            end = end.max(usize::try_from(off.checked_add(size)?).ok()?);
        }
        (end <= elf.len()).then_some(end)
    })();
    if let Some(end) = end {
        elf.truncate(end);
        // No section header table any more: e_shoff, e_shnum, e_shstrndx.
        elf[0x28..0x30].fill(0);
        elf[0x3c..0x40].fill(0);
    }
}

/// `PT_INTERP` of a 64-bit little-endian ELF: the dynamic loader it names; `None` for a
/// statically linked program (or what is not such an ELF: [`is_elf64`] tells them apart).
pub fn elf_interpreter(elf: &[u8]) -> Option<PathBuf> {
    if elf.len() < 64 || elf[..4] != *b"\x7fELF" || elf[4] != 2 {
        return None;
    }
    let u64_at = |o: usize| Some(u64::from_le_bytes(elf.get(o..o + 8)?.try_into().ok()?));
    let u16_at = |o: usize| Some(u16::from_le_bytes(elf.get(o..o + 2)?.try_into().ok()?));
    let (phoff, phentsize, phnum) = (
        u64_at(0x20)? as usize,
        u16_at(0x36)? as usize,
        u16_at(0x38)?,
    );
    for i in 0..phnum as usize {
        let ph = phoff + i * phentsize;
        if elf.get(ph..ph + 4)? == [3, 0, 0, 0] {
            let (off, size) = (u64_at(ph + 8)? as usize, u64_at(ph + 32)? as usize);
            let raw = elf.get(off..off + size)?;
            let raw = raw.split(|&b| b == 0).next()?;
            return Some(PathBuf::from(String::from_utf8_lossy(raw).into_owned()));
        }
    }
    None
}

/// Whether `b` begins a 64-bit little-endian ELF.
pub fn is_elf64(b: &[u8]) -> bool {
    b.len() >= 64 && b[..4] == *b"\x7fELF" && b[4] == 2 && b[5] == 1
}

/// A cpio "newc" archive in memory.
#[derive(Debug, Default)]
pub struct Cpio {
    buf: Vec<u8>,
    ino: u32,
}

impl Cpio {
    fn entry(&mut self, name: &str, mode: u32, data: &[u8]) {
        self.entry_dev(name, mode, data, (0, 0));
    }

    fn entry_dev(&mut self, name: &str, mode: u32, data: &[u8], rdev: (u32, u32)) {
        self.ino += 1;
        let namesize = name.len() + 1;
        let fields = [
            self.ino,
            mode,
            0, // uid
            0, // gid
            if mode & 0o170000 == 0o040000 { 2 } else { 1 },
            0, // mtime: reproducible
            data.len() as u32,
            0,
            0,
            rdev.0,
            rdev.1,
            namesize as u32,
            0, // check
        ];
        self.buf.extend_from_slice(b"070701");
        for f in fields {
            self.buf.extend_from_slice(format!("{f:08X}").as_bytes());
        }
        self.buf.extend_from_slice(name.as_bytes());
        self.buf.push(0);
        self.pad();
        self.buf.extend_from_slice(data);
        self.pad();
    }

    fn pad(&mut self) {
        while self.buf.len() & 3 != 0 {
            self.buf.push(0);
        }
    }

    /// Adds a directory (mode 0755).
    pub fn dir(&mut self, name: &str) {
        self.entry(name, 0o040755, b"");
    }

    /// Adds a character device node (`/dev/console`, so that `/init` starts with its
    /// standard streams on the console).
    pub fn char_dev(&mut self, name: &str, perm: u32, major: u32, minor: u32) {
        self.entry_dev(name, 0o020000 | (perm & 0o7777), b"", (major, minor));
    }

    /// Adds a regular file.
    pub fn file(&mut self, name: &str, perm: u32, data: &[u8]) {
        self.entry(name, 0o100000 | (perm & 0o7777), data);
    }

    /// The archive with its trailer.
    pub fn finish(mut self) -> Vec<u8> {
        self.entry("TRAILER!!!", 0, b"");
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpio_entries_are_aligned_and_terminated() {
        let mut c = Cpio::default();
        c.dir("a");
        c.file("a/b", 0o644, b"hello");
        let out = c.finish();
        assert_eq!(out.len() % 4, 0);
        assert!(out.starts_with(b"070701"));
        let text = String::from_utf8_lossy(&out);
        assert!(text.contains("a/b\0"));
        assert!(text.contains("hello"));
        assert!(text.contains("TRAILER!!!\0"));
        // The second header starts on a 4-byte boundary right after "a\0" and its padding.
        let second = 110 + 2;
        let second = second + (4 - second % 4) % 4;
        assert_eq!(&out[second..second + 6], b"070701");
    }

    #[test]
    fn stripping_keeps_every_segment() {
        let exe = std::env::current_exe().unwrap();
        let mut data = fs::read(&exe).unwrap();
        let before = data.len();
        strip_to_segments(&mut data);
        assert!(
            data.len() < before,
            "a test binary has debug information to drop"
        );
        let stripped =
            std::env::temp_dir().join(format!("glassbox-vm-strip-{}", std::process::id()));
        fs::write(&stripped, &data).unwrap();
        fs::set_permissions(
            &stripped,
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        // The stripped test binary still loads and runs (listing its tests).
        // ETXTBSY while another test thread's fork still holds the written file open (until
        // its exec closes it): try again.
        let mut out = Command::new(&stripped).arg("--list").output();
        for _ in 0..50 {
            match &out {
                Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    out = Command::new(&stripped).arg("--list").output();
                }
                _ => break,
            }
        }
        let _ = fs::remove_file(&stripped);
        let out = out.unwrap();
        assert!(out.status.success(), "{out:?}");
        assert!(String::from_utf8_lossy(&out.stdout).contains("stripping_keeps_every_segment"));
    }

    #[test]
    fn this_test_binary_has_an_interpreter() {
        let exe = std::env::current_exe().unwrap();
        let libs = shared_libraries(&exe).unwrap();
        assert!(
            libs.iter().any(|l| l.to_string_lossy().contains("libc.so")),
            "{libs:?}"
        );
    }
}

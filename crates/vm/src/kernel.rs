//! The guest kernel: Debian's `linux-image-amd64`, booted as an uncompressed ELF through PVH.
//!
//! `/boot/vmlinuz-*` is a bzImage: a real-mode stub and a decompressor around the compressed
//! kernel. Under TCG the decompressor alone costs about 14 s (measured here: first console
//! line 15.6 s after start with the bzImage, 1.5 s with the ELF), so the ELF inside is
//! extracted once and cached, keyed by the bzImage's SHA-256, the way the kernel's own
//! `scripts/extract-vmlinux` does it: find a compression magic, decompress from there, keep the
//! first output that is an ELF.
//!
//! The decompressor is the system's command-line tool, not a crate: Debian compresses the
//! kernel with xz (`CONFIG_KERNEL_XZ=y`) using the x86 BCJ filter, which the pure-Rust lzma-rs
//! does not implement, and the binding (xz2/liblzma-sys) compiles liblzma from C; `xz` is on
//! every Debian (xz-utils, priority standard, also needed by dpkg) and runs once per kernel.
//! gzip, zstd, lz4, bzip2 and lzma kernels go through their tools the same way.

use crate::{Error, Result};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A guest kernel ready to boot: the uncompressed ELF and the modules that match it.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// The bzImage it came from (`/boot/vmlinuz-<release>`).
    pub image: PathBuf,
    /// The kernel release (`6.1.0-57-amd64`): `/lib/modules/<release>`.
    pub release: String,
    /// The uncompressed ELF with its PVH entry note (cached).
    pub vmlinux: PathBuf,
    /// The first 16 hex digits of the bzImage's SHA-256.
    pub hash: String,
    /// The kernel's build configuration (`/boot/config-<release>`), when present.
    pub config: Option<PathBuf>,
}

/// The kernel package to install when none is found.
pub const KERNEL_HINT: &str =
    "install Debian's kernel (apt-get install linux-image-amd64): run scripts/setup --microvm";

/// Finds the newest `/boot/vmlinuz-*` (or `$GLASSBOX_VM_KERNEL`) and returns it with its
/// extracted ELF, extracting on first use.
pub fn find(state_dir: &Path) -> Result<Kernel> {
    let image = match std::env::var_os("GLASSBOX_VM_KERNEL") {
        Some(p) => PathBuf::from(p),
        None => newest_vmlinuz(Path::new("/boot"))?,
    };
    prepare(&image, state_dir)
}

fn newest_vmlinuz(boot: &Path) -> Result<PathBuf> {
    let mut found: Vec<(Vec<u64>, PathBuf)> = Vec::new();
    if let Ok(rd) = fs::read_dir(boot) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(rel) = name.strip_prefix("vmlinuz-") {
                found.push((version_key(rel), e.path()));
            }
        }
    }
    found.sort();
    found.pop().map(|(_, p)| p).ok_or_else(|| {
        Error::Missing(format!(
            "no guest kernel in {}: {KERNEL_HINT}",
            boot.display()
        ))
    })
}

/// `6.1.0-57-amd64` → `[6, 1, 0, 57]`, so that 6.10 sorts after 6.9.
fn version_key(release: &str) -> Vec<u64> {
    release
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .filter_map(|s| s.parse().ok())
        .collect()
}

/// Extracts (or finds in the cache) the ELF inside the bzImage `image`.
pub fn prepare(image: &Path, state_dir: &Path) -> Result<Kernel> {
    let name = image
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let release = name.strip_prefix("vmlinuz-").unwrap_or(&name).to_string();
    let md = fs::metadata(image).map_err(|e| {
        Error::Missing(format!(
            "cannot read the guest kernel {}: {e}; {KERNEL_HINT}",
            image.display()
        ))
    })?;
    let dir = state_dir.join("vm");
    fs::create_dir_all(&dir).map_err(Error::io(format!("cannot create {}", dir.display())))?;
    // The hash is remembered with the image's identity (device, inode, size, mtime), so that a
    // boot does not hash 8 MB again; a changed image is hashed and extracted anew.
    let identity = format!(
        "{} {} {} {} {}",
        md.dev(),
        md.ino(),
        md.len(),
        md.mtime(),
        md.mtime_nsec()
    );
    let memo = dir.join(format!("vmlinuz-{release}.id"));
    let remembered = fs::read_to_string(&memo)
        .ok()
        .and_then(|m| {
            m.strip_prefix(&format!("{identity} "))
                .map(|h| h.trim().to_string())
        })
        .filter(|h| h.len() == 16 && dir.join(format!("vmlinux-{release}-{h}")).exists());
    let mut data = None;
    let hash = match remembered {
        Some(h) => h,
        None => {
            let d = fs::read(image).map_err(|e| {
                Error::Missing(format!(
                    "cannot read the guest kernel {}: {e}; {KERNEL_HINT}",
                    image.display()
                ))
            })?;
            let h = hex(&Sha256::digest(&d)[..8]);
            data = Some(d);
            h
        }
    };
    let vmlinux = dir.join(format!("vmlinux-{release}-{hash}"));
    if !vmlinux.exists() {
        let data = data.unwrap_or_default();
        let elf = if is_elf(&data) { data } else { extract(&data)? };
        check_pvh(&elf).map_err(|why| Error::Kernel(format!("{}: {why}", image.display())))?;
        write_atomic(&vmlinux, &elf)?;
    }
    let _ = write_atomic(&memo, format!("{identity} {hash}\n").as_bytes());
    let config = image
        .parent()
        .map(|b| b.join(format!("config-{release}")))
        .filter(|p| p.exists());
    Ok(Kernel {
        image: image.to_path_buf(),
        release,
        vmlinux,
        hash,
        config,
    })
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes `path` through a temporary file and a rename, so that a concurrent reader sees the
/// whole file or none. The temporary file is this call's own: concurrent writers (threads of
/// one process too: a selftest boots guests in parallel) each rename a whole file into place.
pub(crate) fn write_atomic(path: &Path, data: &[u8]) -> Result<()> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(
        ".{name}.tmp{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let res = fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(data).and_then(|()| f.sync_all()))
        .and_then(|()| fs::rename(&tmp, path));
    if res.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    res.map_err(Error::io(format!("cannot write {}", path.display())))
}

fn is_elf(data: &[u8]) -> bool {
    // ELF, 64-bit, little-endian, x86-64 (e_machine 62).
    data.len() > 64 && data[..4] == *b"\x7fELF" && data[4] == 2 && data[5] == 1 && data[18] == 62
}

/// The decompressors `scripts/extract-vmlinux` tries, with their magic numbers.
const DECOMPRESSORS: &[(&[u8], &str, &[&str])] = &[
    (b"\xfd7zXZ\x00", "xz", &["-dc", "--single-stream"]),
    (b"\x1f\x8b\x08", "gzip", &["-dc"]),
    (b"\x28\xb5\x2f\xfd", "zstd", &["-dc"]),
    (b"\x02\x21\x4c\x18", "lz4", &["-dc"]),
    (b"BZh", "bzip2", &["-dc"]),
    (b"\x5d\x00\x00\x00", "xz", &["-dc", "--format=lzma"]),
];

fn extract(data: &[u8]) -> Result<Vec<u8>> {
    let mut tried = Vec::new();
    for (magic, tool, args) in DECOMPRESSORS {
        let mut at = 0;
        // A few candidates per format: the payload's magic is the first one in practice.
        for _ in 0..4 {
            let Some(i) = find_bytes(&data[at..], magic) else {
                break;
            };
            let off = at + i;
            at = off + 1;
            match decompress(tool, args, &data[off..]) {
                Ok(out) if is_elf(&out) => return Ok(out),
                Ok(_) => tried.push(format!("{tool} at {off}: not an ELF")),
                Err(e) => tried.push(format!("{tool} at {off}: {e}")),
            }
        }
    }
    Err(Error::Kernel(format!(
        "no compressed ELF kernel found in the image (tried: {})",
        if tried.is_empty() {
            "no known compression magic".to_string()
        } else {
            tried.join("; ")
        }
    )))
}

fn find_bytes(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Pipes `input` through `tool args`; trailing data after the stream makes some tools exit
/// non-zero after writing everything, so the output is judged, not the status.
fn decompress(tool: &str, args: &[&str], input: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut child = Command::new(tool)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut stdin = child.stdin.take().expect("piped");
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let mut out = Vec::new();
    child.stdout.take().expect("piped").read_to_end(&mut out)?;
    let _ = child.wait();
    let _ = writer.join();
    Ok(out)
}

/// The ELF must carry `XEN_ELFNOTE_PHYS32_ENTRY` (type 18, name "Xen"): QEMU boots an ELF
/// kernel through PVH only with it (`CONFIG_PVH=y`).
fn check_pvh(elf: &[u8]) -> std::result::Result<(), String> {
    let u16_at = |o: usize| elf.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let u32_at = |o: usize| {
        elf.get(o..o + 4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap_or_default()))
    };
    let u64_at = |o: usize| {
        elf.get(o..o + 8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
    };
    let (Some(phoff), Some(phentsize), Some(phnum)) = (u64_at(0x20), u16_at(0x36), u16_at(0x38))
    else {
        return Err("truncated ELF header".into());
    };
    for i in 0..phnum as usize {
        let ph = phoff as usize + i * phentsize as usize;
        if u32_at(ph) != Some(4) {
            continue; // not PT_NOTE
        }
        let (Some(off), Some(size)) = (u64_at(ph + 8), u64_at(ph + 32)) else {
            continue;
        };
        let (mut p, end) = (off as usize, (off + size) as usize);
        while p + 12 <= end {
            let (Some(namesz), Some(descsz), Some(kind)) =
                (u32_at(p), u32_at(p + 4), u32_at(p + 8))
            else {
                break;
            };
            let name = elf
                .get(p + 12..p + 12 + namesz as usize)
                .unwrap_or_default();
            if kind == 18 && name.starts_with(b"Xen") {
                return Ok(());
            }
            p += 12 + (namesz as usize).div_ceil(4) * 4 + (descsz as usize).div_ceil(4) * 4;
        }
    }
    Err("the kernel has no PVH entry note (XEN_ELFNOTE_PHYS32_ENTRY); it needs CONFIG_PVH=y".into())
}

/// What `/boot/config-<release>` says of an option: `y`, `m`, or `None` (not set).
pub fn config_value(config: &Path, option: &str) -> Option<String> {
    let text = fs::read_to_string(config).ok()?;
    let key = format!("{option}=");
    text.lines()
        .find_map(|l| l.strip_prefix(&key))
        .map(|v| v.trim_matches('"').to_string())
}

/// The modules the guest needs before it can reach its ports and shares, when they are not
/// built in: virtio over MMIO (microvm's transport), virtio-serial, 9p over virtio.
pub const GUEST_MODULES: &[(&str, &str)] = &[
    ("CONFIG_VIRTIO_MMIO", "virtio_mmio"),
    ("CONFIG_VIRTIO_CONSOLE", "virtio_console"),
    ("CONFIG_NET_9P_VIRTIO", "9pnet_virtio"),
    ("CONFIG_9P_FS", "9p"),
];

/// What glassbox's namespace sandbox needs in the guest besides the built-in namespaces,
/// seccomp, fanotify, eBPF and cgroups: the TUN device of its network edge
/// ([`crate::VmConfig::sandbox`]).
pub const SANDBOX_MODULES: &[(&str, &str)] = &[("CONFIG_TUN", "tun")];

/// The network card's driver, for a guest with a network ([`crate::VmConfig::network`]).
pub const NET_MODULES: &[(&str, &str)] = &[("CONFIG_VIRTIO_NET", "virtio_net")];

/// The `.ko` files to load, dependencies first, for the modules of `wanted` that the kernel
/// has as modules (`=m`; built-in ones need nothing). Uses `modules.dep` of the release.
pub fn module_files(kernel: &Kernel, wanted: &[(&str, &str)]) -> Result<Vec<PathBuf>> {
    let base = Path::new("/lib/modules").join(&kernel.release);
    let builtin = fs::read_to_string(base.join("modules.builtin")).unwrap_or_default();
    let dep_text = fs::read_to_string(base.join("modules.dep")).map_err(|e| {
        Error::Missing(format!(
            "cannot read {}/modules.dep ({e}): the guest kernel's modules are not installed; {KERNEL_HINT}",
            base.display()
        ))
    })?;
    // module name → (relative path, dependencies' relative paths)
    let mut deps: BTreeMap<String, (String, Vec<String>)> = BTreeMap::new();
    for line in dep_text.lines() {
        let Some((path, rest)) = line.split_once(':') else {
            continue;
        };
        deps.insert(
            module_name(path),
            (
                path.to_string(),
                rest.split_whitespace().map(str::to_string).collect(),
            ),
        );
    }
    let by_path: BTreeMap<&str, &str> = deps
        .iter()
        .map(|(name, (path, _))| (path.as_str(), name.as_str()))
        .collect();
    let mut order = Vec::new();
    let mut seen = HashSet::new();
    for (option, module) in wanted {
        if let Some(config) = &kernel.config {
            match config_value(config, option).as_deref() {
                Some("y") => continue,
                Some("m") => {}
                _ => {
                    return Err(Error::Kernel(format!(
                        "the guest kernel {} has {option} neither built in nor as a module",
                        kernel.release
                    )))
                }
            }
        }
        if builtin.lines().any(|l| module_name(l) == *module) {
            continue;
        }
        visit(module, &deps, &by_path, &mut seen, &mut order)?;
    }
    Ok(order.into_iter().map(|rel| base.join(rel)).collect())
}

fn visit(
    name: &str,
    deps: &BTreeMap<String, (String, Vec<String>)>,
    by_path: &BTreeMap<&str, &str>,
    seen: &mut HashSet<String>,
    order: &mut Vec<String>,
) -> Result<()> {
    if !seen.insert(name.to_string()) {
        return Ok(());
    }
    let (path, ds) = deps
        .get(name)
        .ok_or_else(|| Error::Kernel(format!("module {name} is not in modules.dep")))?;
    for d in ds {
        let dn = by_path
            .get(d.as_str())
            .map_or_else(|| module_name(d), |n| n.to_string());
        visit(&dn, deps, by_path, seen, order)?;
    }
    order.push(path.clone());
    Ok(())
}

/// `kernel/fs/9p/9p.ko(.xz)` → `9p`; modprobe treats `-` and `_` alike.
fn module_name(path: &str) -> String {
    let file = path.rsplit('/').next().unwrap_or(path);
    file.split(".ko").next().unwrap_or(file).replace('-', "_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrent_writers_of_one_cache_file_all_succeed_and_leave_a_whole_file() {
        // The selftest's parallel jobs prepare the same kernel at once on a fresh state folder.
        let dir = std::env::temp_dir().join(format!("glassbox-vm-atomic-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("vmlinux-test");
        std::thread::scope(|s| {
            for t in 0..8u8 {
                let path = &path;
                s.spawn(move || {
                    for _ in 0..50 {
                        write_atomic(path, &[t; 4096]).unwrap();
                    }
                });
            }
        });
        let data = fs::read(&path).unwrap();
        assert_eq!(data.len(), 4096);
        assert!(data.iter().all(|&b| b == data[0]));
        assert_eq!(
            fs::read_dir(&dir).unwrap().count(),
            1,
            "temporary files left"
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn versions_sort_numerically() {
        assert!(version_key("6.10.0-1-amd64") > version_key("6.9.0-3-amd64"));
        assert_eq!(module_name("kernel/net/9p/9pnet_virtio.ko"), "9pnet_virtio");
        assert_eq!(module_name("kernel/x/virtio-foo.ko.xz"), "virtio_foo");
    }

    #[test]
    fn elf_without_notes_is_refused() {
        let mut elf = vec![0u8; 128];
        elf[..4].copy_from_slice(b"\x7fELF");
        elf[4] = 2;
        elf[5] = 1;
        elf[18] = 62;
        assert!(is_elf(&elf));
        assert!(check_pvh(&elf).is_err());
    }
}

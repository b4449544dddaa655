//! A moved clock, for a trigger run: the server sees a date ahead of today and a machine that
//! has been up that much longer, so that what waits for a date or for days of uptime shows.
//!
//! Two mechanisms, each for what it can move:
//! - **The monotonic and boot clocks** (`CLOCK_MONOTONIC`, `CLOCK_BOOTTIME`, `/proc/uptime`)
//!   move by a time namespace: the outer process unshares one and writes its offsets before
//!   pid 1 is born in it. The kernel applies them to every program, statically linked ones
//!   too, through the vDSO and the system calls alike.
//! - **The wall clock** (`CLOCK_REALTIME`, `gettimeofday`, `time`), which no namespace moves
//!   (in a microVM guest the kernel's own is set forward instead, [`ClockShift::wall_set`]),
//!   moves by a shim preloaded into every dynamically linked program ([`SHIM`],
//!   `shim/clock.c`, built with the crate): it adds the offset to what the C library's clock
//!   calls return, and takes it back from an absolute wall-clock deadline the program hands
//!   to a wait. A statically linked program (Go, a static musl build), one that calls the
//!   kernel itself, and a child started without `LD_PRELOAD` in its environment see the real
//!   wall clock: `docs/triggers.md` names these, the sandbox's tests show each.

use crate::PlantedFile;

/// Where the shim is planted (glassbox's own folder in the sandbox).
pub const SHIM: &str = "/run/glassbox/clock/libglassbox-clock.so";

/// The offset the shim reads, in seconds (its own file: no variable of the server's
/// environment says it).
const OFFSET_FILE: &str = "/run/glassbox/clock/offset";

/// The shim, built by `build.rs` from `shim/clock.c`.
static SHIM_BYTES: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libglassbox-clock.so"));

/// How far the server's clocks are moved forward.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockShift {
    /// Seconds, at least 0 and at most [`ClockShift::MAX_DAYS`] days.
    seconds: i64,
    /// Whether the wall clock is moved by the shim; `false` where the kernel's wall clock was
    /// set forward already (a microVM guest's, [`ClockShift::wall_set`]).
    shim: bool,
}

impl ClockShift {
    /// The furthest a clock is moved: ten years (the audit's certificates are made valid that
    /// far ahead, `glassbox_net`'s `VALID_DAYS`, so that the edge's TLS holds on the moved date).
    pub const MAX_DAYS: u32 = 3650;

    /// Forward by `days` (at most [`ClockShift::MAX_DAYS`]; more is that many).
    pub fn days(days: u32) -> ClockShift {
        ClockShift {
            seconds: i64::from(days.min(Self::MAX_DAYS)) * 86_400,
            shim: true,
        }
    }

    /// This shift where the kernel's wall clock was set forward by it already (a microVM
    /// guest's, set at boot): the time namespace moves the monotonic clocks, no shim is
    /// planted, and every program's wall clock is moved, statically linked ones too.
    pub fn wall_set(self) -> ClockShift {
        ClockShift {
            shim: false,
            ..self
        }
    }

    /// Whether the wall clock is moved by the shim (not by the kernel): statically linked
    /// programs then keep the real one.
    pub fn by_shim(self) -> bool {
        self.shim
    }

    /// The offset in seconds.
    pub fn seconds(self) -> i64 {
        self.seconds
    }

    /// The files planted for it: the shim and the offset it reads.
    pub(crate) fn files(self) -> Vec<PlantedFile> {
        if !self.shim {
            return Vec::new();
        }
        vec![
            PlantedFile {
                path: SHIM.into(),
                contents: SHIM_BYTES.to_vec(),
                mode: 0o755,
            },
            PlantedFile {
                path: OFFSET_FILE.into(),
                contents: format!("{}\n", self.seconds).into_bytes(),
                mode: 0o644,
            },
        ]
    }

    /// What `/proc/self/timens_offsets` of the new time namespace is given.
    pub(crate) fn offsets(self) -> String {
        format!("monotonic {s} 0\nboottime {s} 0\n", s = self.seconds)
    }

    /// `LD_PRELOAD` with the shim first, then what the server's configuration preloads.
    pub(crate) fn preload(existing: Option<&str>) -> String {
        match existing {
            Some(e) if !e.is_empty() => format!("{SHIM}:{e}"),
            _ => SHIM.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shim_is_a_shared_object_and_the_offsets_are_the_kernels_format() {
        assert_eq!(&SHIM_BYTES[..4], b"\x7fELF");
        let s = ClockShift::days(400);
        assert_eq!(s.seconds(), 34_560_000);
        assert_eq!(s.offsets(), "monotonic 34560000 0\nboottime 34560000 0\n");
        assert_eq!(ClockShift::days(u32::MAX), ClockShift::days(3650));
        assert_eq!(s.files().len(), 2);
        // Where the kernel's wall clock was set forward (a microVM guest's): no shim.
        let set = s.wall_set();
        assert!(!set.by_shim() && set.files().is_empty());
        assert_eq!(set.offsets(), s.offsets());
        assert_eq!(ClockShift::preload(None), SHIM);
        assert_eq!(
            ClockShift::preload(Some("/opt/x.so")),
            format!("{SHIM}:/opt/x.so")
        );
    }
}

//! Decoding of the numeric `open(2)` flags the recorder puts in `flags` (x86_64 values).
//!
//! Checks never read `flags_text`: it is a convenience for people, and the numeric value is
//! what the program passed.

/// `O_ACCMODE`: the access-mode bits.
pub const O_ACCMODE: u64 = 0o3;
/// `O_WRONLY`.
pub const O_WRONLY: u64 = 0o1;
/// `O_RDWR`.
pub const O_RDWR: u64 = 0o2;
/// `O_CREAT`.
pub const O_CREAT: u64 = 0o100;
/// `O_TRUNC`.
pub const O_TRUNC: u64 = 0o1000;
/// `O_APPEND`.
pub const O_APPEND: u64 = 0o2000;
/// `O_DIRECTORY`.
pub const O_DIRECTORY: u64 = 0o200000;

/// Whether an open-family call with these flags can change the file: write or read-write
/// access, or `O_CREAT`, `O_TRUNC`, `O_APPEND`. `creat(2)` always writes, whatever `flags` says.
pub fn has_write_intent(syscall: &str, flags: u64) -> bool {
    syscall == "creat"
        || flags & O_ACCMODE == O_WRONLY
        || flags & O_ACCMODE == O_RDWR
        || flags & (O_CREAT | O_TRUNC | O_APPEND) != 0
}

/// Whether the call asked for a directory (`O_DIRECTORY`).
pub fn is_directory(flags: u64) -> bool {
    flags & O_DIRECTORY != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_intent() {
        assert!(!has_write_intent("openat", 0));
        assert!(!has_write_intent("openat", 0o2000000 | O_DIRECTORY)); // O_CLOEXEC|O_DIRECTORY
        assert!(has_write_intent("openat", O_WRONLY));
        assert!(has_write_intent("openat", O_RDWR));
        assert!(has_write_intent("openat", O_CREAT));
        assert!(has_write_intent("openat", O_TRUNC));
        assert!(has_write_intent("openat", O_APPEND));
        assert!(has_write_intent("creat", 0));
    }
}

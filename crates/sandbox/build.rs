//! Builds the wall-clock shim of trigger runs (`shim/clock.c`) into a shared object that the
//! sandbox plants ([`clock`](src/clock.rs)): with the C compiler the `cc` crate finds, as
//! `ring` builds its own C.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=shim/clock.c");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("libglassbox-clock.so");
    let compiler = cc::Build::new().get_compiler();
    let status = compiler
        .to_command()
        .args([
            "-O2", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-o",
        ])
        .arg(&out)
        .arg("shim/clock.c")
        .arg("-ldl")
        .status()
        .expect("run the C compiler for shim/clock.c");
    assert!(status.success(), "the C compiler failed on shim/clock.c");
}

//! The guest agent alone: `/init` of the microVM's initramfs (see `glassbox_vm::agent`).

fn main() {
    std::process::exit(glassbox_vm::agent::main());
}

//! A small assembler for eBPF instructions, with labels.
//!
//! The two programs glassbox loads are a few dozen instructions; compiling them from C would
//! need clang and libbpf at build time (libbpf-rs), and writing them in Rust (aya) needs a
//! nightly toolchain and bpf-linker. Assembling them here keeps the build to stable Rust.

/// Registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum R {
    R0 = 0,
    R1,
    R2,
    R3,
    R4,
    #[allow(dead_code)] // numbering: the programs do not use r5
    R5,
    R6,
    R7,
    R8,
    R9,
    /// Frame pointer (read-only).
    R10,
}

/// One encoded instruction (`struct bpf_insn`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

const ALU64: u8 = 0x07;
const JMP: u8 = 0x05;
const LDX: u8 = 0x01;
const STX: u8 = 0x03;
const ST: u8 = 0x02;
const MEM: u8 = 0x60;
const K: u8 = 0x00;
const X: u8 = 0x08;

/// Memory access sizes.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Size {
    W = 0x00,
    DW = 0x18,
}

/// Conditional jumps.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Cond {
    Eq = 0x10,
    Gt = 0x20,
    Ne = 0x50,
    Slt = 0xc0,
}

/// Helper functions (`enum bpf_func_id`).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Helper {
    MapLookupElem = 1,
    KtimeGetNs = 5,
    GetCurrentPidTgid = 14,
    ProbeReadUser = 112,
    ProbeReadKernel = 113,
    ProbeReadUserStr = 114,
    GetNsCurrentPidTgid = 120,
    RingbufOutput = 130,
}

/// Jump target names.
pub(crate) type Label = &'static str;

enum Item {
    Insn(Insn),
    Jump { insn: Insn, to: Label },
    Label(Label),
}

/// A program under construction.
#[derive(Default)]
pub(crate) struct Asm {
    items: Vec<Item>,
}

fn regs(dst: R, src: R) -> u8 {
    (dst as u8) | ((src as u8) << 4)
}

impl Asm {
    fn push(&mut self, code: u8, dst: R, src: R, off: i16, imm: i32) -> &mut Self {
        self.items.push(Item::Insn(Insn {
            code,
            regs: regs(dst, src),
            off,
            imm,
        }));
        self
    }

    /// `dst = imm`.
    pub(crate) fn mov_imm(&mut self, dst: R, imm: i32) -> &mut Self {
        self.push(ALU64 | 0xb0 | K, dst, R::R0, 0, imm)
    }

    /// `dst = src`.
    pub(crate) fn mov(&mut self, dst: R, src: R) -> &mut Self {
        self.push(ALU64 | 0xb0 | X, dst, src, 0, 0)
    }

    /// `dst += imm`.
    pub(crate) fn add_imm(&mut self, dst: R, imm: i32) -> &mut Self {
        self.push(ALU64 | K, dst, R::R0, 0, imm)
    }

    /// `dst = imm64` (two instructions).
    pub(crate) fn ld_imm64(&mut self, dst: R, imm: u64) -> &mut Self {
        self.push(0x18, dst, R::R0, 0, imm as u32 as i32);
        self.push(0, R::R0, R::R0, 0, (imm >> 32) as u32 as i32)
    }

    /// `dst = map` (the map's fd, resolved by the kernel at load time).
    pub(crate) fn ld_map_fd(&mut self, dst: R, fd: i32) -> &mut Self {
        // src_reg = BPF_PSEUDO_MAP_FD.
        self.push(0x18, dst, R::R1, 0, fd);
        self.push(0, R::R0, R::R0, 0, 0)
    }

    /// `dst = *(size *)(src + off)`.
    pub(crate) fn ldx(&mut self, size: Size, dst: R, src: R, off: i16) -> &mut Self {
        self.push(LDX | MEM | size as u8, dst, src, off, 0)
    }

    /// `*(size *)(dst + off) = src`.
    pub(crate) fn stx(&mut self, size: Size, dst: R, off: i16, src: R) -> &mut Self {
        self.push(STX | MEM | size as u8, dst, src, off, 0)
    }

    /// `*(size *)(dst + off) = imm`.
    pub(crate) fn st(&mut self, size: Size, dst: R, off: i16, imm: i32) -> &mut Self {
        self.push(ST | MEM | size as u8, dst, R::R0, off, imm)
    }

    /// `lock *(size *)(dst + off) += src`.
    pub(crate) fn atomic_add(&mut self, size: Size, dst: R, off: i16, src: R) -> &mut Self {
        // BPF_STX | BPF_ATOMIC, imm = BPF_ADD.
        self.push(STX | 0xc0 | size as u8, dst, src, off, 0)
    }

    /// `if dst <cond> imm goto to`.
    pub(crate) fn jmp_imm(&mut self, cond: Cond, dst: R, imm: i32, to: Label) -> &mut Self {
        self.items.push(Item::Jump {
            insn: Insn {
                code: JMP | cond as u8 | K,
                regs: regs(dst, R::R0),
                off: 0,
                imm,
            },
            to,
        });
        self
    }

    /// `goto to`.
    pub(crate) fn ja(&mut self, to: Label) -> &mut Self {
        self.items.push(Item::Jump {
            insn: Insn {
                code: JMP,
                regs: 0,
                off: 0,
                imm: 0,
            },
            to,
        });
        self
    }

    /// `r0 = helper(r1..r5)`.
    pub(crate) fn call(&mut self, h: Helper) -> &mut Self {
        self.push(JMP | 0x80, R::R0, R::R0, 0, h as i32)
    }

    /// `return r0`.
    pub(crate) fn exit(&mut self) -> &mut Self {
        self.push(JMP | 0x90, R::R0, R::R0, 0, 0)
    }

    /// Places `name` here.
    pub(crate) fn label(&mut self, name: Label) -> &mut Self {
        self.items.push(Item::Label(name));
        self
    }

    /// The encoded program; panics on an unknown label (a bug in the program text).
    pub(crate) fn finish(&self) -> Vec<Insn> {
        let mut at = std::collections::HashMap::new();
        let mut pc = 0usize;
        for item in &self.items {
            match item {
                Item::Label(l) => {
                    at.insert(*l, pc);
                }
                _ => pc += 1,
            }
        }
        let mut out = Vec::with_capacity(pc);
        for item in &self.items {
            match item {
                Item::Insn(i) => out.push(*i),
                Item::Jump { insn, to } => {
                    let target = at[to] as i64;
                    let mut i = *insn;
                    i.off = (target - out.len() as i64 - 1) as i16;
                    out.push(i);
                }
                Item::Label(_) => {}
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jumps_resolve_to_labels() {
        let mut a = Asm::default();
        a.mov_imm(R::R0, 0)
            .jmp_imm(Cond::Eq, R::R1, 3, "out")
            .ld_imm64(R::R2, 1 << 40)
            .label("out")
            .exit();
        let p = a.finish();
        assert_eq!(p.len(), 5);
        assert_eq!(p[1].off, 2, "skips the two halves of ld_imm64");
        assert_eq!(p[3].imm, 1 << 8);
    }
}

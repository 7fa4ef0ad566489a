//! The seccomp program of a confined app (SPEC R48): one classic BPF program, built once, that
//! the kernel runs on every system call the app makes.
//!
//! What it decides ([`Decision`]): a call of another architecture ends the process (as it did
//! with the generic builder this replaced); a denied call, an x32 call (x86_64) and a `clone`
//! with a namespace flag get `EPERM`; `clone3` gets `ENOSYS` (its flags are behind a pointer a
//! filter cannot read, so the C library falls back to `clone`); everything else is allowed.
//!
//! Why by hand: the generic builder laid the calls out as one chain of about 290 instructions.
//! The kernel walks a program for each of its ~460 call numbers when the app installs it (to
//! find the calls it can allow without running it) and runs it on every call after: attaching
//! took 140 µs of each app's start, on the one thread that forks every app. Here the numbers are
//! a balanced tree of comparisons (86 instructions, a dozen run per call): about 60 µs. The
//! tests run every call number through an interpreter of the program and against the rules, and
//! the kernel's answers in `confinement`'s tests.

/// What the program answers for a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// `EPERM`: the denied calls, x32 calls, `clone` with a namespace flag.
    Eperm,
    /// `ENOSYS`: `clone3`.
    Enosys,
    /// The whole process ends: a call of another architecture.
    Kill,
}

impl Decision {
    fn ret(self) -> u32 {
        match self {
            Decision::Allow => libc::SECCOMP_RET_ALLOW,
            Decision::Eperm => libc::SECCOMP_RET_ERRNO | libc::EPERM as u32,
            Decision::Enosys => libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32,
            Decision::Kill => libc::SECCOMP_RET_KILL_PROCESS,
        }
    }
}

/// The architecture this module runs on, as `seccomp_data.arch` names it.
#[cfg(target_arch = "x86_64")]
const NATIVE_ARCH: u32 = 0xC000_003E; // AUDIT_ARCH_X86_64
#[cfg(target_arch = "aarch64")]
const NATIVE_ARCH: u32 = 0xC000_00B7; // AUDIT_ARCH_AARCH64
#[cfg(target_arch = "riscv64")]
const NATIVE_ARCH: u32 = 0xC000_00F3; // AUDIT_ARCH_RISCV64

/// On x86_64, the bit that marks a call of the x32 ABI (its own numbers for the same calls).
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: Option<u32> = Some(0x4000_0000);
#[cfg(not(target_arch = "x86_64"))]
const X32_SYSCALL_BIT: Option<u32> = None;

/// Offsets in `struct seccomp_data`: the call number, the architecture, the low 32 bits of the
/// first argument (little-endian targets only; every target above is).
const NR: u32 = 0;
const ARCH: u32 = 4;
const ARG0_LOW: u32 = 16;

/// The rules the program enforces.
pub struct Rules<'a> {
    /// Call numbers answered `EPERM`.
    pub denied: &'a [i64],
    /// `clone`, and the flags of its first argument that make it answer `EPERM` (all below 2³²).
    pub clone: i64,
    pub clone_denied_flags: u32,
    /// `clone3`, answered `ENOSYS`.
    pub clone3: i64,
}

impl Rules<'_> {
    /// What the program must answer for a call of `arch` numbered `nr` whose first argument's
    /// low half is `arg0`: the specification the tests hold the program to.
    pub fn decide(&self, arch: u32, nr: u32, arg0: u32) -> Decision {
        if arch != NATIVE_ARCH {
            Decision::Kill
        } else if X32_SYSCALL_BIT.is_some_and(|bit| nr >= bit) || self.denied.contains(&i64::from(nr)) {
            Decision::Eperm
        } else if i64::from(nr) == self.clone3 {
            Decision::Enosys
        } else if i64::from(nr) == self.clone && arg0 & self.clone_denied_flags != 0 {
            Decision::Eperm
        } else {
            Decision::Allow
        }
    }
}

/// Builds the program for `rules`.
pub fn program(rules: &Rules) -> Result<Vec<libc::sock_filter>, String> {
    let number = |nr: i64| u32::try_from(nr).map_err(|_| format!("call number {nr} out of range"));
    let mut asm = Asm::default();
    let (allow, eperm, enosys, clone) = (asm.label(), asm.label(), asm.label(), asm.label());
    // Another architecture's call: its numbers mean other calls.
    asm.stmt(BPF_LD | BPF_W | BPF_ABS, ARCH);
    let native = asm.label();
    asm.jump(BPF_JEQ, NATIVE_ARCH, Some(native), None);
    asm.stmt(BPF_RET | BPF_K, Decision::Kill.ret());
    asm.bind(native);
    asm.stmt(BPF_LD | BPF_W | BPF_ABS, NR);
    if let Some(bit) = X32_SYSCALL_BIT {
        asm.jump(BPF_JGE, bit, Some(eperm), None);
    }
    let mut calls: Vec<(u32, Label)> = Vec::with_capacity(rules.denied.len() + 2);
    for &nr in rules.denied {
        calls.push((number(nr)?, eperm));
    }
    calls.push((number(rules.clone)?, clone));
    calls.push((number(rules.clone3)?, enosys));
    calls.sort_unstable_by_key(|(nr, _)| *nr);
    calls.dedup_by_key(|(nr, _)| *nr);
    asm.tree(&calls);
    // Jumps go forward only: `clone`'s test before the answers it jumps to.
    asm.bind(clone);
    asm.stmt(BPF_LD | BPF_W | BPF_ABS, ARG0_LOW);
    asm.jump(BPF_JSET, rules.clone_denied_flags, Some(eperm), Some(allow));
    asm.bind(allow);
    asm.stmt(BPF_RET | BPF_K, Decision::Allow.ret());
    asm.bind(eperm);
    asm.stmt(BPF_RET | BPF_K, Decision::Eperm.ret());
    asm.bind(enosys);
    asm.stmt(BPF_RET | BPF_K, Decision::Enosys.ret());
    asm.finish()
}

const BPF_LD: u16 = libc::BPF_LD as u16;
const BPF_W: u16 = libc::BPF_W as u16;
const BPF_ABS: u16 = libc::BPF_ABS as u16;
const BPF_JMP: u16 = libc::BPF_JMP as u16;
const BPF_JEQ: u16 = libc::BPF_JEQ as u16;
const BPF_JGE: u16 = libc::BPF_JGE as u16;
const BPF_JSET: u16 = libc::BPF_JSET as u16;
const BPF_K: u16 = libc::BPF_K as u16;
const BPF_RET: u16 = libc::BPF_RET as u16;

/// A place in the program, bound once; jumps to it are resolved at [`Asm::finish`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Label(usize);

/// A tiny assembler of forward jumps (all classic BPF allows).
#[derive(Default)]
struct Asm {
    code: Vec<libc::sock_filter>,
    bound: Vec<Option<usize>>,
    /// (instruction, whether its `jt` (else `jf`), target).
    fixups: Vec<(usize, bool, Label)>,
}

impl Asm {
    fn label(&mut self) -> Label {
        self.bound.push(None);
        Label(self.bound.len() - 1)
    }

    fn bind(&mut self, label: Label) {
        self.bound[label.0] = Some(self.code.len());
    }

    fn stmt(&mut self, code: u16, k: u32) {
        self.code.push(libc::sock_filter { code, jt: 0, jf: 0, k });
    }

    /// A conditional jump (`BPF_JMP | op | BPF_K`); `None` is the next instruction.
    fn jump(&mut self, op: u16, k: u32, jt: Option<Label>, jf: Option<Label>) {
        let at = self.code.len();
        self.fixups.extend(jt.map(|l| (at, true, l)));
        self.fixups.extend(jf.map(|l| (at, false, l)));
        self.code.push(libc::sock_filter { code: BPF_JMP | op | BPF_K, jt: 0, jf: 0, k });
    }

    /// A balanced tree of comparisons over `calls` (sorted by number), each leaf a few
    /// equality tests and then the answer for every other call (`ret` is one instruction, as a
    /// jump to it would be).
    fn tree(&mut self, calls: &[(u32, Label)]) {
        if calls.len() <= 3 {
            for &(nr, target) in calls {
                self.jump(BPF_JEQ, nr, Some(target), None);
            }
            self.stmt(BPF_RET | BPF_K, Decision::Allow.ret());
            return;
        }
        let (low, high) = calls.split_at(calls.len() / 2);
        let upper = self.label();
        self.jump(BPF_JGE, high[0].0, Some(upper), None);
        self.tree(low);
        self.bind(upper);
        self.tree(high);
    }

    fn finish(mut self) -> Result<Vec<libc::sock_filter>, String> {
        for &(at, is_true, label) in &self.fixups {
            let target = self.bound[label.0].ok_or("a jump to an unbound label")?;
            let offset = target
                .checked_sub(at + 1)
                .and_then(|o| u8::try_from(o).ok())
                .ok_or_else(|| format!("a jump from {at} to {target} does not fit"))?;
            let insn = &mut self.code[at];
            if is_true {
                insn.jt = offset;
            } else {
                insn.jf = offset;
            }
        }
        Ok(self.code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `program` as the kernel would on a call (the instructions [`program`] emits).
    fn run(program: &[libc::sock_filter], arch: u32, nr: u32, arg0: u32) -> u32 {
        let mut a = 0u32;
        let mut pc = 0usize;
        loop {
            let insn = program[pc];
            pc += 1;
            match insn.code {
                c if c == BPF_LD | BPF_W | BPF_ABS => {
                    a = match insn.k {
                        NR => nr,
                        ARCH => arch,
                        ARG0_LOW => arg0,
                        other => panic!("a load of offset {other}"),
                    }
                }
                c if c == BPF_RET | BPF_K => return insn.k,
                c if c & 0x07 == BPF_JMP => {
                    let taken = match c & 0xf0 {
                        op if op == BPF_JEQ => a == insn.k,
                        op if op == BPF_JGE => a >= insn.k,
                        op if op == BPF_JSET => a & insn.k != 0,
                        op => panic!("jump op {op:#x}"),
                    };
                    pc += usize::from(if taken { insn.jt } else { insn.jf });
                }
                other => panic!("instruction {other:#x}"),
            }
        }
    }

    fn rules() -> Rules<'static> {
        Rules { denied: &[101, 165, 272, 308, 321, 250, 9999], clone: 56, clone_denied_flags: 0x7E02_0000, clone3: 435 }
    }

    #[test]
    fn every_call_number_gets_the_answer_the_rules_give() {
        let rules = rules();
        let program = program(&rules).unwrap();
        assert!(program.len() < 64, "{} instructions", program.len());
        let mut numbers: Vec<u32> = (0..1100).collect();
        numbers.extend([0x4000_0000, 0x4000_0065, u32::MAX]);
        for nr in numbers {
            for arg0 in [0, 0x11, 0x1000_0000, 0x0002_0000 | 0x11, 0x8000_0000] {
                let want = rules.decide(NATIVE_ARCH, nr, arg0).ret();
                assert_eq!(run(&program, NATIVE_ARCH, nr, arg0), want, "call {nr}, arg0 {arg0:#x}");
            }
            assert_eq!(run(&program, 0x4000_0003, nr, 0), Decision::Kill.ret(), "i386 call {nr}");
        }
        assert_eq!(rules.decide(NATIVE_ARCH, 56, 0x1000_0000), Decision::Eperm, "clone with CLONE_NEWUSER");
        assert_eq!(rules.decide(NATIVE_ARCH, 56, 0x11), Decision::Allow, "a plain fork");
        assert_eq!(rules.decide(NATIVE_ARCH, 435, 0), Decision::Enosys);
    }
}

//! Confinement of an app's process (SPEC R48, issue 41): the kernel mechanisms, applied in the
//! forked child just before `exec`.
//!
//! What an app may reach is decided above (`apps/permissions.rs` turns a manifest into a
//! [`Profile`]); this file only enforces a profile:
//!
//! - **Filesystem** with Landlock: read and execute on [`Profile::read`], read and write (no
//!   execute) on [`Profile::write`]; nothing else is reachable, whatever the file modes say.
//! - **Network**: Landlock's TCP rules (ABI 4 and later) allow `connect` to [`Profile::connect_ports`]
//!   and `bind` to [`Profile::bind_ports`] only (Landlock filters ports, not addresses); with
//!   [`Profile::private_network`] the app gets a network namespace of its own (no interface but
//!   its own loopback), so it reaches nothing, UDP included.
//! - Landlock's scopes (ABI 6): no signal to, and no abstract UNIX socket of, a process outside the
//!   app's domain; Landlock also keeps the app from tracing any process outside it.
//! - `no_new_privs`, and a seccomp filter returning `EPERM` for the calls an app has no business
//!   making ([`DENIED_SYSCALLS`]: ptrace, mount, module loading, keyctl, bpf, namespaces, …).
//! - Limits: `RLIMIT_DATA` (memory an app can allocate; unlike `RLIMIT_AS` it does not count the
//!   address space V8 or the JVM reserve without using), `RLIMIT_NOFILE`, `RLIMIT_CPU`, and the
//!   number of processes (threads included) through a `pids` cgroup of the app's own when the
//!   gateway may create one (`RLIMIT_NPROC` counts every process of the user and does not hold
//!   for root, so it is not used).
//!
//! # Fork and exec
//!
//! The child of a threaded process may only make async-signal-safe calls between `fork` and
//! `exec`. So everything is built in the parent before it asks the spawner thread to fork
//! ([`Prepared::prepare`]): the Landlock ruleset (its rules hold `O_PATH` descriptors of the
//! paths, opened here; a path that does not exist is skipped), the rlimit values, the cgroup's
//! file to move into opened for writing, the uid/gid map lines. What every app shares (the BPF
//! programs, the shared empty network namespace, the descriptors of the system paths, the
//! sweep of stale cgroups) is made once, as the apps first start ([`warm_up`]). The child
//! ([`Prepared::apply_in_child`]) makes plain system calls only: `setrlimit`, `write`, `setns`,
//! `unshare`, `open`, `ioctl`, `prctl`, `landlock_restrict_self`, `seccomp`.
//!
//! Starting twenty apps confined costs about a tenth more time than starting them unconfined
//! (`bench startup`, `confined_ratio`); what made it more is noted where it was removed (the
//! cgroup move in [`pids_cgroup`], the namespace in [`shared_empty_netns`]).

use std::ffi::CString;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::path::{Path, PathBuf};

use crate::upstream::seccomp;

use landlock::{
    Access, AccessFs, AccessNet, NetPort, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, Scope, ABI,
};

/// What `Sandbox.Mode` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Confine every app; refuse to start apps when the kernel cannot confine them.
    #[default]
    Enforce,
    /// Confine what the kernel can; start apps it cannot confine, with a warning each.
    Warn,
    /// No confinement at all.
    Off,
}

impl Mode {
    pub fn parse(s: &str) -> Option<Mode> {
        match s.trim().to_ascii_lowercase().as_str() {
            "enforce" => Some(Mode::Enforce),
            "warn" => Some(Mode::Warn),
            "off" => Some(Mode::Off),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Enforce => "enforce",
            Mode::Warn => "warn",
            Mode::Off => "off",
        }
    }
}

/// Resource limits; `None` is unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Limits {
    pub memory_bytes: Option<u64>,
    /// Processes and threads together (the `pids` cgroup counts tasks).
    pub processes: Option<u64>,
    pub open_files: Option<u64>,
    pub cpu_seconds: Option<u64>,
}

/// An app's confinement, as the kernel is to enforce it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Profile {
    /// Read and execute (folders with everything under them, or single files).
    pub read: Vec<PathBuf>,
    /// Read and write, not execute.
    pub write: Vec<PathBuf>,
    /// Like `read` and `write`, for system paths that stay put (`/usr`, `/dev/null`): opened once
    /// for every app.
    pub runtime_read: &'static [&'static str],
    pub runtime_write: &'static [&'static str],
    /// `None`: TCP is not restricted. `Some(ports)`: `connect` to these ports only.
    pub connect_ports: Option<Vec<u16>>,
    /// The ports the app may `bind` (when TCP is restricted).
    pub bind_ports: Vec<u16>,
    /// A network namespace of the app's own.
    pub private_network: bool,
    /// In a private network namespace, bring its loopback interface up.
    pub loopback_up: bool,
    pub limits: Limits,
}

/// The Landlock ABI the kernel offers (0 when it has none). `simulate_missing` is the test switch
/// (`Sandbox.SimulateNoLandlock`) that makes the gateway behave as on a kernel without Landlock.
pub fn landlock_abi(simulate_missing: bool) -> i32 {
    if simulate_missing {
        return 0;
    }
    // SAFETY: LANDLOCK_CREATE_RULESET_VERSION with a null attribute only returns the ABI version.
    let v = unsafe {
        libc::syscall(libc::SYS_landlock_create_ruleset, std::ptr::null::<u8>(), 0usize, 1u32 /* _VERSION */)
    };
    if v < 0 { 0 } else { v as i32 }
}

fn abi_of(version: i32) -> ABI {
    match version {
        ..=0 => ABI::Unsupported,
        1 => ABI::V1,
        2 => ABI::V2,
        3 => ABI::V3,
        4 => ABI::V4,
        5 => ABI::V5,
        6 => ABI::V6,
        _ => ABI::V7,
    }
}

/// System calls an app gets `EPERM` for.
pub const DENIED_SYSCALLS: &[(&str, i64)] = &[
    ("ptrace", libc::SYS_ptrace),
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
    ("pidfd_getfd", libc::SYS_pidfd_getfd),
    ("mount", libc::SYS_mount),
    ("umount2", libc::SYS_umount2),
    ("pivot_root", libc::SYS_pivot_root),
    ("chroot", libc::SYS_chroot),
    ("fsopen", libc::SYS_fsopen),
    ("fsmount", libc::SYS_fsmount),
    ("fsconfig", libc::SYS_fsconfig),
    ("fspick", libc::SYS_fspick),
    ("move_mount", libc::SYS_move_mount),
    ("open_tree", libc::SYS_open_tree),
    ("mount_setattr", libc::SYS_mount_setattr),
    ("unshare", libc::SYS_unshare),
    ("setns", libc::SYS_setns),
    ("init_module", libc::SYS_init_module),
    ("finit_module", libc::SYS_finit_module),
    ("delete_module", libc::SYS_delete_module),
    ("kexec_load", libc::SYS_kexec_load),
    ("kexec_file_load", libc::SYS_kexec_file_load),
    ("keyctl", libc::SYS_keyctl),
    ("add_key", libc::SYS_add_key),
    ("request_key", libc::SYS_request_key),
    ("bpf", libc::SYS_bpf),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("open_by_handle_at", libc::SYS_open_by_handle_at),
    ("name_to_handle_at", libc::SYS_name_to_handle_at),
    ("swapon", libc::SYS_swapon),
    ("swapoff", libc::SYS_swapoff),
    ("reboot", libc::SYS_reboot),
    ("acct", libc::SYS_acct),
    ("quotactl", libc::SYS_quotactl),
    ("syslog", libc::SYS_syslog),
    ("settimeofday", libc::SYS_settimeofday),
    ("clock_settime", libc::SYS_clock_settime),
    ("clock_adjtime", libc::SYS_clock_adjtime),
    ("adjtimex", libc::SYS_adjtimex),
    ("iopl", libc::SYS_iopl),
    ("ioperm", libc::SYS_ioperm),
    ("lookup_dcookie", libc::SYS_lookup_dcookie),
];

/// `clone` flags that make a namespace: refused like `unshare` (`clone3` gets `ENOSYS`, so the C
/// library falls back to `clone`, whose flags a filter can read). All in the low 32 bits.
const NAMESPACE_FLAGS: &[u32] = &[
    libc::CLONE_NEWUSER as u32,
    libc::CLONE_NEWNS as u32,
    libc::CLONE_NEWNET as u32,
    libc::CLONE_NEWPID as u32,
    libc::CLONE_NEWIPC as u32,
    libc::CLONE_NEWUTS as u32,
    libc::CLONE_NEWCGROUP as u32,
];

/// Why a profile could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum ConfinementError {
    #[error("Landlock: {0}")]
    Landlock(String),
    #[error("seccomp: {0}")]
    Seccomp(String),
    #[error("{0}")]
    Io(String),
}

/// A pids cgroup made for one app process; removed (when empty) on drop.
#[derive(Debug)]
pub struct PidsGroup {
    dir: PathBuf,
}

impl PidsGroup {
    /// Whether the kernel refused a fork because the group was full (`pids.events`: `max N`).
    pub fn limit_hit(&self) -> bool {
        std::fs::read_to_string(self.dir.join("pids.events"))
            .ok()
            .and_then(|t| t.split_whitespace().nth(1).and_then(|n| n.parse::<u64>().ok()))
            .is_some_and(|n| n > 0)
    }

    /// Removes the group once the processes in it are gone (best effort), and this gateway's
    /// folder of groups when it was the last one in it: a gateway that stops leaves nothing for
    /// the next one's sweep (removing a cgroup costs; the next app makes the folder again).
    pub fn remove(&self) {
        if std::fs::remove_dir(&self.dir).is_ok() {
            if let Some(own) = self.dir.parent() {
                let _ = std::fs::remove_dir(own);
            }
        }
    }
}

impl Drop for PidsGroup {
    fn drop(&mut self) {
        self.remove();
    }
}

/// What the child applies: built in the parent (see the module docs).
pub struct Prepared {
    ruleset: Option<OwnedFd>,
    filter: &'static [SockFilter],
    rlimits: Vec<(libc::__rlimit_resource_t, u64, u64)>,
    cgroup_procs: Option<OwnedFd>,
    pub pids_group: Option<PidsGroup>,
    private_network: bool,
    loopback_up: bool,
    /// For an unprivileged user: the namespace's maps (paths and contents, NUL-terminated).
    id_maps: Option<[(CString, Vec<u8>); 3]>,
    /// The shared empty network namespace to enter ([`shared_empty_netns`]), when there is one.
    netns: Option<std::os::fd::RawFd>,
    /// What was prepared, in words, and what could not be.
    pub notes: Vec<String>,
}

// SAFETY: the raw pointers inside are only plain data of owned vectors.
unsafe impl Send for Prepared {}
// SAFETY: as above; the child only reads it.
unsafe impl Sync for Prepared {}

const READ_FILE_ONLY: fn(ABI) -> landlock::BitFlags<AccessFs> = AccessFs::from_file;

impl Prepared {
    /// Builds everything the child will apply. `landlock` is the ABI to use (0: none, then the
    /// filesystem and network rules are left out). `cgroup_name` names the app's pids cgroup.
    pub fn prepare(profile: &Profile, landlock: i32, cgroup_name: &str) -> Result<Prepared, ConfinementError> {
        let mut notes = Vec::new();
        let ruleset = if landlock > 0 { Some(build_ruleset(profile, abi_of(landlock), &mut notes)?) } else { None };
        let filter = seccomp_program()?;
        let mut rlimits = Vec::new();
        let l = profile.limits;
        if let Some(m) = l.memory_bytes {
            rlimits.push((libc::RLIMIT_DATA, m, m));
        }
        if let Some(n) = l.open_files {
            rlimits.push((libc::RLIMIT_NOFILE, n, n));
        }
        if let Some(s) = l.cpu_seconds {
            // SIGXCPU at the soft limit (so the exit names it), SIGKILL two seconds later.
            rlimits.push((libc::RLIMIT_CPU, s, s + 2));
        }
        let mut cgroup_procs = None;
        let mut pids_group = None;
        if let Some(max) = l.processes {
            match pids_cgroup(cgroup_name, max) {
                Ok((group, procs)) => {
                    pids_group = Some(group);
                    cgroup_procs = Some(procs);
                }
                Err(e) => notes.push(format!("process limit not enforced: no pids cgroup ({e})")),
            }
        }
        // SAFETY: plain getters.
        let (uid, gid, euid) = unsafe { (libc::getuid(), libc::getgid(), libc::geteuid()) };
        // An app without a network (and without its loopback up) enters one shared empty
        // namespace: making a namespace per app costs milliseconds in each child.
        let netns = (profile.private_network && !profile.loopback_up).then(shared_empty_netns).flatten();
        let id_maps = (profile.private_network && netns.is_none() && euid != 0).then(|| {
            [
                (c"/proc/self/setgroups".to_owned(), b"deny".to_vec()),
                (c"/proc/self/uid_map".to_owned(), format!("{uid} {uid} 1").into_bytes()),
                (c"/proc/self/gid_map".to_owned(), format!("{gid} {gid} 1").into_bytes()),
            ]
        });
        Ok(Prepared {
            ruleset,
            filter,
            rlimits,
            cgroup_procs,
            pids_group,
            private_network: profile.private_network,
            loopback_up: profile.loopback_up,
            id_maps,
            netns,
            notes,
        })
    }

    /// Applies the confinement to the calling process. Only for the child between `fork` and
    /// `exec`: async-signal-safe system calls only, no allocation.
    ///
    /// # Safety
    /// Call only in a freshly forked child (it changes the process for good).
    pub unsafe fn apply_in_child(&self) -> std::io::Result<()> {
        let fail = |_: ()| std::io::Error::last_os_error();
        for &(resource, soft, hard) in &self.rlimits {
            let limit = libc::rlimit { rlim_cur: soft, rlim_max: hard };
            if libc::setrlimit(resource, &limit) != 0 {
                return Err(fail(()));
            }
        }
        if let Some(procs) = &self.cgroup_procs {
            // "0" moves the writing thread (v1 `tasks`) or process (`cgroup.procs`): the same
            // here, the child's only thread.
            if libc::write(procs.as_raw_fd(), b"0".as_ptr().cast(), 1) != 1 {
                return Err(fail(()));
            }
        }
        if let Some(netns) = self.netns {
            if libc::setns(netns, libc::CLONE_NEWNET) != 0 {
                return Err(fail(()));
            }
        } else if self.private_network {
            let flags = if self.id_maps.is_some() { libc::CLONE_NEWUSER | libc::CLONE_NEWNET } else { libc::CLONE_NEWNET };
            if libc::unshare(flags) != 0 {
                return Err(fail(()));
            }
            if let Some(maps) = &self.id_maps {
                for (path, content) in maps {
                    let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                    if fd < 0 {
                        return Err(fail(()));
                    }
                    let n = libc::write(fd, content.as_ptr().cast(), content.len());
                    libc::close(fd);
                    if n != content.len() as isize {
                        return Err(fail(()));
                    }
                }
            }
            if self.loopback_up {
                loopback_up()?;
            }
        }
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(fail(()));
        }
        if let Some(ruleset) = &self.ruleset {
            if libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0u32) != 0 {
                return Err(fail(()));
            }
        }
        // `SockFilter` is `repr(transparent)`: the slice is one of `libc::sock_filter`.
        let prog = libc::sock_fprog { len: self.filter.len() as libc::c_ushort, filter: self.filter.as_ptr() as *mut libc::sock_filter };
        if libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &prog as *const libc::sock_fprog) != 0 {
            return Err(fail(()));
        }
        Ok(())
    }
}

/// Brings `lo` up in the (new) network namespace: async-signal-safe calls only.
unsafe fn loopback_up() -> std::io::Result<()> {
    let sock = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
    if sock < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut req: libc::ifreq = std::mem::zeroed();
    for (i, b) in b"lo\0".iter().enumerate() {
        req.ifr_name[i] = *b as libc::c_char;
    }
    let mut ok = libc::ioctl(sock, libc::SIOCGIFFLAGS, &mut req) == 0;
    if ok {
        req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        ok = libc::ioctl(sock, libc::SIOCSIFFLAGS, &req) == 0;
    }
    let err = std::io::Error::last_os_error();
    libc::close(sock);
    if ok { Ok(()) } else { Err(err) }
}

fn build_ruleset(profile: &Profile, abi: ABI, notes: &mut Vec<String>) -> Result<OwnedFd, ConfinementError> {
    let err = |e: landlock::RulesetError| ConfinementError::Landlock(e.to_string());
    let read = AccessFs::from_read(abi);
    let all = AccessFs::from_all(abi);
    let write = all & !AccessFs::Execute;
    let mut ruleset = Ruleset::default().handle_access(all).map_err(err)?;
    let restrict_tcp = profile.connect_ports.is_some() && abi >= ABI::V4;
    if restrict_tcp {
        ruleset = ruleset.handle_access(AccessNet::from_all(abi)).map_err(err)?;
    } else if profile.connect_ports.is_some() {
        notes.push(format!("TCP ports not restricted: Landlock ABI {} has no network rules (4 and later do)", abi as i32));
    }
    if abi >= ABI::V6 {
        ruleset = ruleset.scope(Scope::from_all(abi)).map_err(err)?;
    }
    let mut created = ruleset.create().map_err(err)?;
    let add_path = |created: landlock::RulesetCreated, path: &Path, access: landlock::BitFlags<AccessFs>| {
        let fd = match PathFd::new(path) {
            Ok(fd) => fd,
            // A path that does not exist (an optional runtime path) is skipped.
            Err(_) => return Ok(created),
        };
        let is_dir = std::fs::metadata(path).map(|m| m.is_dir()).unwrap_or(false);
        let access = if is_dir { access } else { access & READ_FILE_ONLY(abi) };
        created.add_rule(PathBeneath::new(fd, access)).map_err(err)
    };
    let add_runtime = |created: landlock::RulesetCreated, path: &Path, access: landlock::BitFlags<AccessFs>| {
        let Some((fd, is_dir)) = runtime_fd(path) else { return Ok(created) };
        let access = if is_dir { access } else { access & READ_FILE_ONLY(abi) };
        created.add_rule(PathBeneath::new(fd, access)).map_err(err)
    };
    for p in &profile.read {
        created = add_path(created, p, read)?;
    }
    for p in profile.runtime_read {
        created = add_runtime(created, Path::new(p), read)?;
    }
    for p in &profile.write {
        created = add_path(created, p, write)?;
    }
    for p in profile.runtime_write {
        created = add_runtime(created, Path::new(p), write)?;
    }
    if restrict_tcp {
        for port in profile.connect_ports.iter().flatten() {
            created = created.add_rule(NetPort::new(*port, AccessNet::ConnectTcp)).map_err(err)?;
        }
        for port in &profile.bind_ports {
            created = created.add_rule(NetPort::new(*port, AccessNet::BindTcp)).map_err(err)?;
        }
    }
    let fd: Option<OwnedFd> = created.into();
    fd.ok_or_else(|| ConfinementError::Landlock("the kernel gave no ruleset".into()))
}

/// A system path opened once (`O_PATH`), and whether it is a folder; `None` when it does not
/// exist (then it is skipped, now and later).
fn runtime_fd(path: &Path) -> Option<(&'static PathFd, bool)> {
    use std::collections::HashMap;
    static OPENED: std::sync::OnceLock<parking_lot::Mutex<HashMap<PathBuf, Option<(&'static PathFd, bool)>>>> =
        std::sync::OnceLock::new();
    let mut opened = OPENED.get_or_init(Default::default).lock();
    *opened.entry(path.to_path_buf()).or_insert_with(|| {
        let fd = PathFd::new(path).ok()?;
        let is_dir = std::fs::metadata(path).map(|m| m.is_dir()).unwrap_or(false);
        // Kept for the life of the process: a handful of system paths.
        Some((&*Box::leak(Box::new(fd)), is_dir))
    })
}

/// The seccomp program, built once and shared by every app.
fn seccomp_program() -> Result<&'static [SockFilter], ConfinementError> {
    static PROGRAM: std::sync::OnceLock<Result<Vec<SockFilter>, String>> = std::sync::OnceLock::new();
    let program = PROGRAM.get_or_init(|| {
        seccomp::program(&seccomp_rules()).map(|p| p.into_iter().map(SockFilter).collect()).map_err(|e| e.to_string())
    });
    match program {
        Ok(p) => Ok(p),
        Err(e) => Err(ConfinementError::Seccomp(e.clone())),
    }
}

/// `libc::sock_filter`, which is plain data, made shareable between threads.
#[derive(Clone, Copy)]
#[repr(transparent)]
struct SockFilter(libc::sock_filter);
// SAFETY: four integers.
unsafe impl Send for SockFilter {}
// SAFETY: as above.
unsafe impl Sync for SockFilter {}

/// An empty network namespace (no interface but a loopback that is down) that every app without
/// a network enters, made once: a short-lived thread unshares its network namespace (a namespace
/// belongs to a thread, so the gateway's other threads keep theirs), the gateway keeps a
/// descriptor of it, and the thread ends. Only where the gateway may enter it (`setns` needs
/// `CAP_SYS_ADMIN`); elsewhere each app makes its own (`None`).
fn shared_empty_netns() -> Option<std::os::fd::RawFd> {
    static NETNS: std::sync::OnceLock<Option<OwnedFd>> = std::sync::OnceLock::new();
    NETNS.get_or_init(|| make_empty_netns().map_err(|e| tracing::debug!("no shared network namespace: {e}")).ok()).as_ref().map(|f| f.as_raw_fd())
}

fn make_empty_netns() -> std::io::Result<OwnedFd> {
    // SAFETY: plain getter.
    if unsafe { libc::geteuid() } != 0 {
        return Err(std::io::Error::other("not root"));
    }
    let unshared = std::thread::Builder::new().name("mcpapp-netns".into()).spawn(|| {
        // SAFETY: unshare changes this thread's namespaces only, and the thread ends after.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        std::fs::File::open("/proc/thread-self/ns/net").map(OwnedFd::from)
    })?;
    unshared.join().map_err(|_| std::io::Error::other("the thread making the network namespace panicked"))?
}

/// Makes now what every confined app's preparation shares, on a thread of its own, so that the
/// first apps to start do not wait for it: the seccomp programs, the shared empty network
/// namespace, the sweep of stale pids cgroups, and the descriptors of the `runtime` paths every
/// app may read or write. Once per process; later calls do nothing.
pub fn warm_up(runtime: Vec<PathBuf>) {
    static STARTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if STARTED.swap(true, std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    let warm = move || {
        let _ = seccomp_program();
        shared_empty_netns();
        if let Some((root, _)) = pids_root() {
            own_groups(&root);
        }
        for path in &runtime {
            runtime_fd(path);
        }
    };
    if let Err(e) = std::thread::Builder::new().name("mcpapp-warm-up".into()).spawn(warm) {
        tracing::debug!("no warm-up thread for confinement: {e}");
    }
}

/// Whether a system path every app may reach exists (asked once per path, see [`runtime_fd`]).
pub fn runtime_path_exists(path: &Path) -> bool {
    runtime_fd(path).is_some()
}

/// The rules of the seccomp program ([`seccomp`]): [`DENIED_SYSCALLS`], `clone` with one of
/// [`NAMESPACE_FLAGS`], `clone3`.
pub(crate) fn seccomp_rules() -> seccomp::Rules<'static> {
    static DENIED: std::sync::LazyLock<Vec<i64>> = std::sync::LazyLock::new(|| DENIED_SYSCALLS.iter().map(|(_, nr)| *nr).collect());
    seccomp::Rules {
        denied: &DENIED,
        clone: libc::SYS_clone,
        clone_denied_flags: NAMESPACE_FLAGS.iter().fold(0, |mask, flag| mask | *flag),
        clone3: libc::SYS_clone3,
    }
}

/// Where this process's pids cgroup lives, if writable: the cgroup v1 `pids` hierarchy (`true`)
/// or the v2 one (`false`).
fn pids_root() -> Option<(PathBuf, bool)> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        if controllers.split(',').any(|c| c == "pids") {
            let dir = Path::new("/sys/fs/cgroup/pids").join(path.trim_start_matches('/'));
            return dir.is_dir().then_some((dir, true));
        }
    }
    // cgroup v2: the one hierarchy, if it offers pids.
    let path = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    let dir = Path::new("/sys/fs/cgroup").join(path.trim_start_matches('/'));
    let controllers = std::fs::read_to_string(dir.join("cgroup.controllers")).ok()?;
    controllers.split_whitespace().any(|c| c == "pids").then_some((dir, false))
}

static CGROUP_SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// This process's folder of app groups: `mcpapp-{pid}-{nanoseconds}` (the pid alone is not unique
/// across pid namespaces). The first use sweeps what gateways that are gone left behind.
fn own_groups(root: &Path) -> PathBuf {
    static OWN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let name = OWN.get_or_init(|| {
        sweep_stale(root);
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        format!("mcpapp-{}-{nanos}", std::process::id())
    });
    root.join(name)
}

/// Makes `{pids root}/mcpapp-…/{name}-{n}` with `pids.max`, and opens the file the child writes
/// `0` to, to move itself in.
///
/// On cgroup v1 that file is `tasks`, not `cgroup.procs`: moving a whole process takes the
/// kernel's global threadgroup lock for writing, which waits for an RCU grace period (10–20 ms
/// here) whenever no other move is under way, while moving the calling thread alone does not take
/// it. The child has one thread, so the two moves are the same; its later threads follow it.
/// (cgroup v2 has no such file for a domain group: `cgroup.procs` there.)
fn pids_cgroup(name: &str, max: u64) -> std::io::Result<(PidsGroup, OwnedFd)> {
    let (root, v1) = pids_root().ok_or_else(|| std::io::Error::other("no pids controller"))?;
    let own = own_groups(&root);
    let safe: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect();
    let seq = CGROUP_SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = own.join(format!("{safe}-{seq}"));
    // Twice: another gateway's sweep may remove our folder (empty, a minute old) meanwhile.
    let made = std::fs::create_dir_all(&own).and_then(|()| std::fs::create_dir(&dir));
    if made.is_err() {
        std::fs::create_dir_all(&own)?;
        std::fs::create_dir(&dir)?;
    }
    let group = PidsGroup { dir };
    std::fs::write(group.dir.join("pids.max"), max.to_string())?;
    let file = if v1 { "tasks" } else { "cgroup.procs" };
    let path = CString::new(group.dir.join(file).as_os_str().as_encoded_bytes())
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    // SAFETY: open returns a descriptor we then own.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: just opened, owned by nobody else.
    Ok((group, unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// Removes the empty app groups (and then their folders) gateways left behind, if older than a
/// minute (a group another gateway is just making is left alone); a group with a process in it
/// refuses the removal, so running apps keep theirs.
fn sweep_stale(root: &Path) {
    let old = |p: &Path| {
        std::fs::metadata(p).and_then(|m| m.modified()).ok().and_then(|t| t.elapsed().ok()).is_some_and(|age| age.as_secs() > 60)
    };
    let Ok(entries) = std::fs::read_dir(root) else { return };
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().starts_with("mcpapp-") {
            continue;
        }
        if let Ok(children) = std::fs::read_dir(entry.path()) {
            for child in children.flatten().filter(|c| c.path().is_dir() && old(&c.path())) {
                let _ = std::fs::remove_dir(child.path());
            }
        }
        if old(&entry.path()) {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_case_insensitively() {
        assert_eq!(Mode::parse("Enforce"), Some(Mode::Enforce));
        assert_eq!(Mode::parse("warn"), Some(Mode::Warn));
        assert_eq!(Mode::parse("OFF"), Some(Mode::Off));
        assert_eq!(Mode::parse("strict"), None);
    }

    #[test]
    fn the_test_switch_hides_landlock() {
        assert_eq!(landlock_abi(true), 0);
    }

    #[test]
    fn the_seccomp_program_builds_for_this_machine_and_is_short() {
        let program = seccomp_program().unwrap();
        assert!(!program.is_empty() && program.len() < 120, "{} instructions", program.len());
    }

    /// The kernel takes the program and answers as the rules say: a child installs it, makes the
    /// calls and exits with one bit per answer that was as expected.
    #[test]
    fn the_kernel_answers_as_the_seccomp_rules_say() {
        let program = seccomp_program().unwrap();
        // SAFETY: the child makes plain system calls only, then exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            unsafe {
                let errno = || *libc::__errno_location();
                let prog = libc::sock_fprog { len: program.len() as libc::c_ushort, filter: program.as_ptr() as *mut libc::sock_filter };
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                    || libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &prog as *const libc::sock_fprog) != 0
                {
                    libc::_exit(100);
                }
                let mut ok = 0;
                let checks = [
                    (libc::syscall(libc::SYS_ptrace, libc::PTRACE_TRACEME, 0, 0, 0) == -1 && errno() == libc::EPERM),
                    (libc::unshare(libc::CLONE_NEWNET) == -1 && errno() == libc::EPERM),
                    (libc::syscall(libc::SYS_clone3, std::ptr::null::<u8>(), 0) == -1 && errno() == libc::ENOSYS),
                    (libc::syscall(libc::SYS_clone, (libc::CLONE_NEWUSER | libc::SIGCHLD) as libc::c_ulong, 0, 0, 0, 0) == -1
                        && errno() == libc::EPERM),
                    (libc::getppid() > 0),
                ];
                for (i, passed) in checks.iter().enumerate() {
                    if *passed {
                        ok |= 1 << i;
                    }
                }
                libc::_exit(ok);
            }
        }
        let mut status = 0;
        // SAFETY: our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(libc::WIFEXITED(status), "the child was killed: {status:#x}");
        assert_eq!(libc::WEXITSTATUS(status), 0b11111, "ptrace, unshare, clone3, clone with CLONE_NEWUSER, getppid (bits from 0)");
    }
}

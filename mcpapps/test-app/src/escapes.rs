//! `--escape-tool`: the tool `escape`, which tries what a confined app must not do (SPEC R48,
//! `tests/tests/confinement.rs`) with real system calls, and reports each outcome — `ok …` or
//! `refused: <the error>` — so the test sees what the kernel answered.
//!
//! Arguments (each optional): `read` (paths: read a file or list a folder), `write` (paths: create
//! a file), `connect` (`host:port`s), `fork` (how many processes to start at once), `allocateMb`
//! (map and touch that much memory), `ptraceParent` (attach to the parent), `spinSeconds` (burn
//! CPU; the answer comes after, if the app still lives).

use std::io::Read as _;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

pub fn describe() -> (&'static str, &'static str, Value) {
    (
        "escape",
        "Try to escape the confinement: read, write, connect, fork, allocate, ptrace; report each outcome.",
        json!({
            "type": "object",
            "properties": {
                "read": {"type": "array", "items": {"type": "string"}},
                "write": {"type": "array", "items": {"type": "string"}},
                "connect": {"type": "array", "items": {"type": "string"}},
                "fork": {"type": "integer"},
                "allocateMb": {"type": "integer"},
                "ptraceParent": {"type": "boolean"},
                "spinSeconds": {"type": "integer"},
            },
        }),
    )
}

fn strings(args: &Map<String, Value>, key: &str) -> Vec<String> {
    args.get(key).and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect()
}

fn outcome(r: std::io::Result<String>) -> Value {
    Value::String(match r {
        Ok(s) => format!("ok {s}"),
        Err(e) => format!("refused: {e}"),
    })
}

/// Runs the attempts the arguments ask for (blocking).
pub fn run(args: &Map<String, Value>) -> Value {
    let mut out = Map::new();
    let mut reads = Map::new();
    for p in strings(args, "read") {
        let r = match std::fs::metadata(&p) {
            Ok(m) if m.is_dir() => std::fs::read_dir(&p).and_then(|d| d.count().to_string().parse().map_err(std::io::Error::other)).map(|n: usize| format!("{n} entries")),
            _ => std::fs::File::open(&p).and_then(|mut f| {
                let mut text = String::new();
                f.read_to_string(&mut text).map(|n| format!("{n} bytes: {}", text.chars().take(64).collect::<String>()))
            }),
        };
        reads.insert(p, outcome(r));
    }
    out.insert("read".into(), Value::Object(reads));
    let mut writes = Map::new();
    for p in strings(args, "write") {
        writes.insert(p.clone(), outcome(std::fs::write(&p, b"written by the escape tool").map(|()| "written".to_string())));
    }
    out.insert("write".into(), Value::Object(writes));
    let mut connects = Map::new();
    for target in strings(args, "connect") {
        let r = target
            .parse::<std::net::SocketAddr>()
            .map_err(std::io::Error::other)
            .and_then(|addr| std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(3)))
            .map(|_| "connected".to_string());
        connects.insert(target, outcome(r));
    }
    out.insert("connect".into(), Value::Object(connects));
    if let Some(n) = args.get("fork").and_then(Value::as_u64) {
        out.insert("fork".into(), fork_many(n));
    }
    if let Some(mb) = args.get("allocateMb").and_then(Value::as_u64) {
        out.insert("allocate".into(), outcome(allocate(mb)));
    }
    if args.get("ptraceParent").and_then(Value::as_bool) == Some(true) {
        out.insert("ptrace".into(), outcome(ptrace_parent()));
    }
    if let Some(s) = args.get("spinSeconds").and_then(Value::as_u64) {
        let end = Instant::now() + Duration::from_secs(s);
        let mut x = 0u64;
        while Instant::now() < end {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        out.insert("spin".into(), json!(format!("ok {x}")));
    }
    Value::Object(out)
}

/// Starts `n` processes that sleep; stops at the first refusal; then kills and reaps them all.
fn fork_many(n: u64) -> Value {
    let mut pids = Vec::new();
    let mut refused = Value::Null;
    for _ in 0..n {
        // SAFETY: the child only sleeps and exits (async-signal-safe calls).
        match unsafe { libc::fork() } {
            -1 => {
                refused = json!(format!("refused: {}", std::io::Error::last_os_error()));
                break;
            }
            0 => unsafe {
                libc::sleep(30);
                libc::_exit(0);
            },
            pid => pids.push(pid),
        }
    }
    let started = pids.len();
    for pid in &pids {
        // SAFETY: our own children.
        unsafe {
            libc::kill(*pid, libc::SIGKILL);
            libc::waitpid(*pid, std::ptr::null_mut(), 0);
        }
    }
    json!({ "started": started, "refused": refused })
}

/// Maps `mb` MiB of private memory and touches every page.
fn allocate(mb: u64) -> std::io::Result<String> {
    let len = (mb as usize) << 20;
    // SAFETY: a fresh anonymous mapping, unmapped below.
    let p = unsafe {
        libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
    };
    if p == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    let bytes = p.cast::<u8>();
    for off in (0..len).step_by(4096) {
        // SAFETY: inside the mapping.
        unsafe { bytes.add(off).write_volatile(1) };
    }
    // SAFETY: the mapping made above.
    unsafe { libc::munmap(p, len) };
    Ok(format!("{mb} MiB allocated and touched"))
}

/// PTRACE_ATTACH to the parent (the gateway); detaches at once if that worked.
fn ptrace_parent() -> std::io::Result<String> {
    // SAFETY: plain system calls.
    unsafe {
        let parent = libc::getppid();
        if libc::ptrace(libc::PTRACE_ATTACH, parent, 0, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        libc::waitpid(parent, std::ptr::null_mut(), libc::__WALL);
        libc::ptrace(libc::PTRACE_DETACH, parent, 0, 0);
        Ok(format!("attached to {parent}"))
    }
}

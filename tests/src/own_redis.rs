//! A `redis-server` of a test's own (scripts/test.sh installs it).

use std::time::Duration;

/// A `redis-server` of the test's own on `port` (no persistence), killed on drop.
pub struct OwnRedis(std::process::Child);

impl OwnRedis {
    pub fn start(port: u16) -> OwnRedis {
        let child = std::process::Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server (scripts/test.sh installs it)");
        let up = crate::wait_until(Duration::from_secs(10), Duration::from_millis(50), || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());
        assert!(up, "redis-server never listened on {port}");
        OwnRedis(child)
    }

    pub fn keys(port: u16, pattern: &str) -> Vec<String> {
        let out = std::process::Command::new("redis-cli").args(["-p", &port.to_string(), "--scan", "--pattern", pattern]).output().expect("redis-cli");
        String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).filter(|l| !l.is_empty()).collect()
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}


//! A `redis-server` of a test's own (scripts/test.sh installs it).

use std::time::Duration;

/// A `redis-server` of the test's own on `port` (no persistence), killed on drop.
pub struct OwnRedis(std::process::Child, u16);

impl OwnRedis {
    pub fn port(&self) -> u16 {
        self.1
    }

    pub fn start(port: u16) -> OwnRedis {
        let child = std::process::Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server (scripts/test.sh installs it)");
        let up = crate::wait_until(Duration::from_secs(10), Duration::from_millis(50), || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());
        assert!(up, "redis-server never listened on {port}");
        OwnRedis(child, port)
    }

    pub fn keys(port: u16, pattern: &str) -> Vec<String> {
        let out = std::process::Command::new("redis-cli").args(["-p", &port.to_string(), "--scan", "--pattern", pattern]).output().expect("redis-cli");
        String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).filter(|l| !l.is_empty()).collect()
    }
}

/// What `redis-cli` answers to `command` on the Redis at `url` (any test's, e.g.
/// `GATEWAY_TEST_REDIS_URL`), trimmed.
pub fn cli(url: &str, command: &[&str]) -> String {
    let out = std::process::Command::new("redis-cli").arg("-u").arg(url).args(command).output().expect("redis-cli");
    assert!(out.status.success(), "redis-cli {command:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}


/// A three-master Redis Cluster of the test's own (`redis-server --cluster-enabled yes` on three
/// loopback ports, joined by `redis-cli --cluster create`), killed on drop.
pub struct OwnRedisCluster {
    ports: Vec<u16>,
    nodes: Vec<std::process::Child>,
    _dir: tempfile::TempDir,
}

impl OwnRedisCluster {
    pub fn start() -> OwnRedisCluster {
        let dir = tempfile::Builder::new().prefix("redis-cluster-").tempdir().expect("a folder for the cluster's node files");
        let ports: Vec<u16> = (0..3).map(|_| crate::free_port()).collect();
        let mut nodes = Vec::new();
        for port in &ports {
            let child = std::process::Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
                .args(["--cluster-enabled", "yes", "--cluster-config-file", &format!("nodes-{port}.conf"), "--cluster-node-timeout", "2000"])
                .current_dir(dir.path())
                .stdout(std::process::Stdio::null())
                .spawn()
                .expect("redis-server (scripts/test.sh installs it)");
            nodes.push(child);
        }
        let cluster = OwnRedisCluster { ports, nodes, _dir: dir };
        for port in &cluster.ports {
            let up = crate::wait_until(Duration::from_secs(10), Duration::from_millis(50), || std::net::TcpStream::connect(("127.0.0.1", *port)).is_ok());
            assert!(up, "a cluster node never listened on {port}");
        }
        let mut create = std::process::Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        for port in &cluster.ports {
            create.arg(format!("127.0.0.1:{port}"));
        }
        let out = create.args(["--cluster-replicas", "0", "--cluster-yes"]).output().expect("redis-cli --cluster create");
        assert!(out.status.success(), "redis-cli --cluster create: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        let ok = crate::wait_until(Duration::from_secs(20), Duration::from_millis(100), || {
            cluster.ports.iter().all(|port| {
                let info = std::process::Command::new("redis-cli").args(["-p", &port.to_string(), "cluster", "info"]).output();
                info.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("cluster_state:ok"))
            })
        });
        assert!(ok, "the cluster never reached cluster_state:ok");
        cluster
    }

    /// `Sessions.RedisUrl` for it: every node, separated by commas.
    pub fn urls(&self) -> String {
        self.ports.iter().map(|p| format!("redis://127.0.0.1:{p}")).collect::<Vec<_>>().join(",")
    }

    /// Every key of the cluster matching `pattern`, with the node (port) holding it.
    pub fn keys(&self, pattern: &str) -> Vec<(u16, String)> {
        self.ports.iter().flat_map(|port| OwnRedis::keys(*port, pattern).into_iter().map(move |k| (*port, k))).collect()
    }
}

impl Drop for OwnRedisCluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            let _ = node.kill();
            let _ = node.wait();
        }
    }
}

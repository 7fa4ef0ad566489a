"""Shared fixtures: the real gateway-host (release build) with real apps, on a free loopback port."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_target = os.environ.get("CARGO_TARGET_DIR")
RELEASE = (REPO / _target if _target and not os.path.isabs(_target) else Path(_target) if _target else REPO / "target") / "release"
GATEWAY_BIN = RELEASE / "gateway-host"
GROCERY_BIN = RELEASE / "grocery-inventory"
TEST_APP_BIN = RELEASE / "test-app"
LISTENING = re.compile(r"Gateway listening on (http://\S+)")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
# Configuration overrides in the runner's environment must not leak into the gateway.
CONFIG_ENV = re.compile(r"^(OpenClaw|McpApps|Gateway|Plugins|Security|Agent|Tools|Sessions|McpCompatibility|Testing)__", re.I)


def _port_range() -> tuple[int, int]:
    """Ports below the kernel's ephemeral range: a port picked from that range and let go may be
    handed next to anything binding port 0 (the gateway) before the app binds it (the Rust
    harness's `free_port` says more)."""
    try:
        ephemeral_low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 32768
    low = max(ephemeral_low - 12000, 10000)
    return low, max(ephemeral_low, low + 1)


_LOW, _HIGH = _port_range()
# Test processes run one after another: each starts somewhere of its own in the range.
_cursor = _LOW + os.getpid() % (_HIGH - _LOW)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago and not handed out before."""
    global _cursor
    for _ in range(_HIGH - _LOW):
        port = _cursor
        _cursor = _LOW if port + 1 >= _HIGH else port + 1
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free TCP port on 127.0.0.1 between {_LOW} and {_HIGH}")


def grocery_manifest() -> dict:
    manifest = json.loads((REPO / "mcpapps/grocery-inventory/openclaw.mcpapp.json").read_text())
    port = free_port()
    manifest["command"] = str(GROCERY_BIN)
    manifest["url"] = f"http://127.0.0.1:{port}/mcp"
    manifest["arguments"] = ["--listen", f"127.0.0.1:{port}"]
    manifest["startupTimeoutSeconds"] = 30
    return manifest


class Gateway:
    """A running gateway-host; `base` is http://127.0.0.1:PORT."""

    def __init__(self, config: dict, folder: Path):
        for binary in (GATEWAY_BIN, GROCERY_BIN, TEST_APP_BIN):
            if not binary.exists():
                raise RuntimeError(f"{binary} is missing: run `cargo build --release --workspace` first")
        config_path = folder / "appsettings.json"
        config_path.write_text(json.dumps(config, indent=2))
        env = {k: v for k, v in os.environ.items() if not CONFIG_ENV.match(k)}
        env["RUST_LOG"] = "info"
        self.process = subprocess.Popen(
            [str(GATEWAY_BIN), "--config", str(config_path), "--urls", "http://127.0.0.1:0"],
            cwd=folder,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.apps_dir: Path | None = None
        self.lines: list[str] = []
        self.listening = threading.Event()
        self.base = ""
        threading.Thread(target=self._read, daemon=True).start()
        if not self.listening.wait(60):
            self.stop()
            raise RuntimeError("gateway did not start:\n" + self.logs())

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            line = ANSI.sub("", line)
            self.lines.append(line)
            match = LISTENING.search(line)
            if match and not self.base:
                self.base = match.group(1).rstrip("/")
                self.listening.set()

    def logs(self) -> str:
        return "".join(self.lines)

    def url(self, path: str) -> str:
        return self.base + path

    def wait_running(self, ids: list[str], timeout: float = 60) -> None:
        import httpx2

        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                last = httpx2.get(self.url("/apps/health"), timeout=5).json()
                states = {a["id"]: a["state"] for a in last.get("apps", [])}
                if all(states.get(i) == "running" for i in ids):
                    return
            except Exception as e:  # noqa: BLE001 - keep polling until the deadline
                last = repr(e)
            time.sleep(0.1)
        raise RuntimeError(f"apps {ids} not running: {last}\n{self.logs()}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@contextlib.contextmanager
def gateway_with_apps(prefix: str, manifests: dict[str, dict]):
    """A gateway (open on loopback) running these apps, by id; stopped and cleaned up after."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    apps = folder / "apps"
    for app_id, manifest in manifests.items():
        (apps / app_id).mkdir(parents=True)
        (apps / app_id / "openclaw.mcpapp.json").write_text(json.dumps(manifest, indent=2))
    config = {
        "Gateway": {"AuthTokenEnv": "GATEWAY_PY_TOKEN_NOT_SET"},
        "OpenClaw": {"McpApps": {"Enabled": True, "DiscoveryPaths": [str(apps)], "Allow": ["*"]}},
    }
    gw = Gateway(config, folder)
    # The watched discovery folder: a test may add or remove app folders (hot discovery, R21).
    gw.apps_dir = apps
    try:
        gw.wait_running(list(manifests))
        yield gw
    finally:
        gw.stop()
        shutil.rmtree(folder, ignore_errors=True)


async def all_tool_names(client) -> list[str]:
    """Every tool name a client is offered, all pages."""
    names, cursor = [], None
    while True:
        page = await client.list_tools(cursor=cursor) if cursor else await client.list_tools()
        names.extend(t.name for t in page.tools)
        cursor = page.next_cursor
        if not cursor:
            return names


@pytest.fixture(scope="session")
def gateway():
    with gateway_with_apps(
        "gateway-py-",
        {
            "grocery-inventory": grocery_manifest(),
            "echo": {"id": "echo", "version": "1.0.0", "transport": "stdio", "command": str(TEST_APP_BIN), "toolNamePrefix": "echo."},
        },
    ) as gw:
        yield gw


@pytest.fixture
def anyio_backend():
    return "asyncio"

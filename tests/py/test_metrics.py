"""`GET /metrics` (issue 14): the Prometheus text format, read with the Prometheus project's own
Python parser (`prometheus_client.parser`), and counters that move by exactly the calls made.

One gateway for the module, with auth required (so `/metrics` is shown to need the token like
every other route), two apps (`echo`, the test app over stdio; `grocery-inventory` over http),
an OpenAI-compatible fake LLM for the chat agent, and a module directory for a live swap.
Calls go through `/mcp` and `/apps/mcp/{appId}` with the official Python MCP client (PyPI `mcp`).
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
import tempfile
import threading
import time
from contextlib import asynccontextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anyio
import httpx2
import pytest
from prometheus_client.parser import text_string_to_metric_families

from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from conftest import RELEASE, TEST_APP_BIN, Gateway, grocery_manifest

pytestmark = pytest.mark.anyio

TOKEN = "metrics-test-" + secrets.token_hex(8)
AUTH = {"Authorization": f"Bearer {TOKEN}"}
MODULE_LIB = RELEASE / "libmcpapp_plugin.so"

FAMILIES = {
    "gateway_app_state": "gauge",
    "gateway_app_restarts": "counter",
    "gateway_tool_calls": "counter",
    "gateway_tool_call_duration_seconds": "histogram",
    "gateway_proxied_requests": "counter",
    "gateway_chat_turns": "counter",
    "gateway_chat_turns_in_progress": "gauge",
    "gateway_chat_sessions_active": "gauge",
    "gateway_module_swaps": "counter",
}


# --- an OpenAI-compatible fake LLM -------------------------------------------------------------


class FakeLlm:
    """Answers `POST /v1/chat/completions` (streamed) by the user's last message:

    - "call tools": round 1 asks for `echo.echo` and `echo.fail`; round 2 (after the tool
      results) answers "done";
    - "break": HTTP 500 (the turn ends with an error);
    - "wait": holds the answer until `release` is set (the turn stays in progress).
    """

    def __init__(self) -> None:
        self.waiting = threading.Event()
        self.release = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.answer(self, body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @staticmethod
    def stream(handler: BaseHTTPRequestHandler, chunks: list[dict]) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.end_headers()
        for chunk in chunks:
            handler.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        handler.wfile.write(b"data: [DONE]\n\n")
        handler.wfile.flush()

    def answer(self, handler: BaseHTTPRequestHandler, body: dict) -> None:
        messages = body["messages"]
        last = messages[-1]
        said = next(m["content"] for m in reversed(messages) if m["role"] == "user")
        text = lambda t: {"choices": [{"index": 0, "delta": {"content": t}, "finish_reason": "stop"}]}  # noqa: E731
        if last["role"] == "tool":
            return self.stream(handler, [text("done")])
        if "break" in said:
            handler.send_response(500)
            handler.send_header("Content-Type", "application/json")
            handler.end_headers()
            handler.wfile.write(b'{"error": "scripted failure"}')
            return
        if "wait" in said:
            self.waiting.set()
            self.release.wait(30)
            try:
                return self.stream(handler, [text("waited")])
            except OSError:
                return  # the gateway went away (the turn was cancelled)
        names = {t["function"]["name"] for t in body.get("tools", [])}
        assert {"echo_echo", "echo_fail"} <= names, names
        call = lambda i, name, args: {"index": i, "id": f"call-{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}  # noqa: E731
        self.stream(
            handler,
            [
                {"choices": [{"index": 0, "delta": {"tool_calls": [call(0, "echo_echo", {"text": "from chat"})]}}]},
                {"choices": [{"index": 0, "delta": {"tool_calls": [call(1, "echo_fail", {"message": "nope"})]}, "finish_reason": "tool_calls"}]},
            ],
        )

    def stop(self) -> None:
        self.release.set()
        self.server.shutdown()


# --- the gateway ------------------------------------------------------------------------------


def wait_running(gw: Gateway, ids: list[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = httpx2.get(gw.url("/apps/health"), headers=AUTH, timeout=5).json()
            states = {a["id"]: a["state"] for a in last.get("apps", [])}
            if all(states.get(i) == "running" for i in ids):
                return
        except Exception as e:  # noqa: BLE001 - keep polling until the deadline
            last = repr(e)
        time.sleep(0.1)
    raise RuntimeError(f"apps {ids} not running: {last}\n{gw.logs()}")


@pytest.fixture(scope="module")
def metrics_gateway():
    folder = Path(tempfile.mkdtemp(prefix="gateway-py-metrics-"))
    apps, modules = folder / "apps", folder / "modules"
    modules.mkdir()
    manifests = {
        "grocery-inventory": grocery_manifest(),
        "echo": {"id": "echo", "version": "1.0.0", "transport": "stdio", "command": str(TEST_APP_BIN), "toolNamePrefix": "echo."},
    }
    for app_id, manifest in manifests.items():
        (apps / app_id).mkdir(parents=True)
        (apps / app_id / "openclaw.mcpapp.json").write_text(json.dumps(manifest, indent=2))
    llm = FakeLlm()
    config = {
        "Gateway": {"AlwaysRequireAuth": True, "AuthToken": TOKEN, "ModuleDirectory": str(modules)},
        "OpenClaw": {"McpApps": {"Enabled": True, "DiscoveryPaths": [str(apps)], "Allow": ["*"]}},
        "Agent": {"BaseUrl": llm.url, "Model": "scripted"},
    }
    gw = Gateway(config, folder)
    gw.modules_dir = modules
    gw.llm = llm
    try:
        wait_running(gw, list(manifests))
        yield gw
    finally:
        gw.stop()
        llm.stop()
        shutil.rmtree(folder, ignore_errors=True)


# --- reading /metrics ---------------------------------------------------------------------------


class Scrape:
    """One parsed scrape: families by name, and sample values by (name, labels)."""

    def __init__(self, text: str):
        self.text = text
        self.families = {f.name: f for f in text_string_to_metric_families(text)}
        self.samples = {}
        for family in self.families.values():
            for s in family.samples:
                self.samples[(s.name, frozenset(s.labels.items()))] = s.value

    def value(self, name: str, **labels: str) -> float:
        """A sample's value; 0 for a series that does not exist (yet)."""
        return self.samples.get((name, frozenset(labels.items())), 0.0)

    def total(self, name: str, **labels: str) -> float:
        """The sum over every series of `name` whose labels include `labels`."""
        wanted = set(labels.items())
        return sum(v for (n, ls), v in self.samples.items() if n == name and wanted <= ls)


def scrape(gw: Gateway) -> Scrape:
    response = httpx2.get(gw.url("/metrics"), headers=AUTH, timeout=10)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8", response.headers
    return Scrape(response.text)


def delta(before: Scrape, after: Scrape, name: str, **labels: str) -> float:
    return after.value(name, **labels) - before.value(name, **labels)


@asynccontextmanager
async def client(gw: Gateway, path: str, mode: str = "legacy"):
    """The official client on `path`, with the gateway token."""
    async with httpx2.AsyncClient(headers=AUTH, timeout=httpx2.Timeout(30, read=300)) as http:
        async with Client(streamable_http_client(gw.url(path), http_client=http), mode=mode, read_timeout_seconds=30) as c:
            yield c


async def eventually(gw: Gateway, check, timeout: float = 10.0) -> Scrape:
    """Scrapes until `check(scrape)` holds (a cancellation is counted when the gateway sees it)."""
    latest = scrape(gw)
    with anyio.move_on_after(timeout):
        while not check(latest):
            await anyio.sleep(0.05)
            latest = scrape(gw)
    return latest


# --- the tests ----------------------------------------------------------------------------------


def test_metrics_needs_the_token_like_every_route(metrics_gateway):
    gw = metrics_gateway
    assert httpx2.get(gw.url("/metrics"), timeout=10).status_code == 401
    refused = httpx2.get(gw.url("/metrics"), headers={"Authorization": "Bearer wrong"}, timeout=10)
    assert refused.status_code == 401, refused.text
    assert "gateway_" not in refused.text
    assert httpx2.get(gw.url("/metrics"), headers=AUTH, timeout=10).status_code == 200


def assert_families(s: Scrape, names) -> None:
    for name in names:
        assert name in s.families, f"{name} missing: {sorted(s.families)}"
        assert s.families[name].type == FAMILIES[name], (name, s.families[name].type)


def test_metrics_parse_and_have_the_state_families_from_the_start(metrics_gateway):
    s = scrape(metrics_gateway)
    # Families of events appear with their first series (a tool call, a proxied request).
    assert_families(s, [n for n in FAMILIES if n not in ("gateway_tool_calls", "gateway_tool_call_duration_seconds", "gateway_proxied_requests")])
    assert all(f.name.startswith("gateway_") for f in s.families.values()), sorted(s.families)
    # One state set per app: 1 for the state it is in, 0 for the others.
    for app in ["grocery-inventory", "echo"]:
        assert s.value("gateway_app_state", app=app, state="running") == 1, s.text
        assert s.value("gateway_app_state", app=app, state="failed") == 0, s.text
        assert s.total("gateway_app_state", app=app) == 1, s.text
        assert ("gateway_app_restarts_total", frozenset({"app": app}.items())) in s.samples, s.text
    for outcome in ["ok", "error", "cancelled"]:
        assert ("gateway_chat_turns_total", frozenset({"outcome": outcome}.items())) in s.samples, s.text
    for outcome in ["swapped", "refused", "failed_to_start"]:
        assert ("gateway_module_swaps_total", frozenset({"outcome": outcome}.items())) in s.samples, s.text


async def test_tool_call_counters_move_with_the_calls_made(metrics_gateway):
    gw = metrics_gateway
    before = scrape(gw)
    # The model side (/mcp): 2 ok, 1 isError and 1 without a result of echo, 1 ok of grocery, 1 built-in.
    async with client(gw, "/mcp", mode="auto") as c:
        for text in ["one", "two"]:
            result = await c.call_tool("echo.echo", {"text": text})
            assert not result.is_error, result
        assert (await c.call_tool("echo.fail", {"message": "nope"})).is_error
        # The app answers with a JSON-RPC error: no result at all.
        assert (await c.call_tool("echo.protocol_error", {})).is_error
        assert not (await c.call_tool("grocery.get_stores", {})).is_error
        assert not (await c.call_tool("gateway.apps", {})).is_error
    # The browser side (/apps/mcp/{appId}): counted as proxied requests, not as model tool calls.
    async with client(gw, "/apps/mcp/echo", mode="legacy") as c:
        assert not (await c.call_tool("echo", {"text": "browser"})).is_error
        assert (await c.call_tool("fail", {"message": "browser"})).is_error
        with pytest.raises(MCPError):
            await c.call_tool("protocol_error", {})
    async with client(gw, "/apps/mcp/grocery-inventory", mode="auto") as c:
        assert not (await c.call_tool("get_stores", {})).is_error
    after = scrape(gw)
    assert_families(after, FAMILIES)

    calls = "gateway_tool_calls_total"
    assert delta(before, after, calls, app="echo", tool="echo", outcome="ok") == 2, after.text
    assert delta(before, after, calls, app="echo", tool="fail", outcome="error") == 1, after.text
    assert delta(before, after, calls, app="echo", tool="protocol_error", outcome="failed") == 1, after.text
    assert delta(before, after, calls, app="grocery-inventory", tool="get_stores", outcome="ok") == 1, after.text
    assert delta(before, after, calls, app="builtin:gateway", tool="gateway.apps", outcome="ok") == 1, after.text
    assert after.total(calls) - before.total(calls) == 6, "only the /mcp calls are model tool calls"

    histogram = "gateway_tool_call_duration_seconds"
    assert delta(before, after, histogram + "_count", app="echo", tool="echo") == 2, after.text
    assert delta(before, after, histogram + "_count", app="echo", tool="fail") == 1, after.text
    assert delta(before, after, histogram + "_bucket", app="echo", tool="echo", le="+Inf") == 2, after.text
    assert delta(before, after, histogram + "_sum", app="echo", tool="echo") > 0, after.text

    proxied = "gateway_proxied_requests_total"
    assert delta(before, after, proxied, app="echo", method="tools/call", outcome="ok") == 1, after.text
    assert delta(before, after, proxied, app="echo", method="tools/call", outcome="tool_error") == 1, after.text
    assert delta(before, after, proxied, app="echo", method="tools/call", outcome="error") == 1, after.text
    assert delta(before, after, proxied, app="grocery-inventory", method="tools/call", outcome="ok") == 1, after.text
    # Each client's handshake: initialize (legacy) for echo, server/discover (auto) for grocery.
    assert delta(before, after, proxied, app="echo", method="initialize", outcome="ok") == 1, after.text
    assert delta(before, after, proxied, app="grocery-inventory", method="server/discover", outcome="ok") >= 1, after.text
    assert after.total(proxied, method="tools/call") - before.total(proxied, method="tools/call") == 4, after.text


async def test_unknown_apps_and_methods_keep_the_labels_bounded(metrics_gateway):
    gw = metrics_gateway
    before = scrape(gw)
    with pytest.raises(Exception):
        async with client(gw, "/apps/mcp/no-such-app-7f3", mode="legacy") as c:
            await c.list_tools()
    after = scrape(gw)
    assert delta(before, after, "gateway_proxied_requests_total", app="(unknown)", method="initialize", outcome="error") == 1, after.text
    assert "no-such-app-7f3" not in after.text


async def test_cancelled_calls_are_counted_as_cancelled(metrics_gateway):
    gw = metrics_gateway
    before = scrape(gw)
    async with client(gw, "/mcp", mode="legacy") as c:
        with anyio.move_on_after(0.5):
            await c.call_tool("echo.slow", {"ms": 30000})
    async with client(gw, "/apps/mcp/echo", mode="legacy") as c:
        with anyio.move_on_after(0.5):
            await c.call_tool("slow", {"ms": 30000})
    after = await eventually(
        gw,
        lambda s: delta(before, s, "gateway_tool_calls_total", app="echo", tool="slow", outcome="cancelled") >= 1
        and delta(before, s, "gateway_proxied_requests_total", app="echo", method="tools/call", outcome="cancelled") >= 1,
    )
    assert delta(before, after, "gateway_tool_calls_total", app="echo", tool="slow", outcome="cancelled") == 1, after.text
    assert delta(before, after, "gateway_tool_call_duration_seconds_count", app="echo", tool="slow") == 1, after.text
    assert delta(before, after, "gateway_proxied_requests_total", app="echo", method="tools/call", outcome="cancelled") == 1, after.text


def chat(gw: Gateway, message: str) -> list[dict]:
    """One chat turn to its end: its frames."""
    frames = []
    with httpx2.stream("POST", gw.url("/apps/chat"), headers=AUTH, json={"message": message}, timeout=60) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("data: "):
                frames.append(json.loads(line[len("data: "):]))
                if frames[-1]["type"] == "done":
                    break
    return frames


async def test_chat_turns_and_their_tool_calls_are_counted(metrics_gateway):
    gw = metrics_gateway
    before = scrape(gw)
    frames = chat(gw, "call tools")
    assert [f["type"] for f in frames if f["type"] in ("tool_result", "result", "error")] == ["tool_result", "tool_result", "result"], frames
    frames = chat(gw, "break, please")
    assert any(f["type"] == "error" for f in frames), frames
    after = scrape(gw)
    assert delta(before, after, "gateway_chat_turns_total", outcome="ok") == 1, after.text
    assert delta(before, after, "gateway_chat_turns_total", outcome="error") == 1, after.text
    # The agent's tool calls run through the same registry as /mcp's.
    assert delta(before, after, "gateway_tool_calls_total", app="echo", tool="echo", outcome="ok") == 1, after.text
    assert delta(before, after, "gateway_tool_calls_total", app="echo", tool="fail", outcome="error") == 1, after.text
    assert after.value("gateway_chat_turns_in_progress") == 0 and after.value("gateway_chat_sessions_active") == 0, after.text


async def test_a_turn_in_progress_shows_and_a_dropped_one_counts_as_cancelled(metrics_gateway):
    gw = metrics_gateway
    llm = gw.llm
    llm.waiting.clear()
    llm.release.clear()
    before = scrape(gw)
    stream = httpx2.stream("POST", gw.url("/apps/chat"), headers=AUTH, json={"message": "wait for me"}, timeout=60)
    response = stream.__enter__()
    try:
        assert response.status_code == 200
        assert await anyio.to_thread.run_sync(llm.waiting.wait, 20), "the turn never reached the model"
        during = scrape(gw)
        assert during.value("gateway_chat_turns_in_progress") == 1, during.text
        assert during.value("gateway_chat_sessions_active") == 1, during.text
    finally:
        stream.__exit__(None, None, None)  # the client goes away mid-turn
    after = await eventually(gw, lambda s: s.value("gateway_chat_turns_in_progress") == 0, timeout=30)
    llm.release.set()
    assert delta(before, after, "gateway_chat_turns_total", outcome="cancelled") == 1, after.text
    assert after.value("gateway_chat_sessions_active") == 0, after.text


def post_admin(gw: Gateway, path: str, body: dict | None = None) -> httpx2.Response:
    return httpx2.post(gw.url(path), headers=AUTH, json=body or {}, timeout=120)


async def test_restarts_and_module_swaps_are_counted(metrics_gateway):
    gw = metrics_gateway
    before = scrape(gw)

    # An operator's stop and start of echo: its state moves, and it restarted once.
    stopped = post_admin(gw, "/admin/mcpapps/echo/stop")
    assert stopped.status_code == 200, stopped.text
    s = scrape(gw)
    assert s.value("gateway_app_state", app="echo", state="stopped") == 1, s.text
    assert s.value("gateway_app_state", app="echo", state="running") == 0, s.text
    started = post_admin(gw, "/admin/mcpapps/echo/start")
    assert started.status_code == 200, started.text
    s = await eventually(gw, lambda s: delta(before, s, "gateway_app_restarts_total", app="echo") >= 1)
    assert delta(before, s, "gateway_app_restarts_total", app="echo") == 1, s.text
    assert delta(before, s, "gateway_app_restarts_total", app="grocery-inventory") == 0, s.text

    # A library the loader refuses: counted as refused, nothing restarts.
    bogus = gw.modules_dir / "libnot_a_module.so"
    bogus.write_text("not a shared library")
    refused = post_admin(gw, "/admin/module", {"path": str(bogus)})
    assert refused.status_code == 422, refused.text

    # A live swap to a copy of the module (its own file name): swapped, and every app restarts.
    copy = gw.modules_dir / "libmcpapp_plugin_metrics_copy.so"
    shutil.copy(MODULE_LIB, copy)
    swapped = post_admin(gw, "/admin/module", {"path": str(copy)})
    assert swapped.status_code == 200, swapped.text + "\n" + gw.logs()
    wait_running(gw, ["echo", "grocery-inventory"])
    after = await eventually(gw, lambda s: delta(before, s, "gateway_app_restarts_total", app="grocery-inventory") >= 1)

    assert delta(before, after, "gateway_module_swaps_total", outcome="refused") == 1, after.text
    assert delta(before, after, "gateway_module_swaps_total", outcome="swapped") == 1, after.text
    assert delta(before, after, "gateway_module_swaps_total", outcome="failed_to_start") == 0, after.text
    assert delta(before, after, "gateway_app_restarts_total", app="echo") == 2, after.text
    assert delta(before, after, "gateway_app_restarts_total", app="grocery-inventory") == 1, after.text
    for app in ["grocery-inventory", "echo"]:
        assert after.value("gateway_app_state", app=app, state="running") == 1, after.text
    # The counters of the calls made before the swap are the gateway's: they carry on.
    assert after.value("gateway_tool_calls_total", app="echo", tool="echo", outcome="ok") >= 3, after.text
    assert re.search(r"^gateway_module_swaps_total\{outcome=\"swapped\"\} 1(\.0)?$", after.text, re.M), after.text

"""The faithful relay of server-to-client flows (SPEC R42, issue 9 Must show 3) with the official
Python client (PyPI `mcp`).

The SAME test bodies run against three endpoints, each with both handshakes the client offers
(`mode="legacy"`: initialize-first, 2025-11-25, where the app's requests ride the POST's SSE stream;
`mode="auto"`: discover-first, 2026-07-28, where they come back as multi-round-trip "input required"
results):

- the test app directly, over its own Streamable HTTP (this validates the tests themselves);
- the gateway's `/apps/mcp/t` (a stdio app, its own tool names);
- the gateway's `/mcp` (an http app, names with its toolNamePrefix `th.`).

Checked: progress notifications before the result, log messages, sampling / elicitation / roots
requests answered by the client's callbacks (for a client without the capability: the tool's clear
error on 2025-11-25, the revision's -32021 refusal on 2026-07-28), and a client cancel observed by the
app itself.
"""

from __future__ import annotations

import re
import secrets
import subprocess
import threading
from dataclasses import dataclass

import anyio
import mcp_types as types
import pytest

from mcp import Client, MCPError

from conftest import TEST_APP_BIN, all_tool_names, free_port, gateway_with_apps

pytestmark = pytest.mark.anyio

# A missing relay must fail a test, not hang it.
CALL_TIMEOUT = 10.0
# How long the test app waits for the client's answer to its own request before a clear tool error.
APP_WAIT_MS = 5000


@dataclass(frozen=True)
class Endpoint:
    name: str
    url: str
    prefix: str
    model_side: bool  # /mcp: the model-side rule puts "Error: " before a tool error's text


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


def error_text(result, ep: Endpoint) -> str:
    text = text_of(result)
    return text.removeprefix("Error: ") if ep.model_side else text


@pytest.fixture(scope="module")
def direct_app():
    """`test-app --http 127.0.0.1:0`; yields its /mcp URL."""
    process = subprocess.Popen(
        [str(TEST_APP_BIN), "--http", "127.0.0.1:0", "--name", "relay-direct"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    found: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            match = re.search(r"listening on (http://\S+/mcp)", line)
            if match and not found:
                found.append(match.group(1))
                ready.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        if not ready.wait(20):
            raise RuntimeError("test-app did not start listening")
        yield found[0]
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.fixture(scope="module")
def relay_gateway():
    """A gateway with the test app twice: `t` over stdio and `th` over http."""
    port = free_port()
    common = {"version": "1.0.0", "startupTimeoutSeconds": 20, "requestTimeoutSeconds": 30}
    manifests = {
        "t": {"id": "t", "transport": "stdio", "command": str(TEST_APP_BIN), "arguments": ["--name", "relay-stdio"], "toolNamePrefix": "t.", **common},
        "th": {
            "id": "th",
            "transport": "http",
            "url": f"http://127.0.0.1:{port}/mcp",
            "command": str(TEST_APP_BIN),
            "arguments": ["--http", f"127.0.0.1:{port}", "--name", "relay-http"],
            "toolNamePrefix": "th.",
            **common,
        },
    }
    with gateway_with_apps("gateway-py-relay-", manifests) as gw:
        yield gw


ENDPOINT_IDS = ["direct", "apps-mcp-stdio", "mcp-http"]
MODES = ["legacy", "auto"]


@pytest.fixture(params=[(e, m) for e in ENDPOINT_IDS for m in MODES], ids=[f"{e}-{m}" for e in ENDPOINT_IDS for m in MODES])
def target(request) -> tuple[Endpoint, str]:
    which, mode = request.param
    if which == "direct":
        ep = Endpoint("test-app directly", request.getfixturevalue("direct_app"), "", False)
    else:
        gw = request.getfixturevalue("relay_gateway")
        if which == "apps-mcp-stdio":
            ep = Endpoint("/apps/mcp/t", gw.url("/apps/mcp/t"), "", False)
        else:
            ep = Endpoint("/mcp (th.)", gw.url("/mcp"), "th.", True)
    return ep, mode


def connect(target: tuple[Endpoint, str], **callbacks) -> Client:
    ep, mode = target
    # log_level: on 2026-07-28 logging is opt-in per request; without it no message is sent.
    return Client(ep.url, mode=mode, read_timeout_seconds=CALL_TIMEOUT, log_level="debug", **callbacks)


async def check_offered(client: Client, target: tuple[Endpoint, str], tool: str) -> None:
    """The harness must be right: the handshake the mode asks for (so that `auto` exercises the
    multi-round-trip path), and the tool offered at this endpoint under this name."""
    ep, mode = target
    expected = "2026-07-28" if mode == "auto" else "2025-11-25"
    assert client.protocol_version == expected, f"harness: {mode} negotiated {client.protocol_version} at {ep.name}"
    names = await all_tool_names(client)
    assert ep.prefix + tool in names, f"harness: {ep.prefix + tool} is not offered at {ep.name}: {names}"


async def test_progress_notifications_arrive_before_the_result(target):
    ep, _ = target
    events: list = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        events.append((progress, total, message))

    async with connect(target) as client:
        await check_offered(client, target, "progress")
        result = await client.call_tool(ep.prefix + "progress", {"steps": 3, "delayMs": 30}, progress_callback=on_progress)
        events.append("result")
    assert text_of(result) == "progress done: 3 steps", result
    assert events == [(1, 3, "step 1 of 3"), (2, 3, "step 2 of 3"), (3, 3, "step 3 of 3"), "result"], events


async def test_log_messages_arrive_before_the_result(target):
    ep, _ = target
    marker = f"relay-log-{secrets.token_hex(4)}"
    logs: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        if str(params.data).startswith(marker):
            logs.append(params)

    async with connect(target, logging_callback=on_log) as client:
        await check_offered(client, target, "log")
        result = await client.call_tool(ep.prefix + "log", {"level": "warning", "message": marker, "count": 2})
        at_result = len(logs)
        assert not result.is_error, text_of(result)
        assert "log: sent 2 message" in text_of(result), text_of(result)

        async def two() -> bool:
            return len(logs) >= 2

        with anyio.move_on_after(3.0):
            while not await two():
                await anyio.sleep(0.05)
    # Assertions outside the client's context: a failure reads as itself, not as an exception group.
    assert len(logs) >= 2, f"2 log messages expected within 3 s after the result, got {logs}"
    assert at_result == 2, f"only {at_result} of the 2 log messages had arrived when the result did"
    assert [(m.level, m.logger, m.data) for m in logs] == [
        ("warning", "test-app", f"{marker} [1/2]"),
        ("warning", "test-app", f"{marker} [2/2]"),
    ]


async def test_sampling_is_answered_by_the_client_callback(target):
    ep, _ = target
    asked: list[types.CreateMessageRequestParams] = []

    async def sampling(context, params: types.CreateMessageRequestParams):
        asked.append(params)
        return types.CreateMessageResult(
            model="relay-model-7",
            role="assistant",
            content=types.TextContent(type="text", text="forty-two"),
            stop_reason="endTurn",
        )

    async with connect(target, sampling_callback=sampling) as client:
        await check_offered(client, target, "sample")
        result = await client.call_tool(ep.prefix + "sample", {"prompt": "What is six times seven?", "maxTokens": 20, "timeoutMs": APP_WAIT_MS})
    assert len(asked) == 1, f"the sampling callback was called {len(asked)} times; result: {result}"
    assert asked[0].messages[0].content.text == "What is six times seven?"
    assert asked[0].max_tokens == 20
    assert not result.is_error, text_of(result)
    assert "forty-two" in text_of(result) and "relay-model-7" in text_of(result), text_of(result)
    assert result.structured_content == {"text": "forty-two", "model": "relay-model-7", "stopReason": "endTurn"}


async def test_elicitation_form_with_defaults_and_enum_is_answered_by_the_client_callback(target):
    ep, _ = target
    asked: list = []

    async def elicit(context, params):
        asked.append(params)
        return types.ElicitResult(action="accept", content={"name": "Grace", "color": "green", "count": 7})

    async with connect(target, elicitation_callback=elicit) as client:
        await check_offered(client, target, "elicit")
        result = await client.call_tool(ep.prefix + "elicit", {"message": "Pick a colour", "timeoutMs": APP_WAIT_MS})
    assert len(asked) == 1, f"the elicitation callback was called {len(asked)} times; result: {result}"
    form = asked[0]
    assert form.message == "Pick a colour"
    assert getattr(form, "mode", "form") in (None, "form")
    props = form.requested_schema["properties"]
    assert props["color"]["enum"] == ["red", "green", "blue"], form.requested_schema
    assert props["color"]["default"] == "red"
    assert props["name"]["type"] == "string" and props["name"]["default"] == "Ada"
    assert props["count"]["type"] == "number" and props["count"]["default"] == 3
    assert form.requested_schema["required"] == ["color"]
    assert not result.is_error, text_of(result)
    assert "action=accept" in text_of(result) and "green" in text_of(result), text_of(result)
    assert result.structured_content == {"action": "accept", "content": {"name": "Grace", "color": "green", "count": 7}}


async def test_roots_are_answered_by_the_client_callback(target):
    ep, _ = target
    asked = 0
    roots = [types.Root(uri="file:///tmp/relay-root", name="relay root"), types.Root(uri="file:///srv/data", name="data")]

    async def list_roots(context):
        nonlocal asked
        asked += 1
        return types.ListRootsResult(roots=roots)

    async with connect(target, list_roots_callback=list_roots) as client:
        await check_offered(client, target, "roots")
        result = await client.call_tool(ep.prefix + "roots", {"timeoutMs": APP_WAIT_MS})
    assert asked == 1, f"the roots callback was called {asked} times; result: {result}"
    assert not result.is_error, text_of(result)
    assert result.structured_content == {
        "roots": [{"uri": "file:///tmp/relay-root", "name": "relay root"}, {"uri": "file:///srv/data", "name": "data"}]
    }


# What each tool needs, as `requiredCapabilities` names it in a -32021 refusal.
REQUIRED_CAPABILITY = {"sample": "sampling", "elicit": "elicitation", "roots": "roots"}


async def test_a_client_without_the_capabilities_is_refused_as_its_revision_specifies(target):
    """2025-11-25 (legacy): the app's question is declined, and the tool's clear error comes back.
    2026-07-28 (auto): the call is refused with JSON-RPC error -32021 (Missing Required Client
    Capability) naming the capability in `data.requiredCapabilities` (issue 10, Must show 4) —
    except, through the gateway, a roots question: apps ask for roots on their own account too
    (server-everything does right after the handshake), and over stdio nothing ties the question
    to a call, so the gateway declines it to the app and the call goes on (the legacy outcome)."""
    ep, mode = target
    outcomes: dict[str, object] = {}
    async with connect(target) as client:
        await check_offered(client, target, "sample")
        for tool, args in [("sample", {"prompt": "anyone there?", "timeoutMs": APP_WAIT_MS}), ("elicit", {"timeoutMs": APP_WAIT_MS}), ("roots", {"timeoutMs": APP_WAIT_MS})]:
            try:
                outcomes[tool] = await client.call_tool(ep.prefix + tool, args)
            except MCPError as e:
                outcomes[tool] = e
    # Every tool's outcome is checked, so that one run shows all the differences.
    problems = []
    for tool, outcome in outcomes.items():
        declined_to_the_app = mode == "legacy" or (tool == "roots" and ep.name != "test-app directly")
        if not declined_to_the_app:
            if not isinstance(outcome, MCPError):
                problems.append(f"{tool}: expected a -32021 refusal, the call ran: {outcome}")
                continue
            required = (outcome.data or {}).get("requiredCapabilities") if isinstance(outcome.data, dict) else None
            if outcome.code != types.MISSING_REQUIRED_CLIENT_CAPABILITY:
                problems.append(f"{tool}: expected code -32021, got {outcome.code} {outcome.message!r} {outcome.data!r}")
            elif not isinstance(required, dict) or required.get(REQUIRED_CAPABILITY[tool]) is None:
                problems.append(f"{tool}: data.requiredCapabilities should name {REQUIRED_CAPABILITY[tool]}: {outcome.data!r}")
        else:
            if isinstance(outcome, MCPError):
                problems.append(f"{tool}: expected the tool's own error, got JSON-RPC error {outcome.code} {outcome.message!r}")
                continue
            text = error_text(outcome, ep)
            if not outcome.is_error or not text.startswith(f"{tool}: ") or not re.search(r"cannot|capability|not support|failed", text):
                problems.append(f"{tool}: expected the tool's clear error, got {outcome}")
    assert problems == [], f"{ep.name} ({mode}):\n" + "\n".join(problems)


async def test_a_client_cancel_stops_the_call_in_the_app(target):
    ep, _ = target
    async with connect(target) as client:
        await check_offered(client, target, "cancellable")

        async def count() -> dict:
            result = await client.call_tool(ep.prefix + "cancellations", {})
            assert not result.is_error, text_of(result)
            return result.structured_content

        before = await count()
        finished = None
        with anyio.move_on_after(0.5):
            finished = await client.call_tool(ep.prefix + "cancellable", {"ms": 30000})
        assert finished is None, f"the call was not cancelled: {finished}"

        async def observed():
            now = await count()
            return now if now["count"] > before["count"] else None

        seen = None
        with anyio.move_on_after(5.0):
            while not (seen := await observed()):
                await anyio.sleep(0.05)
        after = await count()
    # Assertions outside the client's context: a failure reads as itself, not as an exception group.
    assert seen, f"the app did not observe the cancellation within 5 s: cancellations went from {before} to {after}"
    assert seen["last"]["tool"] == "cancellable", seen
    assert seen["last"]["afterMs"] < 10_000, seen

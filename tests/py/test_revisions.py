"""The 2026-07-28 revision on `/apps/mcp/{appId}` and `/mcp` (issue 10), with the official Python
client (PyPI `mcp` 2.x, `mode="auto"`: discover-first, 2026-07-28).

- Must show 2, first half: an app that speaks ONLY 2025-11-25 behind `/apps/mcp/{id}` — the official
  npm `@modelcontextprotocol/server-everything` (TypeScript SDK 1.x, initialize-first), run as a
  stdio app — is fully usable by a 2026-07-28 client: tools listed and called, resources read,
  prompts listed and got, arguments completed, and the app's elicitation and sampling requests
  answered by the client's callbacks through `input_required` results (checked round by round).
  (The second half — a 2025-11-25 client against a 2026-07-28 app — is tests/js/revisions.test.mjs.)
- Must show 3: `subscriptions/listen` on `/apps/mcp/{id}` receives `notifications/tools/list_changed`
  when the app's tool list changes (an app reached initialize-first and one reached discover-first);
  on `/mcp` when an app starts or stops (hot discovery: an app folder added to and removed from the
  watched discovery path; and an app process killed); a listen whose filter leaves tools out
  receives none of them (counted on the wire, beneath the client's own filtering).
- Must show 4: a tool that needs sampling, called by a 2026-07-28 client that did not declare
  sampling, is refused with JSON-RPC error -32021 and `data.requiredCapabilities.sampling`, on both
  endpoints (and the same call with a sampling-capable client succeeds).

Every wait is bounded: a missing notification or relay fails the test instead of hanging it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import anyio
import mcp_types as types
import pytest

from mcp import Client, MCPError
from mcp.client.subscriptions import ResourceUpdated, ResourcesListChanged, ToolsListChanged

from conftest import REPO, TEST_APP_BIN, all_tool_names, gateway_with_apps

pytestmark = pytest.mark.anyio

CALL_TIMEOUT = 15.0
# How long the test app waits for the client's answer to its own request before a clear tool error.
APP_WAIT_MS = 5000
# How long a change may take to reach a listener (the app's notification, the gateway's relay).
NOTIFY_TIMEOUT = 10.0
# Hot discovery: the watcher's debounce (0.5 s), the reload and the app's start.
DISCOVERY_TIMEOUT = 30.0
# How long a listener must stay quiet to show that a filter excluded something.
QUIET_SECONDS = 1.5

MODERN = "2026-07-28"
EVERYTHING_DIST = REPO / "tests/js/node_modules/@modelcontextprotocol/server-everything/dist"
EVERYTHING_ENTRY = EVERYTHING_DIST / "index.js"


def everything_manifest() -> dict:
    """The official MCP "everything" reference server (npm, TypeScript SDK 1.x) as a stdio app."""
    node = shutil.which("node")
    if node is None or not EVERYTHING_ENTRY.exists():
        raise RuntimeError(f"node and {EVERYTHING_ENTRY} are needed (npm ci in tests/js)")
    return {
        "id": "everything",
        "version": "2026.8.31",
        "transport": "stdio",
        "command": node,
        "arguments": [str(EVERYTHING_ENTRY), "stdio"],
        "toolNamePrefix": "ev.",
        "startupTimeoutSeconds": 30,
        "requestTimeoutSeconds": 30,
    }


def app_manifest(app_id: str, *, modern: bool = False, name: str | None = None, args: tuple[str, ...] = ()) -> dict:
    manifest = {
        "id": app_id,
        "version": "1.0.0",
        "transport": "stdio",
        "command": str(TEST_APP_BIN),
        "arguments": ["--name", name or f"rev-{app_id}", *args],
        "toolNamePrefix": f"{app_id}.",
        "startupTimeoutSeconds": 20,
        "requestTimeoutSeconds": 30,
    }
    if modern:
        # The gateway then reaches the app discover-first (README, McpCompatibility).
        manifest["protocolVersion"] = MODERN
    return manifest


@pytest.fixture(scope="module")
def revisions_gateway():
    """server-everything (2025-11-25 only), the test app reached initialize-first (`t`) and the
    test app reached discover-first (`t26`)."""
    manifests = {
        "everything": everything_manifest(),
        "t": app_manifest("t"),
        "t26": app_manifest("t26", modern=True),
        # Apps that accept resource subscriptions (`touch_resource` sends resources/updated).
        "r": app_manifest("r", args=("--resource-updates",)),
        "r26": app_manifest("r26", modern=True, args=("--resource-updates",)),
    }
    # server-everything asks its client for roots/list 350 ms after `initialized` (syncRoots);
    # over stdio the gateway gives it to the call in flight, and declines it to the app when that
    # call's client has no roots — the call itself goes on (mcp_relay.rs). No wait is needed.
    with gateway_with_apps("gateway-py-revisions-", manifests) as gw:
        yield gw


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


def connect(url: str, **kwargs) -> Client:
    return Client(url, mode="auto", read_timeout_seconds=CALL_TIMEOUT, **kwargs)


def assert_modern(client: Client, where: str) -> None:
    assert client.protocol_version == MODERN, f"harness: auto mode negotiated {client.protocol_version} at {where}"


class Rounds:
    """Records every `tools/call` round the client's input-required driver sends (the arguments'
    `input_responses` and what the round returned), so a test can show that the app's request
    reached the client as an `input_required` result and the answer went back on the retry."""

    def __init__(self, client: Client):
        self.rounds: list[tuple[dict | None, object]] = []
        session = client.session
        original = session.call_tool

        async def spy(name, arguments=None, **kwargs):
            result = await original(name, arguments, **kwargs)
            self.rounds.append((kwargs.get("input_responses"), result))
            return result

        session.call_tool = spy  # type: ignore[method-assign]

    def problems(self, method: str) -> list[str]:
        """What is wrong with the rounds for one question of `method`: an `input_required` first
        round asking exactly that, then a retry carrying one answer and ending in a result."""
        found = []
        if len(self.rounds) != 2:
            return [f"expected 2 rounds (input_required, then the answered retry), got {len(self.rounds)}: {self.rounds}"]
        (first_responses, first), (second_responses, second) = self.rounds
        if first_responses:
            found.append(f"the first round already carried inputResponses: {first_responses}")
        if not isinstance(first, types.InputRequiredResult):
            found.append(f"the first round was not an input_required result: {first!r}")
        else:
            methods = [r.method for r in (first.input_requests or {}).values()]
            if methods != [method]:
                found.append(f"the input_required result asked {methods}, expected [{method!r}]")
        if not second_responses or len(second_responses) != 1:
            found.append(f"the retry carried {second_responses!r}, expected one answer")
        if not isinstance(second, types.CallToolResult):
            found.append(f"the retry did not end in a tool result: {second!r}")
        return found


# ---------------------------------------------------------------------------------------------
# Must show 2: a 2025-11-25-only app (server-everything) used by a 2026-07-28 client.


async def test_a_2025_only_app_lists_and_calls_tools_for_a_2026_client(revisions_gateway):
    url = revisions_gateway.url("/apps/mcp/everything")
    async with connect(url) as client:
        assert_modern(client, url)
        names = await all_tool_names(client)
        result = await client.call_tool("echo", {"message": "hello across revisions"})
        summed = await client.call_tool("get-sum", {"a": 19, "b": 23})
    # The app's own names (no prefix) on /apps/mcp.
    for tool in ["echo", "get-sum", "get-tiny-image", "trigger-long-running-operation"]:
        assert tool in names, f"{tool} missing from {names}"
    assert not result.is_error, text_of(result)
    assert text_of(result) == "Echo: hello across revisions", result
    assert not summed.is_error, text_of(summed)
    assert "42" in text_of(summed), text_of(summed)


async def test_a_2025_only_app_serves_resources_to_a_2026_client(revisions_gateway):
    url = revisions_gateway.url("/apps/mcp/everything")
    doc_uri = "demo://resource/static/document/instructions.md"
    async with connect(url) as client:
        assert_modern(client, url)
        listed = await client.list_resources()
        templates = await client.list_resource_templates()
        doc = await client.read_resource(doc_uri)
        dynamic = await client.read_resource("demo://resource/dynamic/text/7")
    uris = [r.uri for r in listed.resources]
    assert doc_uri in uris, uris
    assert "demo://resource/dynamic/text/{resourceId}" in [t.uri_template for t in templates.resource_templates], templates
    assert len(doc.contents) == 1, doc
    assert doc.contents[0].mime_type == "text/markdown"
    # Byte for byte the file the app serves.
    assert doc.contents[0].text == (EVERYTHING_DIST / "docs/instructions.md").read_text(encoding="utf-8")
    assert dynamic.contents[0].uri == "demo://resource/dynamic/text/7"
    assert dynamic.contents[0].text.startswith("Resource 7: This is a plaintext resource created at"), dynamic


async def test_a_2025_only_app_serves_prompts_and_completions_to_a_2026_client(revisions_gateway):
    url = revisions_gateway.url("/apps/mcp/everything")
    ref = types.PromptReference(name="completable-prompt")
    async with connect(url) as client:
        assert_modern(client, url)
        prompts = await client.list_prompts()
        weather = await client.get_prompt("args-prompt", {"city": "Lyon", "state": "Rhône"})
        promote = await client.get_prompt("completable-prompt", {"department": "Sales", "name": "Eve"})
        departments = await client.complete(ref, {"name": "department", "value": "S"})
        # The second argument's completion depends on the first (context arguments).
        members = await client.complete(ref, {"name": "name", "value": ""}, context_arguments={"department": "Marketing"})
        resource_id = await client.complete(
            types.ResourceTemplateReference(uri="demo://resource/dynamic/text/{resourceId}"), {"name": "resourceId", "value": "12"}
        )
    by_name = {p.name: p for p in prompts.prompts}
    assert {"simple-prompt", "args-prompt", "completable-prompt", "resource-prompt"} <= set(by_name), list(by_name)
    args = {a.name: a.required for a in by_name["args-prompt"].arguments}
    assert args == {"city": True, "state": False}, args
    assert weather.messages[0].role == "user"
    assert weather.messages[0].content.text == "What's weather in Lyon, Rhône?", weather
    assert promote.messages[0].content.text == "Please promote Eve to the head of the Sales team.", promote
    assert departments.completion.values == ["Sales", "Support"], departments
    assert members.completion.values == ["Grace", "Henry", "Iris"], members
    assert resource_id.completion.values == ["12"], resource_id


async def test_a_2025_only_apps_sampling_request_is_answered_through_input_required(revisions_gateway):
    url = revisions_gateway.url("/apps/mcp/everything")
    asked: list[types.CreateMessageRequestParams] = []

    async def sampling(context, params: types.CreateMessageRequestParams):
        asked.append(params)
        return types.CreateMessageResult(
            model="revisions-model-3",
            role="assistant",
            content=types.TextContent(type="text", text="four"),
            stop_reason="endTurn",
        )

    async with connect(url, sampling_callback=sampling) as client:
        assert_modern(client, url)
        # server-everything registers this tool only for a client that declared sampling: the
        # gateway declares it to apps on its callers' behalf.
        assert "trigger-sampling-request" in await all_tool_names(client)
        rounds = Rounds(client)
        result = await client.call_tool("trigger-sampling-request", {"prompt": "What is two plus two?", "maxTokens": 30})
    assert len(asked) == 1, f"the sampling callback was called {len(asked)} times; result: {result}"
    assert asked[0].messages[0].role == "user"
    assert asked[0].messages[0].content.text == "Resource trigger-sampling-request context: What is two plus two?"
    assert asked[0].system_prompt == "You are a helpful test server."
    assert asked[0].max_tokens == 30
    assert rounds.problems("sampling/createMessage") == []
    assert not result.is_error, text_of(result)
    text = text_of(result)
    assert text.startswith("LLM sampling result:"), text
    # The app reports the answer it received, as JSON: the client's answer reached the app intact.
    answer = json.loads(text.split("\n", 1)[1])
    assert answer["model"] == "revisions-model-3", answer
    assert answer["role"] == "assistant"
    assert answer["content"] == {"type": "text", "text": "four"}, answer
    assert answer.get("stopReason") == "endTurn", answer


async def test_a_2025_only_apps_elicitation_is_answered_through_input_required(revisions_gateway):
    url = revisions_gateway.url("/apps/mcp/everything")
    asked: list = []

    async def elicit(context, params):
        asked.append(params)
        return types.ElicitResult(
            action="accept",
            content={"name": "Ada Lovelace", "check": True, "email": "ada@example.com", "integer": 7},
        )

    async with connect(url, elicitation_callback=elicit) as client:
        assert_modern(client, url)
        assert "trigger-elicitation-request" in await all_tool_names(client)
        rounds = Rounds(client)
        result = await client.call_tool("trigger-elicitation-request", {})
    assert len(asked) == 1, f"the elicitation callback was called {len(asked)} times; result: {result}"
    form = asked[0]
    assert form.message == "Please provide inputs for the following fields:"
    assert getattr(form, "mode", "form") in (None, "form")
    props = form.requested_schema["properties"]
    assert form.requested_schema["required"] == ["name"], form.requested_schema
    assert props["email"] == {
        "title": "String with email format",
        "type": "string",
        "format": "email",
        "description": "Your email address (will be verified, and never shared with anyone else)",
    }, props["email"]
    assert props["integer"]["default"] == 42 and props["integer"]["type"] == "integer"
    assert props["untitledSingleSelectEnum"]["enum"] == ["Monica", "Rachel", "Joey", "Chandler", "Ross", "Phoebe"]
    assert rounds.problems("elicitation/create") == []
    assert not result.is_error, text_of(result)
    text = text_of(result)
    assert "User provided the requested information!" in text, text
    for line in ["- Name: Ada Lovelace", "- Agreed to terms: true", "- Email: ada@example.com", "- Favorite Integer: 7"]:
        assert line in text, f"{line!r} not in {text!r}"


# ---------------------------------------------------------------------------------------------
# Must show 3: subscriptions/listen.


ENDED = "the subscription ended"


async def next_event(subscription, timeout: float):
    """The subscription's next event, None when none arrives within `timeout` seconds, or ENDED
    when the server closed the subscription."""
    with anyio.move_on_after(timeout):
        try:
            return await subscription.__anext__()
        except StopAsyncIteration:
            return ENDED
    return None


async def drain(subscription, quiet: float = QUIET_SECONDS) -> list:
    """Consumes events until none arrives for `quiet` seconds (changes of earlier steps)."""
    drained = []
    for _ in range(100):
        event = await next_event(subscription, quiet)
        if event is None or event is ENDED:
            return drained
        drained.append(event)
    raise AssertionError(f"the subscription never went quiet: {drained[:10]}…")


async def wait_tools(client: Client, predicate, timeout: float) -> list[str] | None:
    """Polls the (uncached) tool list until `predicate(names)` holds; the names, or None."""
    with anyio.move_on_after(timeout):
        while True:
            names, cursor = [], None
            while True:
                page = await client.list_tools(cursor=cursor, cache_mode="refresh")
                names.extend(t.name for t in page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
            if predicate(names):
                return names
            await anyio.sleep(0.1)
    return None


class ToolChangesSeen:
    """A message handler counting every `notifications/tools/list_changed` the client receives, on
    any stream (the client's own filtering of listen events is bypassed)."""

    def __init__(self):
        self.count = 0

    async def __call__(self, message) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.count += 1


@pytest.mark.parametrize("app", ["t", "t26"], ids=["app-initialize-first", "app-discover-first"])
async def test_listen_on_apps_mcp_gets_tools_list_changed_when_the_apps_tools_change(revisions_gateway, app):
    url = revisions_gateway.url(f"/apps/mcp/{app}")
    new_tool = f"dyn_{app}_{os.getpid()}_listen"
    async with connect(url) as listener, connect(url) as actor:
        assert_modern(listener, url)
        async with listener.listen(tools_list_changed=True) as sub:
            honored = sub.honored
            stale = await drain(sub)
            added = await actor.call_tool("add_tool", {"name": new_tool})
            event = await next_event(sub, NOTIFY_TIMEOUT)
        names = await wait_tools(listener, lambda n: new_tool in n, NOTIFY_TIMEOUT)
    assert honored.tools_list_changed, f"the acknowledgement did not honour toolsListChanged: {honored}"
    assert stale == [], f"events before any change: {stale}"
    assert not added.is_error, text_of(added)
    assert isinstance(event, ToolsListChanged), f"no notifications/tools/list_changed within {NOTIFY_TIMEOUT} s of add_tool on {url} (got {event!r})"
    assert names is not None and new_tool in names, f"{new_tool} never appeared in tools/list at {url}"


@pytest.mark.parametrize("app", ["t", "t26"], ids=["app-initialize-first", "app-discover-first"])
async def test_a_listen_without_tools_in_its_filter_gets_no_tools_list_changed_on_apps_mcp(revisions_gateway, app):
    url = revisions_gateway.url(f"/apps/mcp/{app}")
    new_tool = f"dyn_{app}_{os.getpid()}_filter"
    seen = ToolChangesSeen()
    async with connect(url, message_handler=seen) as prompts_only, connect(url) as tools_listener, connect(url) as actor:
        async with prompts_only.listen(prompts_list_changed=True) as excluded, tools_listener.listen(tools_list_changed=True) as control:
            honored = excluded.honored
            await drain(control)
            seen.count = 0
            added = await actor.call_tool("add_tool", {"name": new_tool})
            # The control listener shows the change was announced; then the filtered one stays quiet.
            control_event = await next_event(control, NOTIFY_TIMEOUT)
            leaked = await next_event(excluded, QUIET_SECONDS)
            await anyio.sleep(0.2)
            raw_tool_notifications = seen.count
    assert not added.is_error, text_of(added)
    assert isinstance(control_event, ToolsListChanged), f"control: no tools/list_changed within {NOTIFY_TIMEOUT} s at {url}"
    assert not honored.tools_list_changed, f"a prompts-only listen was acknowledged with toolsListChanged: {honored}"
    assert leaked is None, f"the prompts-only subscription delivered {leaked!r}"
    assert raw_tool_notifications == 0, f"the prompts-only client received {raw_tool_notifications} notifications/tools/list_changed"


@pytest.fixture(scope="module")
def discovery_gateway():
    """A gateway with one app, whose watched apps folder the tests add apps to and remove them from."""
    with gateway_with_apps("gateway-py-revisions-discovery-", {"base": app_manifest("base")}) as gw:
        yield gw


def add_app_folder(gw, app_id: str) -> Path:
    """Adds an app folder to the watched discovery path in one step (a rename), as hot discovery sees it."""
    staging = gw.apps_dir.parent / f"staging-{app_id}"
    staging.mkdir()
    (staging / "openclaw.mcpapp.json").write_text(json.dumps(app_manifest(app_id), indent=2))
    target = gw.apps_dir / app_id
    staging.rename(target)
    return target


async def test_listen_on_mcp_gets_tools_list_changed_when_an_app_starts_and_stops(discovery_gateway):
    gw = discovery_gateway
    url = gw.url("/mcp")
    app_id = f"late{os.getpid()}"
    tool = f"{app_id}.echo"
    folder = None
    async with connect(url) as client:
        assert_modern(client, url)
        # Running (per /apps/health) comes a moment before the registry offers the app's tools.
        assert await wait_tools(client, lambda n: "base.echo" in n, NOTIFY_TIMEOUT), "harness: the base app is not offered on /mcp"
        async with client.listen(tools_list_changed=True) as sub:
            honored = sub.honored
            stale = await drain(sub)
            folder = add_app_folder(gw, app_id)
            started = await next_event(sub, DISCOVERY_TIMEOUT)
            with_app = await wait_tools(client, lambda n: tool in n, DISCOVERY_TIMEOUT)
            # Changes of the start (the app may be announced more than once) before the stop.
            await drain(sub)
            shutil.rmtree(folder)
            stopped = await next_event(sub, DISCOVERY_TIMEOUT)
            without_app = await wait_tools(client, lambda n: tool not in n, DISCOVERY_TIMEOUT)
    assert honored.tools_list_changed, f"the acknowledgement did not honour toolsListChanged: {honored}"
    assert stale == [], f"events before any change: {stale}"
    assert isinstance(started, ToolsListChanged), f"no tools/list_changed within {DISCOVERY_TIMEOUT} s of adding app {app_id}\n{gw.logs()[-4000:]}"
    assert with_app is not None, f"{tool} never appeared on /mcp\n{gw.logs()[-4000:]}"
    assert isinstance(stopped, ToolsListChanged), f"no tools/list_changed within {DISCOVERY_TIMEOUT} s of removing app {app_id}\n{gw.logs()[-4000:]}"
    assert without_app is not None, f"{tool} was never withdrawn from /mcp"


async def test_listen_on_mcp_gets_tools_list_changed_when_an_app_process_dies(discovery_gateway, tmp_path):
    """An app that stops by itself (its process killed): the change is announced, and supervision
    brings the app's tools back."""
    gw = discovery_gateway
    url = gw.url("/mcp")
    app_id = f"victim{os.getpid()}"
    pid_file = tmp_path / "victim.pid"
    manifest = app_manifest(app_id)
    manifest["arguments"] += ["--pid-file", str(pid_file)]
    # A confined app (SPEC R48) writes only what its manifest declares: the file, made now.
    pid_file.write_text("")
    manifest["permissions"] = {"filesystem": {"write": [str(pid_file)]}}
    staging = gw.apps_dir.parent / f"staging-{app_id}"
    staging.mkdir()
    (staging / "openclaw.mcpapp.json").write_text(json.dumps(manifest, indent=2))
    staging.rename(gw.apps_dir / app_id)
    tool = f"{app_id}.echo"
    try:
        gw.wait_running([app_id], timeout=DISCOVERY_TIMEOUT)
        async with connect(url) as client:
            assert await wait_tools(client, lambda n: tool in n, NOTIFY_TIMEOUT), f"harness: {tool} is not offered on /mcp"
            async with client.listen(tools_list_changed=True) as sub:
                await drain(sub)
                os.kill(int(pid_file.read_text().strip()), signal.SIGKILL)
                lost = await next_event(sub, NOTIFY_TIMEOUT)
                await drain(sub, quiet=0.5)
                # Supervision restarts it; its tools come back, announced again.
                back = await wait_tools(client, lambda n: tool in n, DISCOVERY_TIMEOUT)
    finally:
        shutil.rmtree(gw.apps_dir / app_id, ignore_errors=True)
    assert isinstance(lost, ToolsListChanged), f"no tools/list_changed within {NOTIFY_TIMEOUT} s of killing {app_id}\n{gw.logs()[-4000:]}"
    assert back is not None, f"{tool} did not come back after the restart"


async def test_a_listen_without_tools_in_its_filter_gets_no_tools_list_changed_on_mcp(discovery_gateway):
    gw = discovery_gateway
    url = gw.url("/mcp")
    app_id = f"filtered{os.getpid()}"
    seen = ToolChangesSeen()
    try:
        async with connect(url, message_handler=seen) as prompts_only, connect(url) as tools_listener:
            async with prompts_only.listen(prompts_list_changed=True, resources_list_changed=True) as excluded, tools_listener.listen(
                tools_list_changed=True
            ) as control:
                honored = excluded.honored
                await drain(control)
                seen.count = 0
                add_app_folder(gw, app_id)
                control_event = await next_event(control, DISCOVERY_TIMEOUT)
                # Let every announcement of the start go out before looking at the filtered client.
                await wait_tools(tools_listener, lambda n: f"{app_id}.echo" in n, DISCOVERY_TIMEOUT)
                await drain(control)
                leaked = [e for e in [await next_event(excluded, 0.2)] if isinstance(e, ToolsListChanged)]
                raw_tool_notifications = seen.count
    finally:
        shutil.rmtree(gw.apps_dir / app_id, ignore_errors=True)
    assert isinstance(control_event, ToolsListChanged), f"control: no tools/list_changed within {DISCOVERY_TIMEOUT} s of adding {app_id}"
    assert not honored.tools_list_changed, f"a prompts/resources-only listen was acknowledged with toolsListChanged: {honored}"
    assert leaked == [], f"the prompts/resources-only subscription delivered {leaked}"
    assert raw_tool_notifications == 0, f"the prompts/resources-only client received {raw_tool_notifications} notifications/tools/list_changed"


# ---------------------------------------------------------------------------------------------
# Must show 4: a tool that needs sampling, a 2026-07-28 client that did not declare it: -32021.

REFUSAL_CASES = [
    # (endpoint path, tool name there, arguments)
    ("/apps/mcp/t", "sample", {"prompt": "anyone there?", "timeoutMs": APP_WAIT_MS}),
    ("/mcp", "t.sample", {"prompt": "anyone there?", "timeoutMs": APP_WAIT_MS}),
    ("/apps/mcp/t26", "sample", {"prompt": "anyone there?", "timeoutMs": APP_WAIT_MS}),
    ("/mcp", "t26.sample", {"prompt": "anyone there?", "timeoutMs": APP_WAIT_MS}),
    ("/apps/mcp/everything", "trigger-sampling-request", {"prompt": "anyone there?"}),
    ("/mcp", "ev.trigger-sampling-request", {"prompt": "anyone there?"}),
]
REFUSAL_IDS = [
    "apps-mcp-app-initialize-first",
    "mcp-app-initialize-first",
    "apps-mcp-app-discover-first",
    "mcp-app-discover-first",
    "apps-mcp-server-everything",
    "mcp-server-everything",
]


@pytest.mark.parametrize(("path", "tool", "args"), REFUSAL_CASES, ids=REFUSAL_IDS)
async def test_a_sampling_tool_is_refused_with_32021_for_a_client_without_sampling(revisions_gateway, path, tool, args):
    url = revisions_gateway.url(path)
    refused: MCPError | None = None
    result = None
    async with connect(url) as client:
        assert_modern(client, url)
        assert await wait_tools(client, lambda n: tool in n, NOTIFY_TIMEOUT), f"harness: {tool} is not offered at {path}"
        try:
            result = await client.call_tool(tool, args)
        except MCPError as e:
            refused = e
    assert refused is not None, f"{tool} at {path} ran instead of being refused: {result}"
    assert refused.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY == -32021, f"{tool} at {path}: {refused.code} {refused.message} {refused.data}"
    data = refused.data or {}
    assert isinstance(data, dict) and isinstance(data.get("requiredCapabilities"), dict), f"data: {data!r}"
    assert data["requiredCapabilities"].get("sampling") is not None, f"requiredCapabilities without sampling: {data}"


@pytest.mark.parametrize(("path", "tool", "args"), REFUSAL_CASES, ids=REFUSAL_IDS)
async def test_the_same_sampling_tool_runs_for_a_client_that_declared_sampling(revisions_gateway, path, tool, args):
    """The control for the refusal: the tool works, it is the capability that decides."""
    url = revisions_gateway.url(path)
    asked = 0

    async def sampling(context, params):
        nonlocal asked
        asked += 1
        return types.CreateMessageResult(model="control-model", role="assistant", content=types.TextContent(type="text", text="yes"))

    async with connect(url, sampling_callback=sampling) as client:
        assert_modern(client, url)
        result = await client.call_tool(tool, args)
    assert asked == 1, f"the sampling callback was called {asked} times; result: {result}"
    assert not result.is_error, text_of(result)
    assert "control-model" in text_of(result), text_of(result)


class ResourceUpdatesSeen:
    """A message handler recording the URI of every `notifications/resources/updated` the client
    receives, on any stream (the client's own filtering of listen events is bypassed)."""

    def __init__(self):
        self.uris: list[str] = []

    async def __call__(self, message) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.uris.append(str(message.params.uri))


@pytest.mark.parametrize("app", ["r", "r26"], ids=["app-initialize-first", "app-discover-first"])
async def test_listen_with_resource_subscriptions_gets_updates_of_those_resources_only(revisions_gateway, app):
    """A 2026-07-28 client's `resourceSubscriptions` on `/apps/mcp`: the gateway subscribes the app
    (`resources/subscribe` for an initialize-first app, its own listen filter for a discover-first
    one), the app's `resources/updated` for that URI arrives on the stream, another URI's does not."""
    url = revisions_gateway.url(f"/apps/mcp/{app}")
    wanted, other = "test://readme", "test://items/7"
    seen = ResourceUpdatesSeen()
    async with connect(url, message_handler=seen) as listener, connect(url) as control, connect(url) as actor:
        assert_modern(listener, url)
        # The control listener subscribes `other`, so the app does send its updates: the gateway's
        # filter is what must keep them off the first stream.
        async with listener.listen(resource_subscriptions=[wanted]) as sub, control.listen(resource_subscriptions=[other]) as control_sub:
            honored = sub.honored
            await drain(sub)
            await drain(control_sub)
            touched_other = await actor.call_tool("touch_resource", {"uri": other})
            control_event = await next_event(control_sub, NOTIFY_TIMEOUT)
            touched = await actor.call_tool("touch_resource", {"uri": wanted})
            event = await next_event(sub, NOTIFY_TIMEOUT)
            await drain(sub)
    assert honored.resource_subscriptions == [wanted], f"the acknowledgement: {honored}"
    assert not touched.is_error and not touched_other.is_error, (text_of(touched), text_of(touched_other))
    assert isinstance(control_event, ResourceUpdated) and str(control_event.uri) == other, f"control: no update of {other}: {control_event!r}"
    assert isinstance(event, ResourceUpdated) and str(event.uri) == wanted, f"no resources/updated for {wanted} at {url}: {event!r}"
    assert other not in seen.uris, f"an update of {other}, outside the filter, reached the stream: {seen.uris}"


@pytest.mark.parametrize("app", ["r", "r26"], ids=["app-initialize-first", "app-discover-first"])
async def test_listen_on_mcp_gets_updates_of_the_subscribed_resources_by_their_mcp_uris(revisions_gateway, app):
    """The same through `/mcp` (issue 38): the stream subscribes the app's resource by the URI `/mcp`
    names it with (`test://{app}/readme`), and its update arrives under that URI; another URI's
    update, subscribed by a control stream, stays off it."""
    url = revisions_gateway.url("/mcp")
    wanted, other = f"test://{app}/readme", f"test://{app}/items/7"
    seen = ResourceUpdatesSeen()
    async with connect(url, message_handler=seen) as listener, connect(url) as control, connect(url) as actor:
        assert_modern(listener, url)
        async with listener.listen(resource_subscriptions=[wanted]) as sub, control.listen(resource_subscriptions=[other]) as control_sub:
            honored = sub.honored
            await drain(sub)
            await drain(control_sub)
            touched_other = await actor.call_tool(f"{app}.touch_resource", {"uri": "test://items/7"})
            control_event = await next_event(control_sub, NOTIFY_TIMEOUT)
            touched = await actor.call_tool(f"{app}.touch_resource", {"uri": "test://readme"})
            event = await next_event(sub, NOTIFY_TIMEOUT)
            await drain(sub)
    assert honored.resource_subscriptions == [wanted], f"the acknowledgement: {honored}"
    assert not touched.is_error and not touched_other.is_error, (text_of(touched), text_of(touched_other))
    assert isinstance(control_event, ResourceUpdated) and str(control_event.uri) == other, f"control: no update of {other}: {control_event!r}"
    assert isinstance(event, ResourceUpdated) and str(event.uri) == wanted, f"no resources/updated for {wanted} at {url}: {event!r}"
    assert other not in seen.uris, f"an update of {other}, outside the filter, reached the stream: {seen.uris}"


async def test_listen_on_mcp_gets_resources_list_changed_when_an_app_starts(discovery_gateway):
    """An app that comes up adds its resources to `/mcp`'s list: a stream listening for resource
    list changes hears it, and the app's resources are then listed under its own URIs."""
    gw = discovery_gateway
    url = gw.url("/mcp")
    app_id = f"res{os.getpid()}"
    folder = None
    try:
        async with connect(url) as client:
            assert_modern(client, url)
            async with client.listen(resources_list_changed=True) as sub:
                honored = sub.honored
                await drain(sub)
                folder = add_app_folder(gw, app_id)
                started = await next_event(sub, DISCOVERY_TIMEOUT)
            uris = []
            with anyio.move_on_after(DISCOVERY_TIMEOUT):
                while f"test://{app_id}/readme" not in uris:
                    uris = [str(r.uri) for r in (await client.list_resources(cache_mode="refresh")).resources]
                    await anyio.sleep(0.1)
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
    assert honored.resources_list_changed, f"the acknowledgement did not honour resourcesListChanged: {honored}"
    assert isinstance(started, ResourcesListChanged), f"no resources/list_changed within {DISCOVERY_TIMEOUT} s of adding {app_id}: {started!r}\n{gw.logs()[-4000:]}"
    assert f"ui://{app_id}/test-app/app.html" in uris and f"test://{app_id}/readme" in uris, uris

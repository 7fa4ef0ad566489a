"""The gateway's `/mcp` multiplexing what its apps and MCP servers offer beside tools (issue 38),
with the official Python client (PyPI `mcp`).

One gateway runs GroceryInventory (`grocery-inventory`, prefix `grocery.`), the test app as an MCP
App (`echo`, prefix `echo.`), the test app as a standard MCP server from `Plugins.Mcp.Servers`
(`ws`, prefix `ws.`, URI key `mcp~ws`) and PAGE_APPS more test-app instances, so that the lists
span many apps; those in PAGED_APPS page their own `resources/list` one resource at a time
(`--resources-page-size 1`), so that `/mcp`'s cursors go on inside an app as well as from one app
to the next. A second gateway runs MANY_APPS test-app instances: more items than one page of the
gateway holds. Every test runs with both handshakes the client offers: `mode="legacy"`
(initialize-first, 2025-11-25) and the default `mode="auto"` (discover-first, 2026-07-28).

Checked against what each app serves itself on `/apps/mcp/{appId}`:

- `resources/list` and `resources/templates/list` list every app's items, each URI rewritten per
  app by the rule (`S://R` → `S://K/R`; `S:R` → `S://K!/R`, K the app id or `mcp~{serverId}`),
  each item once, following `nextCursor` to the end;
- `resources/read` of a rewritten URI answers the app's contents byte for byte, with each
  content's `uri` the rewritten URI (the ~500 KB dashboard among them);
- `prompts/list` names prompts with the app's tool-name prefix; `prompts/get` with arguments
  reaches the app;
- `completion/complete` with a prefixed prompt ref or a rewritten template ref reaches the app;
- the capabilities declared; `ping`, `logging/setLevel` and `resources/subscribe` (initialize
  era); and `OpenClaw:McpCompatibility:ToolsOnly` keeping the old tools-only `/mcp`.

No app here serves a URI without `//` (`S:R`): that form of the rule is only checked in the
rule's own test below, not against the gateway.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import time
from pathlib import Path

import mcp_types as types
import pytest

from mcp import Client, ClientSession, MCPError
from mcp.client.streamable_http import streamable_http_client

from conftest import TEST_APP_BIN, Gateway, grocery_manifest

pytestmark = pytest.mark.anyio

CALL_TIMEOUT = 30.0
MODES = [("legacy", "2025-11-25"), ("auto", "2026-07-28")]

GROCERY = "grocery-inventory"
GROCERY_UI = "ui://grocery/store-dashboard.html"
GROCERY_UI_MCP = "ui://grocery-inventory/grocery/store-dashboard.html"
STORE_TEMPLATE = "inventory://stores/{storeId}/summary"
STORE_TEMPLATE_MCP = "inventory://grocery-inventory/stores/{storeId}/summary"
PRODUCT_TEMPLATE_MCP = "inventory://grocery-inventory/products/{productId}/details"
GROCERY_PROMPTS = {"grocery.analyze_store_performance", "grocery.draft_supplier_order", "grocery.explain_inventory_term"}

# The test app's items (mcpapps/test-app/src/main.rs).
TEST_APP_RESOURCES = ["ui://test-app/app.html", "test://readme"]
ITEM_TEMPLATE = "test://items/{id}"
TEST_APP_PROMPTS = ["greet", "summarize"]

# The workspace server: its URIs' key is `mcp~{serverId}`, its prompts carry its ToolNamePrefix.
WS_KEY = "mcp~ws"
# More test-app instances (2 resources, 1 template, 2 prompts each), so that the lists span many
# apps.
PAGE_APPS = [f"p{i:02}" for i in range(12)]
# These page their own resources/list, one resource a page.
PAGED_APPS = PAGE_APPS[::2]
# The second gateway: 101 apps of 2 resources, 1 template and 2 prompts each (the gateway's page
# gathered 200 items when this was written; the test does not depend on it).
MANY_APPS = [f"m{i:03}" for i in range(101)]

# Every app of the gateway: id → (URI key, prompt prefix).
APPS = {
    GROCERY: (GROCERY, "grocery."),
    "echo": ("echo", "echo."),
    **{a: (a, f"{a}.") for a in PAGE_APPS},
}
SERVERS = {"ws": (WS_KEY, "ws.")}


def rewrite(uri: str, key: str) -> str:
    """The issue's rule: `S://R` → `S://K/R`; `S:R` (no `//`) → `S://K!/R`."""
    scheme, sep, rest = uri.partition(":")
    assert sep, f"not a URI: {uri!r}"
    if rest.startswith("//"):
        return f"{scheme}://{key}/{rest[2:]}"
    return f"{scheme}://{key}!/{rest}"


def test_the_rewrite_rule_of_the_issue():
    assert rewrite(GROCERY_UI, GROCERY) == GROCERY_UI_MCP
    assert rewrite(STORE_TEMPLATE, GROCERY) == STORE_TEMPLATE_MCP
    assert rewrite("test://readme", WS_KEY) == "test://mcp~ws/readme"
    assert rewrite("urn:isbn:123", "a") == "urn://a!/isbn:123"


def stdio_test_app(app_id: str, *args: str) -> dict:
    return {
        "id": app_id,
        "version": "1.0.0",
        "transport": "stdio",
        "command": str(TEST_APP_BIN),
        "arguments": list(args),
        "toolNamePrefix": f"{app_id}.",
        "startupTimeoutSeconds": 30,
        "requestTimeoutSeconds": 30,
    }


@contextlib.contextmanager
def gateway_with(prefix: str, manifests: dict[str, dict], extra: dict, servers: list[str] = (), listed: bool = True):
    """A gateway (open on loopback) running these apps, with `extra` merged into its configuration;
    waits for the apps, for each `Plugins.Mcp.Servers` id's tools in the registry and (`listed`)
    for `/mcp` to list a resource of each."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    apps = folder / "apps"
    apps.mkdir()
    for app_id, manifest in manifests.items():
        (apps / app_id).mkdir()
        (apps / app_id / "openclaw.mcpapp.json").write_text(json.dumps(manifest, indent=2))
    config = {
        "Gateway": {"AuthTokenEnv": "GATEWAY_PY_TOKEN_NOT_SET"},
        "OpenClaw": {"McpApps": {"Enabled": True, "DiscoveryPaths": [str(apps)], "Allow": ["*"]}},
    }
    for section, values in extra.items():
        if isinstance(values, dict) and isinstance(config.get(section), dict):
            config[section] = {**config[section], **values}
        else:
            config[section] = values
    gw = Gateway(config, folder)
    try:
        gw.wait_running(list(manifests), timeout=90)
        wait_providers(gw, [f"mcp:{s}" for s in servers])
        if listed:
            wait_listed(gw, [APPS.get(a, (a, ""))[0] for a in manifests] + [SERVERS[s][0] for s in servers])
        yield gw
    finally:
        gw.stop()
        shutil.rmtree(folder, ignore_errors=True)


def wait_providers(gw: Gateway, wanted: list[str], timeout: float = 60) -> None:
    """Until the tool registry (`/tools`) has tools of each provider (`mcp:{serverId}`,
    `mcpapp:{appId}`)."""
    import httpx2

    deadline = time.monotonic() + timeout
    providers: set = set()
    while wanted:
        try:
            providers = {t["providerId"] for t in httpx2.get(gw.url("/tools"), timeout=5).json()["all"]}
            if set(wanted) <= providers:
                return
        except Exception:  # noqa: BLE001 - keep polling until the deadline
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"no tools of {wanted} in the registry: {providers}\n{gw.logs()}")
        time.sleep(0.1)


def wait_listed(gw: Gateway, keys: list[str], timeout: float = 30) -> None:
    """Until `/mcp`'s resources/list has a URI of each app key. `/mcp` learns of an app from the
    module's events, debounced (50 ms), so for a moment after /apps/health shows an app running
    `/mcp` may not offer it yet (nor read its resources: "McpApp '…' is not running")."""
    import httpx2

    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "multiplex-tests", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28", "mcp-method": "resources/list"}
    deadline = time.monotonic() + timeout
    seen: set[str] = set()
    while True:
        try:
            seen, cursor = set(), None
            while True:
                params = {"_meta": meta, **({"cursor": cursor} if cursor else {})}
                reply = httpx2.post(gw.url("/mcp"), headers=headers, timeout=10,
                                    json={"jsonrpc": "2.0", "id": 1, "method": "resources/list", "params": params}).json()
                result = reply.get("result") or {}
                seen |= {r["uri"].split("://", 1)[1].split("/", 1)[0].rstrip("!") for r in result.get("resources", [])}
                cursor = result.get("nextCursor")
                if not cursor:
                    break
            if set(keys) <= seen:
                return
        except Exception:  # noqa: BLE001 - keep polling until the deadline
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"/mcp lists no resources of {sorted(set(keys) - seen)}\n{gw.logs()}")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def multiplex():
    manifests = {GROCERY: grocery_manifest(), "echo": stdio_test_app("echo")}
    for app_id in PAGE_APPS:
        paged = ("--resources-page-size", "1") if app_id in PAGED_APPS else ()
        manifests[app_id] = stdio_test_app(app_id, *paged)
    servers = {"Mcp": {"Servers": {"ws": {"Transport": "stdio", "Command": str(TEST_APP_BIN), "ToolNamePrefix": "ws."}}}}
    with gateway_with("gateway-py-multiplex-", manifests, {"Plugins": servers}, ["ws"]) as gw:
        yield gw


def connect(url: str, mode: str) -> Client:
    return Client(url, mode=mode, read_timeout_seconds=CALL_TIMEOUT)


async def every_page(list_method, attr: str, max_pages: int = 500) -> tuple[list, int]:
    """Every item of a paginated list, following `nextCursor` until there is none → (items, pages).
    A cursor handed out twice would loop forever: that fails too."""
    items, pages, cursor, cursors = [], 0, None, set()
    while True:
        page = await list_method(cursor=cursor, cache_mode="bypass") if cursor else await list_method(cache_mode="bypass")
        pages += 1
        items.extend(getattr(page, attr))
        cursor = page.next_cursor
        if not cursor:
            return items, pages
        assert cursor not in cursors, f"cursor {cursor!r} came back twice after {pages} pages"
        cursors.add(cursor)
        assert pages < max_pages, f"still a nextCursor after {pages} pages"


def once(values: list[str], what: str) -> set[str]:
    dupes = sorted({v for v in values if values.count(v) > 1})
    assert not dupes, f"{what} listed more than once: {dupes}"
    return set(values)


def dumped(content) -> dict:
    return content.model_dump(by_alias=True, exclude_none=True, mode="json")


# ---------------------------------------------------------------------------------------------
# What the apps serve themselves (/apps/mcp/{appId}), the reference for /mcp
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def direct(multiplex):
    """Each app's own resources, templates and prompts, read through `/apps/mcp/{appId}`; the
    workspace server (not on /apps/mcp) is the same binary as `echo`."""
    import anyio

    async def read_all():
        found = {}
        for app_id in APPS:
            async with connect(multiplex.url(f"/apps/mcp/{app_id}"), "legacy") as client:
                resources, pages = await every_page(client.list_resources, "resources")
                # The harness's premise: a paged app serves its two resources on two pages.
                assert pages == (2 if app_id in PAGED_APPS else 1), (app_id, pages)
                templates, _ = await every_page(client.list_resource_templates, "resource_templates")
                prompts, _ = await every_page(client.list_prompts, "prompts")
            found[app_id] = {
                "resources": {r.uri: r for r in resources},
                "templates": {t.uri_template: t for t in templates},
                "prompts": {p.name: p for p in prompts},
            }
        found["ws"] = found["echo"]
        return found

    found = anyio.run(read_all)
    assert set(found["echo"]["resources"]) == set(TEST_APP_RESOURCES), found["echo"]["resources"]
    assert GROCERY_UI in found[GROCERY]["resources"], found[GROCERY]["resources"]
    return found


def expected(direct, kind: str) -> dict[str, tuple[str, str]]:
    """What `/mcp` must list of `kind` (resources, templates: rewritten URIs; prompts: prefixed
    names) → (app or server id, the app's own URI or name)."""
    out = {}
    for owner, (key, prefix) in {**APPS, **SERVERS}.items():
        for own in direct[owner][kind]:
            out[prefix + own if kind == "prompts" else rewrite(own, key)] = (owner, own)
    return out


# ---------------------------------------------------------------------------------------------
# Capabilities
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode,version", MODES)
async def test_capabilities_declare_what_the_apps_offer(multiplex, mode, version):
    async with connect(multiplex.url("/mcp"), mode) as client:
        assert client.protocol_version == version, client.protocol_version
        caps = client.server_capabilities
    assert caps.tools is not None, caps
    assert caps.resources is not None, f"no resources capability: {caps}"
    assert caps.prompts is not None, f"no prompts capability: {caps}"
    assert caps.completions is not None, f"no completions capability: {caps}"


# ---------------------------------------------------------------------------------------------
# Resources and templates
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode,version", MODES)
async def test_resources_of_every_app_are_listed_once_with_rewritten_uris(multiplex, direct, mode, version):
    async with connect(multiplex.url("/mcp"), mode) as client:
        assert client.protocol_version == version
        resources, pages = await every_page(client.list_resources, "resources")
    listed = once([r.uri for r in resources], "resource")
    want = expected(direct, "resources")
    missing = sorted(set(want) - listed)
    assert not missing, f"missing from /mcp resources/list ({pages} pages): {missing}\nlisted: {sorted(listed)}"
    stray = sorted(listed - set(want))
    assert not stray, f"/mcp listed resources no app serves under that URI: {stray}"
    assert GROCERY_UI_MCP in listed
    # Two apps' items both appear, and the workspace server's.
    assert {"ui://echo/test-app/app.html", "test://echo/readme", f"test://{WS_KEY}/readme", "test://p00/readme"} <= listed
    # The rest of each item is the app's.
    by_uri = {r.uri: r for r in resources}
    for uri, (owner, own) in want.items():
        assert by_uri[uri].mime_type == direct[owner]["resources"][own].mime_type, (uri, by_uri[uri])


@pytest.mark.parametrize("mode,version", MODES)
async def test_resource_templates_of_every_app_are_listed_once_with_rewritten_uris(multiplex, direct, mode, version):
    async with connect(multiplex.url("/mcp"), mode) as client:
        templates, pages = await every_page(client.list_resource_templates, "resource_templates")
    listed = once([t.uri_template for t in templates], "resource template")
    want = expected(direct, "templates")
    missing = sorted(set(want) - listed)
    assert not missing, f"missing from /mcp resources/templates/list ({pages} pages): {missing}\nlisted: {sorted(listed)}"
    stray = sorted(listed - set(want))
    assert not stray, f"/mcp listed templates no app serves: {stray}"
    assert {STORE_TEMPLATE_MCP, PRODUCT_TEMPLATE_MCP, "test://echo/items/{id}", f"test://{WS_KEY}/items/{{id}}"} <= listed


@pytest.mark.parametrize("mode,version", MODES)
async def test_reading_a_rewritten_uri_answers_the_apps_contents_byte_for_byte(multiplex, mode, version):
    # (app on /apps/mcp, the app's URI, the /mcp URI)
    cases = [
        (GROCERY, GROCERY_UI, GROCERY_UI_MCP),
        (GROCERY, "inventory://stores/1/summary", "inventory://grocery-inventory/stores/1/summary"),
        (GROCERY, "inventory://products/3/details", "inventory://grocery-inventory/products/3/details"),
        ("echo", "ui://test-app/app.html", "ui://echo/test-app/app.html"),
        ("echo", "test://readme", "test://echo/readme"),
        ("echo", "test://items/42", "test://echo/items/42"),
        ("p07", "test://readme", "test://p07/readme"),
        # The workspace server is the same binary as `echo`: the same contents.
        ("echo", "test://items/7", f"test://{WS_KEY}/items/7"),
        ("echo", "ui://test-app/app.html", f"ui://{WS_KEY}/test-app/app.html"),
    ]
    async with connect(multiplex.url("/mcp"), mode) as gateway:
        for app_id, own_uri, mcp_uri in cases:
            async with connect(multiplex.url(f"/apps/mcp/{app_id}"), mode) as app:
                mine = await app.read_resource(own_uri, cache_mode="bypass")
            theirs = await gateway.read_resource(mcp_uri, cache_mode="bypass")
            assert len(theirs.contents) == len(mine.contents), (mcp_uri, theirs)
            for got, want in zip(theirs.contents, mine.contents):
                assert got.uri == mcp_uri, f"{mcp_uri}: a content's uri is {got.uri!r}"
                assert want.uri == own_uri
                got_fields, want_fields = dumped(got), dumped(want)
                got_fields.pop("uri"), want_fields.pop("uri")
                if "text" in want_fields:
                    assert got_fields.get("text", "").encode() == want_fields["text"].encode(), (
                        f"{mcp_uri}: text differs ({len(got_fields.get('text', ''))} vs {len(want_fields['text'])} chars)"
                    )
                assert got_fields == want_fields, f"{mcp_uri}: {got_fields.keys()} vs {want_fields.keys()}"
    async with connect(multiplex.url("/mcp"), mode) as gateway:
        ui = await gateway.read_resource(GROCERY_UI_MCP, cache_mode="bypass")
    assert ui.contents[0].mime_type == "text/html;profile=mcp-app"
    assert len(ui.contents[0].text.encode()) > 400_000, "the dashboard is the ~500 KB UI resource"


@pytest.mark.parametrize("mode,version", MODES)
async def test_reading_an_unknown_or_unrewritten_uri_is_an_error(multiplex, mode, version):
    async with connect(multiplex.url("/mcp"), mode) as client:
        for uri in ["ui://no-such-app/grocery/store-dashboard.html", GROCERY_UI, "test://echo/nothing-here"]:
            with pytest.raises(MCPError):
                await client.read_resource(uri, cache_mode="bypass")


# ---------------------------------------------------------------------------------------------
# Prompts
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode,version", MODES)
async def test_prompts_of_every_app_are_listed_once_with_the_apps_prefix(multiplex, direct, mode, version):
    async with connect(multiplex.url("/mcp"), mode) as client:
        prompts, pages = await every_page(client.list_prompts, "prompts")
    listed = once([p.name for p in prompts], "prompt")
    want = expected(direct, "prompts")
    missing = sorted(set(want) - listed)
    assert not missing, f"missing from /mcp prompts/list ({pages} pages): {missing}\nlisted: {sorted(listed)}"
    stray = sorted(listed - set(want))
    assert not stray, f"/mcp listed prompts no app serves: {stray}"
    assert GROCERY_PROMPTS | {"echo.greet", "echo.summarize", "ws.greet", "ws.summarize"} <= listed
    by_name = {p.name: p for p in prompts}
    for name, (owner, own) in want.items():
        got = [(a.name, a.required) for a in by_name[name].arguments or []]
        mine = [(a.name, a.required) for a in direct[owner]["prompts"][own].arguments or []]
        assert got == mine, f"{name}: arguments {got} vs the app's {mine}"


@pytest.mark.parametrize("mode,version", MODES)
async def test_getting_a_prefixed_prompt_with_arguments_reaches_the_app(multiplex, mode, version):
    # (app on /apps/mcp, the app's prompt, the /mcp name, arguments)
    cases = [
        ("echo", "greet", "echo.greet", {"name": "Ada"}),
        ("p11", "summarize", "p11.summarize", {"topic": "multiplexing"}),
        ("echo", "summarize", "ws.summarize", {"topic": "workspace servers"}),
        (GROCERY, "explain_inventory_term", "grocery.explain_inventory_term", {"term": "safety stock"}),
        (GROCERY, "analyze_store_performance", "grocery.analyze_store_performance", {"storeId": "1"}),
    ]
    async with connect(multiplex.url("/mcp"), mode) as gateway:
        greet = await gateway.get_prompt("echo.greet", {"name": "Ada"})
        assert greet.messages[0].role == "user"
        assert greet.messages[0].content.text == "Say hello to Ada.", greet
        for app_id, own, name, arguments in cases:
            async with connect(multiplex.url(f"/apps/mcp/{app_id}"), mode) as app:
                mine = await app.get_prompt(own, arguments)
            theirs = await gateway.get_prompt(name, arguments)
            assert dumped(theirs) == dumped(mine), f"{name}: {dumped(theirs)}\nvs the app's {dumped(mine)}"
        with pytest.raises(MCPError):
            await gateway.get_prompt("greet", {"name": "Ada"})  # unprefixed: no such prompt on /mcp


# ---------------------------------------------------------------------------------------------
# Completions
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode,version", MODES)
async def test_completions_by_prefixed_prompt_and_rewritten_template_reach_the_app(multiplex, mode, version):
    # (app on /apps/mcp, the app's ref, the /mcp ref, argument)
    P, R = types.PromptReference, types.ResourceTemplateReference
    cases = [
        ("echo", P(name="greet"), P(name="echo.greet"), {"name": "name", "value": "a"}),
        ("echo", P(name="summarize"), P(name="ws.summarize"), {"name": "topic", "value": ""}),
        ("echo", R(uri=ITEM_TEMPLATE), R(uri="test://echo/items/{id}"), {"name": "id", "value": "4"}),
        ("p03", R(uri=ITEM_TEMPLATE), R(uri="test://p03/items/{id}"), {"name": "id", "value": ""}),
        ("echo", R(uri=ITEM_TEMPLATE), R(uri=f"test://{WS_KEY}/items/{{id}}"), {"name": "id", "value": ""}),
        (GROCERY, P(name="analyze_store_performance"), P(name="grocery.analyze_store_performance"), {"name": "storeId", "value": ""}),
        (GROCERY, P(name="explain_inventory_term"), P(name="grocery.explain_inventory_term"), {"name": "term", "value": "s"}),
        (GROCERY, R(uri=STORE_TEMPLATE), R(uri=STORE_TEMPLATE_MCP), {"name": "storeId", "value": ""}),
        (GROCERY, R(uri="inventory://products/{productId}/details"), R(uri=PRODUCT_TEMPLATE_MCP), {"name": "productId", "value": "3"}),
    ]
    async with connect(multiplex.url("/mcp"), mode) as gateway:
        names = await gateway.complete(P(name="echo.greet"), {"name": "name", "value": "a"})
        assert names.completion.values == ["alice"], names
        items = await gateway.complete(R(uri="test://echo/items/{id}"), {"name": "id", "value": "4"})
        assert items.completion.values == ["42"], items
        for app_id, own_ref, ref, argument in cases:
            async with connect(multiplex.url(f"/apps/mcp/{app_id}"), mode) as app:
                mine = await app.complete(own_ref, argument)
            theirs = await gateway.complete(ref, argument)
            assert mine.completion.values, f"harness: {app_id} completes nothing for {own_ref} {argument}"
            assert dumped(theirs.completion) == dumped(mine.completion), f"{ref}: {theirs} vs the app's {mine}"


# ---------------------------------------------------------------------------------------------
# Pagination
# ---------------------------------------------------------------------------------------------


LISTS = [
    ("list_resources", "resources", "resources", lambda r: r.uri),
    ("list_resource_templates", "resource_templates", "templates", lambda t: t.uri_template),
    ("list_prompts", "prompts", "prompts", lambda p: p.name),
]


async def pages_of(method, attr: str, key, max_pages: int = 1000) -> list[list[str]]:
    """Each page's item keys, following `nextCursor` until there is none (failing if it never
    ends or a cursor comes back)."""
    per_page, cursor, cursors = [], None, set()
    while True:
        page = await method(cursor=cursor, cache_mode="bypass") if cursor else await method(cache_mode="bypass")
        per_page.append([key(i) for i in getattr(page, attr)])
        cursor = page.next_cursor
        if not cursor:
            return per_page
        assert cursor not in cursors, f"cursor {cursor!r} came back after {len(per_page)} pages"
        cursors.add(cursor)
        assert len(per_page) < max_pages, f"still a nextCursor after {len(per_page)} pages"


@pytest.mark.parametrize("mode,version", MODES)
async def test_cursors_span_apps_and_every_item_arrives_once(multiplex, direct, mode, version):
    """Page by page: no item twice across pages, none missing — the second resource of an app
    that pages its own list included — and the cursor flow ends. How many pages is the gateway's
    choice: it is printed, not required."""
    async with connect(multiplex.url("/mcp"), mode) as client:
        for method, attr, kind, key in LISTS:
            per_page = await pages_of(getattr(client, method), attr, key)
            flat = [k for page in per_page for k in page]
            once(flat, f"{kind} ({len(per_page)} pages of {[len(p) for p in per_page]})")
            want = set(expected(direct, kind))
            assert set(flat) == want, (
                f"{kind} over {len(per_page)} pages: missing {sorted(want - set(flat))}, stray {sorted(set(flat) - want)}"
            )
            print(f"{mode} {kind}: {len(flat)} items in {len(per_page)} pages {[len(p) for p in per_page]}")


@pytest.fixture(scope="module")
def many():
    with gateway_with("gateway-py-multiplex-many-", {a: stdio_test_app(a) for a in MANY_APPS}, {}) as gw:
        yield gw


@pytest.mark.parametrize("mode,version", MODES)
async def test_lists_longer_than_a_page_arrive_whole(many, mode, version):
    """101 apps: 202 resources, 101 templates, 202 prompts, each once, the flow ending."""
    want = {
        "resources": {rewrite(uri, a) for a in MANY_APPS for uri in TEST_APP_RESOURCES},
        "templates": {rewrite(ITEM_TEMPLATE, a) for a in MANY_APPS},
        "prompts": {f"{a}.{p}" for a in MANY_APPS for p in TEST_APP_PROMPTS},
    }
    async with connect(many.url("/mcp"), mode) as client:
        for method, attr, kind, key in LISTS:
            per_page = await pages_of(getattr(client, method), attr, key)
            flat = [k for page in per_page for k in page]
            once(flat, f"{kind} ({len(per_page)} pages of {[len(p) for p in per_page]})")
            assert set(flat) == want[kind], (
                f"{kind} over {len(per_page)} pages: missing {sorted(want[kind] - set(flat))[:10]}, "
                f"stray {sorted(set(flat) - want[kind])[:10]}"
            )
            print(f"{mode} {kind}: {len(flat)} items in {len(per_page)} pages {[len(p) for p in per_page]}")


@pytest.mark.parametrize("mode,version", MODES)
async def test_a_cursor_not_made_by_the_gateway_is_refused(multiplex, mode, version):
    async with connect(multiplex.url("/mcp"), mode) as client:
        for method in (client.list_resources, client.list_resource_templates, client.list_prompts):
            with pytest.raises(MCPError) as refused:
                await method(cursor="not-a-gateway-cursor", cache_mode="bypass")
            assert refused.value.error.code == -32602, refused.value.error


# ---------------------------------------------------------------------------------------------
# The initialize era: ping, logging, subscriptions; the low-level session
# ---------------------------------------------------------------------------------------------


async def test_ping_logging_and_subscriptions_in_an_initialize_era_session(multiplex):
    uri = "inventory://grocery-inventory/stores/1/summary"
    with pytest.warns(Warning):  # the client marks these deprecated as of 2026-07-28
        async with connect(multiplex.url("/mcp"), "legacy") as client:
            caps = client.server_capabilities
            # GroceryInventory offers logging and resource subscriptions: so does /mcp.
            assert caps.logging is not None, caps
            assert caps.resources is not None and caps.resources.subscribe, caps
            await client.send_ping()
            await client.set_logging_level("warning")
            await client.subscribe_resource(uri)
            await client.unsubscribe_resource(uri)


async def test_the_low_level_client_session(multiplex):
    async with streamable_http_client(multiplex.url("/mcp")) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            assert init.capabilities.resources is not None and init.capabilities.prompts is not None, init.capabilities
            listed = await session.list_resources()
            uris = [r.uri for r in listed.resources]
            cursor = listed.next_cursor
            while cursor:
                page = await session.list_resources(params=types.PaginatedRequestParams(cursor=cursor))
                uris.extend(r.uri for r in page.resources)
                cursor = page.next_cursor
            assert GROCERY_UI_MCP in uris, uris
            ui = await session.read_resource(GROCERY_UI_MCP)
            assert ui.contents[0].uri == GROCERY_UI_MCP
            assert "<html" in ui.contents[0].text.lower()
            prompt = await session.get_prompt("ws.greet", {"name": "Bo"})
            assert prompt.messages[0].content.text == "Say hello to Bo."
            done = await session.complete(types.ResourceTemplateReference(uri=STORE_TEMPLATE_MCP), {"name": "storeId", "value": ""})
            assert done.completion.values, done


# ---------------------------------------------------------------------------------------------
# ToolsOnly
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tools_only():
    extra = {"OpenClaw": {"McpCompatibility": {"ToolsOnly": True}}}
    with gateway_with("gateway-py-tools-only-", {"echo": stdio_test_app("echo")}, extra, listed=False) as gw:
        wait_providers(gw, ["mcpapp:echo"])
        yield gw


@pytest.mark.parametrize("mode,version", MODES)
async def test_tools_only_keeps_the_old_tools_only_mcp(tools_only, mode, version):
    async with connect(tools_only.url("/mcp"), mode) as client:
        caps = client.server_capabilities
        assert caps.tools is not None
        assert caps.resources is None and caps.prompts is None and caps.completions is None, caps
        tools = (await client.list_tools()).tools
        assert "echo.echo" in [t.name for t in tools]
        for call in (
            lambda: client.list_resources(cache_mode="bypass"),
            lambda: client.list_prompts(cache_mode="bypass"),
            lambda: client.read_resource("test://echo/readme", cache_mode="bypass"),
        ):
            with pytest.raises(MCPError) as refused:
                await call()
            assert refused.value.error.code == -32601, refused.value.error

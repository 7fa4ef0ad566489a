"""`/apps/mcp/{appId}` with the official Python MCP client (PyPI `mcp`), issue 6 Must show 1 and 3.

Both handshakes the client offers are exercised: the initialize handshake (`mode="legacy"`, and
the low-level `ClientSession` over `streamable_http_client`) and the default `mode="auto"`, which
probes `server/discover` first.
"""

from __future__ import annotations

import pytest

from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client

pytestmark = pytest.mark.anyio

DASHBOARD_URI = "ui://grocery/store-dashboard.html"


async def all_tools(client) -> list:
    tools, cursor = [], None
    while True:
        page = await client.list_tools(cursor=cursor) if cursor else await client.list_tools()
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def exercise_grocery(client) -> None:
    tools = await all_tools(client)
    names = [t.name for t in tools]
    for name in ["get_stores", "adjust_stock", "show_store_inventory_dashboard", "refresh_dashboard_data"]:
        assert name in names, names
    assert not any(n.startswith("grocery.") for n in names), names

    ui = await client.read_resource(DASHBOARD_URI)
    assert ui.contents[0].mime_type == "text/html;profile=mcp-app"
    assert "<html" in ui.contents[0].text.lower()

    stores = await client.call_tool("get_stores", {})
    assert not stores.is_error, text_of(stores)
    assert "Downtown Market" in text_of(stores) + str(stores.structured_content)

    prompts = [p.name for p in (await client.list_prompts()).prompts]
    assert {"analyze_store_performance", "draft_supplier_order", "explain_inventory_term"} <= set(prompts), prompts
    templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
    assert "inventory://stores/{storeId}/summary" in templates, templates
    assert "inventory://products/{productId}/details" in templates, templates


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_grocery_with_the_high_level_client(gateway, mode):
    async with Client(gateway.url("/apps/mcp/grocery-inventory"), mode=mode) as client:
        assert client.server_info is not None and "grocery-inventory" in client.server_info.name
        # auto = discover-first (2026-07-28) against this gateway, not a fallback to initialize.
        assert client.protocol_version == ("2026-07-28" if mode == "auto" else "2025-11-25"), client.protocol_version
        await exercise_grocery(client)


async def test_grocery_with_client_session(gateway):
    async with streamable_http_client(gateway.url("/apps/mcp/grocery-inventory")) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            assert init.protocol_version
            assert init.capabilities.tools is not None
            names = [t.name for t in await all_tools(session)]
            assert "refresh_dashboard_data" in names
            ui = await session.read_resource(DASHBOARD_URI)
            assert "<html" in ui.contents[0].text.lower()
            result = await session.call_tool("get_stores", {})
            assert not result.is_error


async def test_session_id_reaches_the_upstream_app(gateway):
    async with Client(gateway.url("/apps/mcp/echo?sessionId=py-session-9"), mode="legacy") as client:
        result = await client.call_tool("echo_meta", {})
        assert result.structured_content["sessionId"] == "py-session-9", result


async def test_unknown_app_is_an_error_naming_it(gateway):
    with pytest.raises(Exception) as failure:
        async with Client(gateway.url("/apps/mcp/no-such-app"), mode="legacy") as client:
            await client.list_tools()
    assert "no-such-app" in repr(failure.value) + str(getattr(failure.value, "exceptions", "")), failure.value

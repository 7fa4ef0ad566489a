"""The gateway's own MCP server at /mcp (issue 5) with the official Python client (PyPI `mcp`).

`mode="legacy"` speaks the initialize-first revision (2025-11-25); the default `mode="auto"`
negotiates the discover-first revision (2026-07-28). Both must list the registry's model-visible
tools and call them.
"""

from __future__ import annotations

import pytest

from mcp import Client

from conftest import all_tool_names

pytestmark = pytest.mark.anyio


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


@pytest.mark.parametrize("mode,version", [("legacy", "2025-11-25"), ("auto", "2026-07-28")])
async def test_gateway_mcp_lists_and_calls_tools(gateway, mode, version):
    async with Client(gateway.url("/mcp"), mode=mode) as client:
        assert client.protocol_version == version, client.protocol_version
        names = await all_tool_names(client)
        assert "grocery.get_stores" in names and "echo.echo" in names and "gateway.apps" in names, names
        assert "grocery.refresh_dashboard_data" not in names, "app-only tools are not offered to the model"
        assert "echo.app_only" not in names

        stores = await client.call_tool("grocery.get_stores", {})
        assert not stores.is_error, text_of(stores)
        assert "Downtown Market" in text_of(stores)
        assert stores.structured_content is not None

        echo = await client.call_tool("echo.echo", {"text": f"via {mode}"})
        assert text_of(echo) == f"echo: via {mode}"
        assert echo.structured_content == {"text": f"via {mode}", "length": len(f"via {mode}")}

        failed = await client.call_tool("echo.fail", {"message": "nope"})
        assert failed.is_error and text_of(failed).startswith("Error: ")

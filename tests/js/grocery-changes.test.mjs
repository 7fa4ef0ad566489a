// adjust_stock changes what get_inventory, the REST API and the summary resource report, and a
// subscribed client receives notifications/resources/updated — for changes made through MCP and
// through REST alike.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { startHttpServer, connectHttp, readJson, waitFor, text } from "./lib/grocery-harness.mjs";

const SUMMARY = (id) => `inventory://stores/${id}/summary`;

describe("GroceryInventory stock changes", { timeout: 60_000 }, () => {
  let server;
  let actor;
  let watcher;
  const updates = [];

  before(async () => {
    server = await startHttpServer();
    actor = await connectHttp(server.url, { name: "actor" });
    watcher = await connectHttp(server.url, { name: "watcher" });
    watcher.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => updates.push(n.params.uri));
  });

  after(async () => {
    await actor?.close();
    await watcher?.close();
    await server?.stop();
  });

  const api = async (path, init) => {
    const res = await fetch(`${server.base}${path}`, {
      ...init,
      headers: { "content-type": "application/json", ...(init?.headers ?? {}) },
      signal: AbortSignal.timeout(10_000),
    });
    return { status: res.status, body: await res.json() };
  };
  const row = async (storeId, productId) =>
    (await actor.callTool({ name: "get_inventory", arguments: { storeId, productId } })).structuredContent.items[0];

  it("serves the REST API over the same data", async () => {
    assert.equal((await api("/api/categories")).body.length, 6);
    assert.equal((await api("/api/products")).body.length, 30);
    assert.equal((await api("/api/products?categoryId=3")).body.length, 5);
    assert.equal((await api("/api/products/4")).body.product.name, "Baby Spinach");
    assert.equal((await api("/api/suppliers")).body.length, 5);
    const stores = (await api("/api/stores")).body;
    assert.equal(stores[0].name, "Downtown Market");
    assert.equal((await api("/api/inventory?storeId=2")).body.length, 30);
    assert.equal((await api("/api/inventory")).body.length, 120);
    const low = (await api("/api/inventory/low-stock?storeId=1")).body;
    assert.ok(low.length > 0 && low.every((r) => r.quantityOnHand < r.reorderThreshold));
    const missing = await api("/api/inventory?storeId=99");
    assert.equal(missing.status, 404);
    assert.equal(missing.body.argument, "storeId");
  });

  it("adjust_stock changes get_inventory, the REST API and the summary resource, and notifies subscribers", async () => {
    await watcher.subscribeResource({ uri: SUMMARY(2) });
    const before = await row(2, 5);

    const result = await actor.callTool({ name: "adjust_stock", arguments: { storeId: 2, productId: 5, delta: 7, reason: "delivery" } });
    assert.notEqual(result.isError, true, text(result));
    assert.equal(result.structuredContent.previousQuantity, before.quantityOnHand);
    const expected = before.quantityOnHand + 7;

    assert.equal((await row(2, 5)).quantityOnHand, expected);
    const rest = (await api("/api/inventory?storeId=2&productId=5")).body;
    assert.equal(rest[0].quantityOnHand, expected);
    const summary = await readJson(actor, SUMMARY(2));
    assert.equal(summary.items.find((i) => i.productId === 5).quantityOnHand, expected);

    await waitFor(() => updates.includes(SUMMARY(2)), { what: "notifications/resources/updated" });
  });

  it("notifies only subscribed URIs, also for REST changes, and stops after unsubscribe", async () => {
    updates.length = 0;
    // Store 3 is not subscribed: no notification for it.
    await actor.callTool({ name: "adjust_stock", arguments: { storeId: 3, productId: 1, delta: 1 } });
    // A change through REST reaches MCP subscribers too.
    const put = await api("/api/inventory/2/6", { method: "PUT", body: JSON.stringify({ quantity: 3 }) });
    assert.equal(put.status, 200);
    assert.equal(put.body.item.quantityOnHand, 3);
    assert.equal(put.body.item.isLowStock, true);
    await waitFor(() => updates.includes(SUMMARY(2)), { what: "update after the REST change" });
    assert.ok(!updates.includes(SUMMARY(3)), "store 3 was not subscribed");
    assert.equal((await row(2, 6)).quantityOnHand, 3);

    const adjust = await api("/api/inventory/2/6/adjust", { method: "POST", body: JSON.stringify({ delta: -10 }) });
    assert.equal(adjust.status, 400);
    assert.equal(adjust.body.argument, "delta");

    await watcher.unsubscribeResource({ uri: SUMMARY(2) });
    updates.length = 0;
    await actor.callTool({ name: "adjust_stock", arguments: { storeId: 2, productId: 6, delta: 2 } });
    // Give a stray notification time to arrive, then check none did.
    await new Promise((r) => setTimeout(r, 500));
    assert.deepEqual(updates, []);
  });

  it("refuses to subscribe to an unknown resource", async () => {
    await assert.rejects(watcher.subscribeResource({ uri: SUMMARY(42) }), /storeId/);
  });
});

// The elicitation tools against clients that answer elicitation/create (accept), that decline
// or cancel, and that do not support elicitation at all.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { startHttpServer, connectHttp, connectStdio, autoAnswer, text } from "./lib/grocery-harness.mjs";

describe("GroceryInventory elicitation tools", { timeout: 60_000 }, () => {
  let server;
  const clients = [];
  const connect = async (options) => {
    const client = await connectHttp(server.url, options);
    clients.push(client);
    return client;
  };

  before(async () => {
    server = await startHttpServer();
  });

  after(async () => {
    for (const c of clients) await c.close();
    await server?.stop();
  });

  it("guided_stock_count asks store, product, quantity and confirmation, then records the count", async () => {
    const asked = [];
    const client = await connect({
      elicit: (request) => {
        asked.push(request.params);
        return autoAnswer({ storeId: "2", productId: "9", countedQuantity: 17, confirm: true })(request);
      },
    });
    const result = await client.callTool({ name: "guided_stock_count", arguments: {} });
    assert.notEqual(result.isError, true, text(result));
    assert.equal(asked.length, 4);
    assert.deepEqual(asked.map((a) => Object.keys(a.requestedSchema.properties)), [["storeId"], ["productId"], ["countedQuantity"], ["confirm"]]);
    assert.ok(asked[0].requestedSchema.properties.storeId.oneOf.some((o) => o.title.includes("Uptown Grocery")));
    assert.match(asked[2].message, /Greek Yogurt/);
    assert.equal(result.structuredContent.status, "completed");
    assert.equal(result.structuredContent.item.quantityOnHand, 17);

    const check = await client.callTool({ name: "get_inventory", arguments: { storeId: 2, productId: 9 } });
    assert.equal(check.structuredContent.items[0].quantityOnHand, 17);
  });

  it("guided_purchase_order drafts the order the user chose", async () => {
    const client = await connect({ elicit: autoAnswer({ urgency: "emergency", notes: "Back door delivery" }) });
    const result = await client.callTool({ name: "guided_purchase_order", arguments: {} });
    assert.notEqual(result.isError, true, text(result));
    const po = result.structuredContent.purchaseOrder;
    assert.equal(result.structuredContent.status, "completed");
    assert.equal(po.store.id, 1);
    assert.equal(po.urgency, "emergency");
    assert.equal(po.notes, "Back door delivery");
    assert.ok(po.lines.length > 0);
  });

  for (const action of ["decline", "cancel"]) {
    it(`a ${action} stops the tool without changing anything`, async () => {
      let calls = 0;
      const client = await connect({
        elicit: (request) => {
          calls += 1;
          // Answer the store and product, then stop at the quantity step.
          return calls < 3 ? autoAnswer({ storeId: "3", productId: "4" })(request) : { action };
        },
      });
      const before = (await client.callTool({ name: "get_inventory", arguments: { storeId: 3, productId: 4 } })).structuredContent.items[0];
      const result = await client.callTool({ name: "guided_stock_count", arguments: {} });
      assert.notEqual(result.isError, true, text(result));
      assert.equal(result.structuredContent.status, action === "decline" ? "declined" : "cancelled");
      assert.equal(result.structuredContent.stoppedAt, "quantity");
      assert.match(text(result), new RegExp(action === "decline" ? "declined" : "cancelled"));
      const after = (await client.callTool({ name: "get_inventory", arguments: { storeId: 3, productId: 4 } })).structuredContent.items[0];
      assert.equal(after.quantityOnHand, before.quantityOnHand);

      const po = await client.callTool({ name: "guided_purchase_order", arguments: { storeId: 1 } });
      assert.equal(po.structuredContent.status, action === "decline" ? "declined" : "cancelled");
      assert.equal(po.structuredContent.purchaseOrder, null);
    });
  }

  it("not confirming records nothing", async () => {
    const client = await connect({ elicit: autoAnswer({ storeId: "4", productId: "1", countedQuantity: 999, confirm: false }) });
    const result = await client.callTool({ name: "guided_stock_count", arguments: {} });
    assert.equal(result.structuredContent.status, "not_confirmed");
    const row = (await client.callTool({ name: "get_inventory", arguments: { storeId: 4, productId: 1 } })).structuredContent.items[0];
    assert.notEqual(row.quantityOnHand, 999);
  });

  it("an answer outside the offered options is a tool error naming it", async () => {
    const client = await connect({ elicit: () => ({ action: "accept", content: { storeId: "1", productId: "1", countedQuantity: 5, confirm: true } }) });
    const bad = await connect({ elicit: (r) => ({ action: "accept", content: "storeId" in r.params.requestedSchema.properties ? { storeId: "1" } : {} }) });
    const ok = await client.callTool({ name: "guided_stock_count", arguments: {} });
    assert.equal(ok.structuredContent.status, "completed");
    const res = await bad.callTool({ name: "guided_stock_count", arguments: {} });
    assert.equal(res.isError, true);
    assert.match(text(res), /productId/);
  });

  it("a client without elicitation gets a clear tool error (HTTP and stdio)", async () => {
    const http = await connect({});
    const stdio = await connectStdio({});
    clients.push(stdio);
    for (const client of [http, stdio]) {
      for (const name of ["guided_stock_count", "guided_purchase_order"]) {
        const res = await client.callTool({ name, arguments: {} });
        assert.equal(res.isError, true, name);
        assert.match(text(res), /elicitation/);
      }
    }
  });
});

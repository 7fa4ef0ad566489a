// GroceryInventory through the official TypeScript MCP client, over Streamable HTTP and over
// stdio: tools with schemas, the 3 resources, 3 prompts, completions, and every tool called with
// valid and invalid arguments (invalid → isError naming the argument).
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { startHttpServer, connectHttp, connectStdio, autoAnswer, text, readJson } from "./lib/grocery-harness.mjs";

const EXPECTED_TOOLS = [
  "get_categories", "get_products", "get_suppliers", "get_stores", "get_inventory", "get_low_stock",
  "set_inventory", "adjust_stock", "get_restock_recommendations", "draft_purchase_order",
  "show_store_inventory_dashboard", "refresh_dashboard_data", "guided_stock_count", "guided_purchase_order",
];
const DASHBOARD_URI = "ui://grocery/store-dashboard.html";

/** Every tool: a valid call (checked by `check`) and invalid calls naming `arg`. */
const CALLS = [
  {
    name: "get_categories", valid: {},
    check: (r) => assert.equal(r.structuredContent.categories.length, 6),
    invalid: [{ args: { foo: 1 }, arg: "foo" }],
  },
  {
    name: "get_products", valid: { categoryId: 2 },
    check: (r) => {
      assert.ok(r.structuredContent.products.length >= 5);
      assert.ok(r.structuredContent.products.every((p) => p.categoryId === 2));
      for (const key of ["id", "sku", "name", "categoryId", "unitPrice", "unitOfMeasure", "supplierId"]) {
        assert.ok(key in r.structuredContent.products[0], key);
      }
    },
    invalid: [{ args: { categoryId: "dairy" }, arg: "categoryId" }, { args: { categoryId: 99 }, arg: "categoryId" }],
  },
  {
    name: "get_suppliers", valid: {},
    check: (r) => {
      assert.equal(r.structuredContent.suppliers.length, 5);
      assert.deepEqual(Object.keys(r.structuredContent.suppliers[0]).sort(), ["contactEmail", "id", "name", "phone"]);
    },
    invalid: [{ args: { bogus: true }, arg: "bogus" }],
  },
  {
    name: "get_stores", valid: {},
    check: (r) => {
      const stores = r.structuredContent.stores;
      assert.ok(stores.length >= 4);
      assert.deepEqual(stores[0], { id: 1, name: "Downtown Market", city: "Portland", state: "OR" });
      assert.deepEqual(stores[1], { id: 2, name: "Uptown Grocery", city: "Seattle", state: "WA" });
    },
    invalid: [{ args: { storeId: 1 }, arg: "storeId" }],
  },
  {
    name: "get_inventory", valid: { storeId: 1 },
    check: (r) => {
      assert.equal(r.structuredContent.store.name, "Downtown Market");
      assert.equal(r.structuredContent.items.length, 30);
      assert.ok(r.structuredContent.items.some((i) => i.isLowStock));
      for (const key of ["storeId", "productId", "quantityOnHand", "reorderThreshold", "lastRestocked"]) {
        assert.ok(key in r.structuredContent.items[0], key);
      }
    },
    invalid: [{ args: { storeId: 99 }, arg: "storeId" }, { args: { storeId: "one" }, arg: "storeId" }, { args: {}, arg: "storeId" }],
  },
  {
    name: "get_low_stock", valid: { storeId: 2 },
    check: (r) => {
      assert.ok(r.structuredContent.items.length > 0);
      assert.ok(r.structuredContent.items.every((i) => i.storeId === 2 && i.quantityOnHand < i.reorderThreshold));
    },
    invalid: [{ args: { storeId: -1 }, arg: "storeId" }, { args: { storeId: 5 }, arg: "storeId" }],
  },
  {
    name: "set_inventory", valid: { storeId: 1, productId: 2, quantity: 40 },
    check: (r) => assert.equal(r.structuredContent.item.quantityOnHand, 40),
    invalid: [
      { args: { storeId: 1, productId: 2, quantity: -3 }, arg: "quantity" },
      { args: { storeId: 1, productId: 2, quantity: "lots" }, arg: "quantity" },
      { args: { storeId: 1, productId: 2, quantity: 5, reorderThreshold: -1 }, arg: "reorderThreshold" },
    ],
  },
  {
    name: "adjust_stock", valid: { storeId: 1, productId: 3, delta: 5, reason: "delivery" },
    check: (r) => assert.equal(r.structuredContent.item.quantityOnHand, r.structuredContent.previousQuantity + 5),
    invalid: [
      { args: { storeId: 1, productId: 999, delta: 1 }, arg: "productId" },
      { args: { storeId: 1, productId: 3, delta: -100000 }, arg: "delta" },
      { args: { storeId: 1, productId: 3, delta: 0 }, arg: "delta" },
      { args: { storeId: 1, productId: 3, delta: 1.5 }, arg: "delta" },
    ],
  },
  {
    name: "get_restock_recommendations", valid: { storeId: 1 },
    check: (r) => {
      assert.ok(r.structuredContent.recommendations.length > 0);
      for (const rec of r.structuredContent.recommendations) {
        assert.equal(rec.recommendedQuantity, rec.reorderThreshold * 2 - rec.quantityOnHand);
      }
    },
    invalid: [{ args: { storeId: 42 }, arg: "storeId" }],
  },
  {
    name: "draft_purchase_order", valid: { storeId: 1, urgency: "urgent" },
    check: (r) => {
      const po = r.structuredContent;
      assert.equal(po.status, "draft");
      assert.equal(po.urgency, "urgent");
      assert.ok(po.lines.length > 0);
      assert.ok(po.total > 0);
    },
    invalid: [
      { args: { storeId: 1, urgency: "asap" }, arg: "urgency" },
      { args: { storeId: 1, supplierId: 77 }, arg: "supplierId" },
      { args: { storeId: 1, items: [{ productId: 1, quantity: 0 }] }, arg: "items" },
    ],
  },
  {
    name: "show_store_inventory_dashboard", valid: {},
    check: (r) => {
      assert.equal(r.structuredContent.stores.length, 4);
      assert.ok(r.structuredContent.lowStockTotal > 0);
      assert.match(text(r), /Downtown Market/);
    },
    invalid: [{ args: { storeId: 77 }, arg: "storeId" }],
  },
  {
    name: "refresh_dashboard_data", valid: { storeId: 1 },
    check: (r) => {
      assert.equal(r.structuredContent.stores.length, 1);
      assert.equal(r.structuredContent.selectedStoreId, 1);
    },
    invalid: [{ args: { storeId: "one" }, arg: "storeId" }],
  },
  {
    name: "guided_stock_count", valid: {},
    check: (r) => {
      assert.equal(r.structuredContent.status, "completed");
      assert.equal(r.structuredContent.item.quantityOnHand, 12);
    },
    invalid: [{ args: { storeId: 99 }, arg: "storeId" }, { args: { storeId: 1, productId: "x" }, arg: "productId" }],
  },
  {
    name: "guided_purchase_order", valid: { storeId: 2 },
    check: (r) => {
      assert.equal(r.structuredContent.status, "completed");
      assert.equal(r.structuredContent.purchaseOrder.store.id, 2);
    },
    invalid: [{ args: { storeId: 0 }, arg: "storeId" }],
  },
];

for (const transport of ["http", "stdio"]) {
  describe(`GroceryInventory over ${transport}`, { timeout: 120_000 }, () => {
    let server;
    let client;

    before(async () => {
      if (transport === "http") {
        server = await startHttpServer();
        client = await connectHttp(server.url, { elicit: autoAnswer() });
      } else {
        client = await connectStdio({ elicit: autoAnswer() });
      }
    });

    after(async () => {
      await client?.close();
      await server?.stop();
    });

    it("advertises tools, resources (subscribe), prompts, completions and logging", () => {
      const caps = client.getServerCapabilities();
      assert.ok(caps.tools);
      assert.equal(caps.resources?.subscribe, true);
      assert.ok(caps.prompts);
      assert.ok(caps.completions);
      assert.ok(caps.logging);
      assert.equal(client.getServerVersion().name, "grocery-inventory");
    });

    it("lists 12+ tools, each with an object input schema and an output schema", async () => {
      const { tools } = await client.listTools();
      assert.ok(tools.length >= 12, `only ${tools.length} tools`);
      const names = tools.map((t) => t.name);
      for (const name of EXPECTED_TOOLS) assert.ok(names.includes(name), `missing ${name}`);
      for (const tool of tools) {
        assert.equal(tool.inputSchema.type, "object", tool.name);
        assert.equal(tool.outputSchema?.type, "object", tool.name);
        assert.ok(tool.description?.length > 10, tool.name);
      }
      const inv = tools.find((t) => t.name === "get_inventory");
      assert.deepEqual(inv.inputSchema.required, ["storeId"]);
      assert.equal(inv.inputSchema.properties.storeId.type, "integer");
      const adjust = tools.find((t) => t.name === "adjust_stock");
      assert.deepEqual([...adjust.inputSchema.required].sort(), ["delta", "productId", "storeId"]);

      const dash = tools.find((t) => t.name === "show_store_inventory_dashboard");
      assert.equal(dash._meta.ui.resourceUri, DASHBOARD_URI);
      assert.equal(dash._meta.ui.visibility, undefined);
      const appOnly = tools.filter((t) => t._meta?.ui?.visibility?.length === 1 && t._meta.ui.visibility[0] === "app");
      assert.deepEqual(appOnly.map((t) => t.name), ["refresh_dashboard_data"]);
      assert.equal(appOnly[0]._meta.ui.resourceUri, DASHBOARD_URI);
    });

    it("lists the UI resource and the two templates, and reads them", async () => {
      const { resources } = await client.listResources();
      assert.deepEqual(resources.map((r) => r.uri), [DASHBOARD_URI]);
      assert.equal(resources[0].mimeType, "text/html;profile=mcp-app");
      const { resourceTemplates } = await client.listResourceTemplates();
      assert.deepEqual(resourceTemplates.map((t) => t.uriTemplate).sort(), [
        "inventory://products/{productId}/details",
        "inventory://stores/{storeId}/summary",
      ]);

      const ui = await client.readResource({ uri: DASHBOARD_URI });
      assert.equal(ui.contents[0].mimeType, "text/html;profile=mcp-app");
      assert.match(ui.contents[0].text, /^<!doctype html>/i);
      assert.deepEqual(ui.contents[0]._meta.ui.csp.connectDomains, []);
      assert.deepEqual(ui.contents[0]._meta.ui.csp.resourceDomains, []);

      const summary = await readJson(client, "inventory://stores/2/summary");
      assert.equal(summary.store.name, "Uptown Grocery");
      assert.equal(summary.items.length, 30);
      assert.equal(summary.totals.lowStockCount, summary.items.filter((i) => i.isLowStock).length);
      const details = await readJson(client, "inventory://products/7/details");
      assert.equal(details.product.id, 7);
      assert.equal(details.stock.length, 4);
      assert.ok(details.supplier.contactEmail.includes("@"));

      await assert.rejects(client.readResource({ uri: "inventory://stores/99/summary" }), /storeId/);
      await assert.rejects(client.readResource({ uri: "inventory://products/abc/details" }), /productId/);
    });

    it("lists the 3 prompts and renders them with live data", async () => {
      const { prompts } = await client.listPrompts();
      assert.deepEqual(prompts.map((p) => p.name).sort(), [
        "analyze_store_performance", "draft_supplier_order", "explain_inventory_term",
      ]);
      const order = prompts.find((p) => p.name === "draft_supplier_order");
      assert.deepEqual(order.arguments.filter((a) => a.required).map((a) => a.name).sort(), ["supplierId", "urgency"]);

      const analysis = await client.getPrompt({ name: "analyze_store_performance", arguments: { storeId: "1" } });
      assert.match(analysis.messages[0].content.text, /Downtown Market/);
      for (const urgency of ["routine", "urgent", "emergency"]) {
        const p = await client.getPrompt({ name: "draft_supplier_order", arguments: { supplierId: "2", urgency } });
        assert.match(p.messages[0].content.text, /Pacific Dairy Co-op/);
        assert.match(p.messages[0].content.text.toLowerCase(), new RegExp(urgency));
      }
      const term = await client.getPrompt({ name: "explain_inventory_term", arguments: { term: "safety stock" } });
      assert.match(term.messages[0].content.text, /safety stock/);

      await assert.rejects(client.getPrompt({ name: "draft_supplier_order", arguments: { supplierId: "2", urgency: "whenever" } }), /urgency/);
      await assert.rejects(client.getPrompt({ name: "analyze_store_performance", arguments: { storeId: "9" } }), /storeId/);
    });

    it("answers completions for prompt arguments and template variables", async () => {
      const complete = async (ref, name, value) => (await client.complete({ ref, argument: { name, value } })).completion.values;
      assert.deepEqual(await complete({ type: "ref/prompt", name: "analyze_store_performance" }, "storeId", ""), ["1", "2", "3", "4"]);
      assert.deepEqual(await complete({ type: "ref/prompt", name: "analyze_store_performance" }, "storeId", "upt"), ["2"]);
      assert.deepEqual(await complete({ type: "ref/prompt", name: "draft_supplier_order" }, "urgency", "e"), ["emergency"]);
      assert.deepEqual(await complete({ type: "ref/prompt", name: "draft_supplier_order" }, "urgency", ""), ["routine", "urgent", "emergency"]);
      assert.equal((await complete({ type: "ref/prompt", name: "draft_supplier_order" }, "supplierId", "")).length, 5);
      assert.ok((await complete({ type: "ref/prompt", name: "explain_inventory_term" }, "term", "stock")).includes("safety stock"));
      assert.deepEqual(await complete({ type: "ref/resource", uri: "inventory://stores/{storeId}/summary" }, "storeId", "down"), ["1"]);
      const products = await complete({ type: "ref/resource", uri: "inventory://products/{productId}/details" }, "productId", "");
      assert.equal(products.length, 30);
      assert.deepEqual(await complete({ type: "ref/resource", uri: "inventory://products/{productId}/details" }, "productId", "3"), ["3", "30"]);
    });

    for (const call of CALLS) {
      it(`${call.name}: valid arguments succeed, invalid ones give a tool error naming the argument`, async () => {
        const ok = await client.callTool({ name: call.name, arguments: call.valid });
        assert.notEqual(ok.isError, true, `${call.name} failed: ${text(ok)}`);
        assert.ok(ok.structuredContent, `${call.name} has structuredContent`);
        call.check(ok);
        for (const bad of call.invalid) {
          const res = await client.callTool({ name: call.name, arguments: bad.args });
          assert.equal(res.isError, true, `${call.name}(${JSON.stringify(bad.args)}) should fail: ${text(res)}`);
          assert.ok(text(res).includes(bad.arg), `${call.name}(${JSON.stringify(bad.args)}): "${text(res)}" does not name ${bad.arg}`);
        }
      });
    }

    it("covers every listed tool in the call table", async () => {
      const { tools } = await client.listTools();
      assert.deepEqual(tools.map((t) => t.name).sort(), CALLS.map((c) => c.name).sort());
    });
  });
}

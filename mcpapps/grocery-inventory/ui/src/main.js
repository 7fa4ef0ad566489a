// The Grocery Inventory dashboard: an MCP App view.
//
// It runs in the host's sandboxed iframe and talks to the host only through the official
// `App` class (postMessage JSON-RPC). Data arrives with the tool call that opened it
// (`ui/notifications/tool-input` / `tool-result`); changes go back as `tools/call` through the
// host: `adjust_stock` for a quantity change, then the app-only `refresh_dashboard_data` to
// reload totals. `App` reports the page size to the host on every layout change (autoResize).

import { App } from "@modelcontextprotocol/ext-apps";

const $ = (selector) => document.querySelector(selector);

/** What the view shows; `data` is the DashboardData the server returns. */
const state = {
  data: null,
  selectedStoreId: null,
  onlyLow: false,
  requestedStoreId: undefined,
  busy: false,
};

const app = new App(
  { name: "grocery-store-dashboard", version: "1.0.0" },
  {},
  { autoResize: true },
);

function setStatus(text, kind = "ok") {
  const el = $("#status");
  el.textContent = text;
  el.dataset.state = kind;
}

function money(value) {
  return value.toLocaleString("en-US", { style: "currency", currency: "USD" });
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function currentStore() {
  if (!state.data) return undefined;
  return state.data.stores.find((s) => s.store.id === state.selectedStoreId) ?? state.data.stores[0];
}

function render() {
  const data = state.data;
  if (!data || !data.stores?.length) return;
  if (!data.stores.some((s) => s.store.id === state.selectedStoreId)) {
    state.selectedStoreId = data.selectedStoreId ?? data.stores[0].store.id;
  }
  $("#title").textContent = data.title ?? "Store inventory";

  const tabs = data.stores.map((s) =>
    el(
      "button",
      {
        type: "button",
        role: "tab",
        "aria-selected": String(s.store.id === state.selectedStoreId),
        dataset: { storeTab: s.store.id },
        onclick: () => {
          state.selectedStoreId = s.store.id;
          render();
        },
      },
      el("span", {}, s.store.name, " ",
        s.totals.lowStockCount > 0
          ? el("span", { class: "badge low" }, `${s.totals.lowStockCount} low`)
          : el("span", { class: "badge ok" }, "OK")),
      el("span", { class: "where" }, `${s.store.city}, ${s.store.state}`),
    ),
  );
  $("#stores").replaceChildren(...tabs);

  const store = currentStore();
  const totals = $("#totals");
  totals.hidden = false;
  totals.replaceChildren(
    el("span", {}, el("strong", {}, store.totals.productCount), " products"),
    el("span", {}, el("strong", {}, store.totals.totalUnits.toLocaleString("en-US")), " units on hand"),
    el("span", {}, el("strong", {}, money(store.totals.inventoryValue)), " inventory value"),
    el("span", { dataset: { lowCount: store.totals.lowStockCount } },
      el("strong", {}, store.totals.lowStockCount), " below reorder threshold"),
  );

  const rows = store.items
    .filter((item) => !state.onlyLow || item.isLowStock)
    .map((item) => row(store.store, item));
  $("#inventory tbody").replaceChildren(...rows);
  $("#inventory").hidden = false;
  $("#empty").hidden = rows.length > 0;
  $("#empty").textContent = rows.length ? "" : "No products match.";
}

function row(store, item) {
  const input = el("input", {
    type: "number",
    min: "0",
    step: "1",
    value: item.quantityOnHand,
    "aria-label": `Quantity of ${item.productName} at ${store.name}`,
    dataset: { productId: item.productId },
  });
  const commit = () => {
    const next = Number.parseInt(input.value, 10);
    if (!Number.isFinite(next) || next < 0) {
      input.value = item.quantityOnHand;
      setStatus(`Quantity for ${item.productName} must be a whole number, 0 or more.`, "error");
      return;
    }
    changeQuantity(store, item, next - item.quantityOnHand, input);
  };
  input.addEventListener("change", commit);
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter") input.blur();
  });
  return el(
    "tr",
    { class: item.isLowStock ? "low" : "", dataset: { productId: item.productId } },
    el("td", {}, item.productName, el("span", { class: "sku" }, item.sku)),
    el("td", {}, item.categoryName),
    el(
      "td",
      { class: "num" },
      el(
        "span",
        { class: "qty" },
        el("button", { type: "button", title: "Remove one", "aria-label": `Remove one ${item.productName}`,
          onclick: () => changeQuantity(store, item, -1, input), disabled: item.quantityOnHand <= 0 }, "−"),
        input,
        el("button", { type: "button", title: "Add one", "aria-label": `Add one ${item.productName}`,
          onclick: () => changeQuantity(store, item, 1, input) }, "+"),
        el("span", { class: "unit" }, item.unitOfMeasure),
      ),
    ),
    el("td", { class: "num" }, item.reorderThreshold),
    el("td", {}, item.isLowStock ? el("span", { class: "badge low" }, "Low stock") : el("span", { class: "badge ok" }, "In stock")),
    el("td", {}, item.lastRestocked),
  );
}

/** Text of the first text block of a tool result, for error messages. */
function resultText(result) {
  const block = result?.content?.find((c) => c.type === "text");
  return block?.text ?? "unknown error";
}

async function changeQuantity(store, item, delta, input) {
  if (delta === 0 || state.busy) return;
  state.busy = true;
  input.closest("tr")?.classList.add("saving");
  setStatus(`Saving ${item.productName} at ${store.name}…`);
  try {
    const result = await app.callServerTool({
      name: "adjust_stock",
      arguments: { storeId: store.id, productId: item.productId, delta, reason: "dashboard edit" },
    });
    if (result.isError) {
      setStatus(resultText(result), "error");
      input.value = item.quantityOnHand;
      return;
    }
    const updated = result.structuredContent?.item;
    if (updated) Object.assign(item, updated);
    setStatus(`${item.productName} at ${store.name}: ${updated?.quantityOnHand ?? "updated"} ${item.unitOfMeasure}`);
    await refresh({ quiet: true });
  } catch (error) {
    setStatus(`Could not save: ${error?.message ?? error}`, "error");
    input.value = item.quantityOnHand;
  } finally {
    state.busy = false;
    render();
  }
}

/** Reloads everything through the app-only tool. */
async function refresh({ quiet = false } = {}) {
  if (!quiet) setStatus("Refreshing…");
  const args = state.requestedStoreId === undefined ? {} : { storeId: state.requestedStoreId };
  const result = await app.callServerTool({ name: "refresh_dashboard_data", arguments: args });
  if (result.isError) {
    setStatus(resultText(result), "error");
    return;
  }
  applyData(result.structuredContent);
  if (!quiet) setStatus(`Updated ${new Date().toLocaleTimeString()}`);
}

function applyData(data) {
  if (!data || !Array.isArray(data.stores)) return false;
  state.data = data;
  render();
  return true;
}

function applyTheme(context) {
  if (context?.theme) document.documentElement.dataset.theme = context.theme;
}

app.ontoolinput = (params) => {
  const storeId = params.arguments?.storeId;
  state.requestedStoreId = typeof storeId === "number" ? storeId : undefined;
  if (state.requestedStoreId !== undefined) state.selectedStoreId = state.requestedStoreId;
  setStatus("Loading inventory…");
};

app.ontoolresult = (result) => {
  if (result.isError) {
    setStatus(resultText(result), "error");
    return;
  }
  if (applyData(result.structuredContent)) {
    const low = state.data.lowStockTotal;
    setStatus(`${state.data.stores.length} store(s), ${low} product(s) below reorder threshold`);
  } else {
    // Some hosts strip structuredContent: fetch the data ourselves.
    refresh().catch((error) => setStatus(`Could not load data: ${error?.message ?? error}`, "error"));
  }
};

app.ontoolcancelled = () => setStatus("The tool call was cancelled.", "error");
app.onhostcontextchanged = (context) => applyTheme(context);
app.onteardown = async () => ({});

$("#only-low").addEventListener("change", (event) => {
  state.onlyLow = event.target.checked;
  render();
});
$("#refresh").addEventListener("click", () => {
  refresh().catch((error) => setStatus(`Could not refresh: ${error?.message ?? error}`, "error"));
});

app
  .connect()
  .then(() => {
    applyTheme(app.getHostContext());
    $("#refresh").disabled = false;
    document.body.dataset.connected = "true";
    if (!state.data) setStatus("Connected; waiting for inventory data…");
  })
  .catch((error) => setStatus(`Could not connect to the host: ${error?.message ?? error}`, "error"));

//! The in-memory inventory service and its deterministic seed data.
//!
//! One [`InventoryService`] is shared (behind an `Arc`) by every MCP session and by the REST API, so a
//! change made through any of them is seen by all. Stock changes are also published on a broadcast
//! channel: the MCP layer turns them into `notifications/resources/updated` for subscribed clients,
//! whichever door the change came through.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};

use parking_lot::RwLock;
use tokio::sync::broadcast;

use crate::model::*;

/// Why a request on the inventory could not be served. Every variant names the argument at
/// fault, because callers (a model, a person) fix their call by that name.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InventoryError {
    #[error("Invalid argument `{argument}`: no {kind} with id {id} (known ids: {known})")]
    UnknownId {
        argument: &'static str,
        kind: &'static str,
        id: u32,
        known: String,
    },
    #[error("Invalid argument `{argument}`: {reason}")]
    InvalidValue {
        argument: &'static str,
        reason: String,
    },
}

impl InventoryError {
    /// The name of the argument that was wrong.
    pub fn argument(&self) -> &'static str {
        match self {
            InventoryError::UnknownId { argument, .. } | InventoryError::InvalidValue { argument, .. } => argument,
        }
    }

    fn invalid(argument: &'static str, reason: impl Into<String>) -> Self {
        InventoryError::InvalidValue {
            argument,
            reason: reason.into(),
        }
    }
}

pub type Result<T> = std::result::Result<T, InventoryError>;

/// A stock level changed: which store and product.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StockChange {
    pub store_id: u32,
    pub product_id: u32,
}

/// The reference data, fixed after seeding.
struct Catalog {
    stores: Vec<Store>,
    categories: Vec<Category>,
    products: Vec<Product>,
    suppliers: Vec<Supplier>,
}

/// The store × product stock table and everything the chain knows about its products.
pub struct InventoryService {
    catalog: Catalog,
    inventory: RwLock<BTreeMap<(u32, u32), InventoryItem>>,
    next_po: AtomicU32,
    changes: broadcast::Sender<StockChange>,
}

impl Default for InventoryService {
    fn default() -> Self {
        Self::seeded()
    }
}

fn known<T>(items: &[T], id: impl Fn(&T) -> u32) -> String {
    items.iter().map(|i| id(i).to_string()).collect::<Vec<_>>().join(", ")
}

/// Rounds money to cents so totals print cleanly.
fn cents(value: f64) -> f64 {
    (value * 100.0).round() / 100.0
}

impl InventoryService {
    /// The demo chain: 4 stores, 6 categories, 30 products, 5 suppliers and a stock row for every
    /// store × product, some below their reorder threshold. Always the same, so tests and demos
    /// can rely on it.
    pub fn seeded() -> Self {
        let stores = vec![
            store(1, "Downtown Market", "Portland", "OR"),
            store(2, "Uptown Grocery", "Seattle", "WA"),
            store(3, "Harbor Fresh", "San Francisco", "CA"),
            store(4, "Riverside Foods", "Boise", "ID"),
        ];
        let categories = vec![
            category(1, "Produce", "Fresh fruit and vegetables"),
            category(2, "Dairy & Eggs", "Milk, cheese, yogurt and eggs"),
            category(3, "Bakery", "Bread and baked goods"),
            category(4, "Meat & Seafood", "Fresh and frozen meat and fish"),
            category(5, "Pantry", "Dry goods, canned food and staples"),
            category(6, "Beverages", "Coffee, tea, juice and water"),
        ];
        let suppliers = vec![
            supplier(1, "Green Valley Farms", "orders@greenvalleyfarms.example", "+1-503-555-0101"),
            supplier(2, "Pacific Dairy Co-op", "sales@pacificdairy.example", "+1-206-555-0142"),
            supplier(3, "Golden Crust Bakery Supply", "hello@goldencrust.example", "+1-415-555-0177"),
            supplier(4, "Cascade Meats & Seafood", "orders@cascademeats.example", "+1-208-555-0123"),
            supplier(5, "Northwest Pantry Distributors", "supply@nwpantry.example", "+1-360-555-0190"),
        ];
        // (sku, name, category, price, unit, supplier)
        let rows: [(&str, &str, u32, f64, &str, u32); 30] = [
            ("PRD-APL-001", "Honeycrisp Apples", 1, 2.49, "lb", 1),
            ("PRD-BAN-002", "Bananas", 1, 0.69, "lb", 1),
            ("PRD-CAR-003", "Organic Carrots", 1, 1.29, "lb", 1),
            ("PRD-SPN-004", "Baby Spinach", 1, 3.99, "bag", 1),
            ("PRD-AVO-005", "Hass Avocados", 1, 1.50, "each", 1),
            ("DRY-MLK-006", "Whole Milk", 2, 3.79, "gallon", 2),
            ("DRY-EGG-007", "Large Brown Eggs", 2, 4.99, "dozen", 2),
            ("DRY-CHD-008", "Sharp Cheddar", 2, 5.49, "block", 2),
            ("DRY-YOG-009", "Greek Yogurt", 2, 1.29, "cup", 2),
            ("DRY-BTR-010", "Salted Butter", 2, 4.29, "lb", 2),
            ("BAK-SDG-011", "Sourdough Loaf", 3, 5.99, "loaf", 3),
            ("BAK-BAG-012", "Everything Bagels", 3, 6.49, "6-pack", 3),
            ("BAK-CRS-013", "Butter Croissants", 3, 7.99, "4-pack", 3),
            ("BAK-WWB-014", "Whole Wheat Bread", 3, 3.99, "loaf", 3),
            ("BAK-MUF-015", "Blueberry Muffins", 3, 5.49, "4-pack", 3),
            ("MEA-CHK-016", "Chicken Breast", 4, 6.99, "lb", 4),
            ("MEA-GRB-017", "Ground Beef 85%", 4, 5.99, "lb", 4),
            ("MEA-SAL-018", "Atlantic Salmon Fillet", 4, 12.99, "lb", 4),
            ("MEA-BAC-019", "Thick-Cut Bacon", 4, 7.49, "pack", 4),
            ("MEA-SHR-020", "Wild Shrimp", 4, 14.99, "lb", 4),
            ("PAN-RCE-021", "Jasmine Rice", 5, 8.99, "5 lb bag", 5),
            ("PAN-PST-022", "Spaghetti", 5, 1.79, "box", 5),
            ("PAN-TOM-023", "Crushed Tomatoes", 5, 2.29, "can", 5),
            ("PAN-OIL-024", "Extra Virgin Olive Oil", 5, 11.99, "bottle", 5),
            ("PAN-PNB-025", "Peanut Butter", 5, 3.99, "jar", 5),
            ("BEV-COF-026", "Dark Roast Coffee", 6, 10.99, "12 oz bag", 5),
            ("BEV-OJ-027", "Orange Juice", 6, 4.49, "half gallon", 1),
            ("BEV-TEA-028", "Green Tea", 6, 3.49, "20 bags", 5),
            ("BEV-WTR-029", "Sparkling Water", 6, 5.99, "12-pack", 5),
            ("BEV-KMB-030", "Ginger Kombucha", 6, 3.29, "bottle", 2),
        ];
        let products: Vec<Product> = rows
            .iter()
            .enumerate()
            .map(|(index, (sku, name, category_id, unit_price, unit, supplier_id))| Product {
                id: index as u32 + 1,
                sku: sku.to_string(),
                name: name.to_string(),
                category_id: *category_id,
                unit_price: *unit_price,
                unit_of_measure: unit.to_string(),
                supplier_id: *supplier_id,
            })
            .collect();

        let mut inventory = BTreeMap::new();
        for s in &stores {
            for p in &products {
                let (sid, pid) = (s.id as i64, p.id as i64);
                let reorder_threshold = 10 + (pid * 7) % 25;
                // About one row in six is below its threshold, spread over stores and suppliers.
                let low = (sid * 31 + pid * 17) % 6 == 0;
                let quantity_on_hand = if low {
                    reorder_threshold / 3
                } else {
                    reorder_threshold + 5 + (sid * 13 + pid * 29) % 80
                };
                let day = 1 + (sid * 5 + pid * 3) % 28;
                inventory.insert(
                    (s.id, p.id),
                    InventoryItem {
                        store_id: s.id,
                        product_id: p.id,
                        quantity_on_hand,
                        reorder_threshold,
                        last_restocked: format!("2026-01-{day:02}"),
                    },
                );
            }
        }
        let (changes, _) = broadcast::channel(256);
        InventoryService {
            catalog: Catalog {
                stores,
                categories,
                products,
                suppliers,
            },
            inventory: RwLock::new(inventory),
            next_po: AtomicU32::new(1001),
            changes,
        }
    }

    /// Receives every stock change from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<StockChange> {
        self.changes.subscribe()
    }

    pub fn stores(&self) -> Vec<Store> {
        self.catalog.stores.clone()
    }

    pub fn categories(&self) -> Vec<Category> {
        self.catalog.categories.clone()
    }

    pub fn suppliers(&self) -> Vec<Supplier> {
        self.catalog.suppliers.clone()
    }

    pub fn all_products(&self) -> &[Product] {
        &self.catalog.products
    }

    pub fn store(&self, id: u32) -> Result<Store> {
        self.catalog
            .stores
            .iter()
            .find(|s| s.id == id)
            .cloned()
            .ok_or_else(|| InventoryError::UnknownId {
                argument: "storeId",
                kind: "store",
                id,
                known: known(&self.catalog.stores, |s| s.id),
            })
    }

    pub fn product(&self, id: u32) -> Result<Product> {
        self.catalog
            .products
            .iter()
            .find(|p| p.id == id)
            .cloned()
            .ok_or_else(|| InventoryError::UnknownId {
                argument: "productId",
                kind: "product",
                id,
                known: format!("1–{}", self.catalog.products.len()),
            })
    }

    pub fn supplier(&self, id: u32) -> Result<Supplier> {
        self.catalog
            .suppliers
            .iter()
            .find(|s| s.id == id)
            .cloned()
            .ok_or_else(|| InventoryError::UnknownId {
                argument: "supplierId",
                kind: "supplier",
                id,
                known: known(&self.catalog.suppliers, |s| s.id),
            })
    }

    pub fn category(&self, id: u32) -> Result<Category> {
        self.catalog
            .categories
            .iter()
            .find(|c| c.id == id)
            .cloned()
            .ok_or_else(|| InventoryError::UnknownId {
                argument: "categoryId",
                kind: "category",
                id,
                known: known(&self.catalog.categories, |c| c.id),
            })
    }

    /// Products, optionally of one category and/or whose name or SKU contains `search`
    /// (case-insensitive).
    pub fn products(&self, category_id: Option<u32>, search: Option<&str>) -> Result<Vec<Product>> {
        if let Some(id) = category_id {
            self.category(id)?;
        }
        let needle = search.map(|s| s.trim().to_lowercase()).filter(|s| !s.is_empty());
        Ok(self
            .catalog
            .products
            .iter()
            .filter(|p| category_id.is_none_or(|c| p.category_id == c))
            .filter(|p| {
                needle
                    .as_ref()
                    .is_none_or(|n| p.name.to_lowercase().contains(n) || p.sku.to_lowercase().contains(n))
            })
            .cloned()
            .collect())
    }

    fn view(&self, item: &InventoryItem) -> InventoryView {
        let store = self.catalog.stores.iter().find(|s| s.id == item.store_id);
        let product = self.catalog.products.iter().find(|p| p.id == item.product_id);
        let category = product.and_then(|p| self.catalog.categories.iter().find(|c| c.id == p.category_id));
        InventoryView {
            store_id: item.store_id,
            store_name: store.map(|s| s.name.clone()).unwrap_or_default(),
            product_id: item.product_id,
            sku: product.map(|p| p.sku.clone()).unwrap_or_default(),
            product_name: product.map(|p| p.name.clone()).unwrap_or_default(),
            category_name: category.map(|c| c.name.clone()).unwrap_or_default(),
            unit_of_measure: product.map(|p| p.unit_of_measure.clone()).unwrap_or_default(),
            unit_price: product.map(|p| p.unit_price).unwrap_or_default(),
            quantity_on_hand: item.quantity_on_hand,
            reorder_threshold: item.reorder_threshold,
            last_restocked: item.last_restocked.clone(),
            is_low_stock: item.quantity_on_hand < item.reorder_threshold,
        }
    }

    /// A store's stock rows, or just one product's row when `product_id` is given.
    pub fn inventory(&self, store_id: u32, product_id: Option<u32>) -> Result<Vec<InventoryView>> {
        self.store(store_id)?;
        if let Some(pid) = product_id {
            self.product(pid)?;
        }
        let inventory = self.inventory.read();
        Ok(inventory
            .values()
            .filter(|i| i.store_id == store_id && product_id.is_none_or(|p| i.product_id == p))
            .map(|i| self.view(i))
            .collect())
    }

    /// Everything about one store: its rows and totals.
    pub fn store_inventory(&self, store_id: u32) -> Result<StoreInventory> {
        let store = self.store(store_id)?;
        let items = self.inventory(store_id, None)?;
        let totals = StoreTotals {
            product_count: items.len(),
            low_stock_count: items.iter().filter(|i| i.is_low_stock).count(),
            total_units: items.iter().map(|i| i.quantity_on_hand).sum(),
            inventory_value: cents(items.iter().map(|i| i.quantity_on_hand as f64 * i.unit_price).sum()),
        };
        Ok(StoreInventory { store, totals, items })
    }

    /// Every store's [`StoreInventory`], in store order.
    pub fn all_store_inventories(&self) -> Vec<StoreInventory> {
        self.catalog
            .stores
            .iter()
            .filter_map(|s| self.store_inventory(s.id).ok())
            .collect()
    }

    /// Rows below their reorder threshold, in one store or in all of them.
    pub fn low_stock(&self, store_id: Option<u32>) -> Result<Vec<InventoryView>> {
        if let Some(id) = store_id {
            self.store(id)?;
        }
        let inventory = self.inventory.read();
        Ok(inventory
            .values()
            .filter(|i| store_id.is_none_or(|s| i.store_id == s))
            .filter(|i| i.quantity_on_hand < i.reorder_threshold)
            .map(|i| self.view(i))
            .collect())
    }

    /// One product with its category, supplier and stock in every store.
    pub fn product_details(&self, product_id: u32) -> Result<ProductDetails> {
        let product = self.product(product_id)?;
        let category = self.category(product.category_id)?;
        let supplier = self.supplier(product.supplier_id)?;
        let inventory = self.inventory.read();
        let stock: Vec<InventoryView> = inventory
            .values()
            .filter(|i| i.product_id == product_id)
            .map(|i| self.view(i))
            .collect();
        let total_on_hand = stock.iter().map(|s| s.quantity_on_hand).sum();
        Ok(ProductDetails {
            product,
            category,
            supplier,
            stock,
            total_on_hand,
        })
    }

    fn publish(&self, store_id: u32, product_id: u32) {
        // No receiver is fine: nobody is subscribed.
        let _ = self.changes.send(StockChange { store_id, product_id });
    }

    /// Sets the counted quantity (and optionally a new reorder threshold) of one row.
    pub fn set_inventory(
        &self,
        store_id: u32,
        product_id: u32,
        quantity: i64,
        reorder_threshold: Option<i64>,
    ) -> Result<InventoryView> {
        self.store(store_id)?;
        self.product(product_id)?;
        if quantity < 0 {
            return Err(InventoryError::invalid("quantity", format!("must be 0 or more, got {quantity}")));
        }
        if let Some(t) = reorder_threshold {
            if t < 0 {
                return Err(InventoryError::invalid("reorderThreshold", format!("must be 0 or more, got {t}")));
            }
        }
        let view = {
            let mut inventory = self.inventory.write();
            let item = inventory
                .get_mut(&(store_id, product_id))
                .expect("every store × product row is seeded");
            item.quantity_on_hand = quantity;
            if let Some(t) = reorder_threshold {
                item.reorder_threshold = t;
            }
            item.last_restocked = today();
            self.view(item)
        };
        self.publish(store_id, product_id);
        Ok(view)
    }

    /// Adds `delta` (negative for sales or waste) to one row. Returns the previous quantity and
    /// the new row. Refuses a change that would make the stock negative.
    pub fn adjust_stock(&self, store_id: u32, product_id: u32, delta: i64) -> Result<(i64, InventoryView)> {
        self.store(store_id)?;
        self.product(product_id)?;
        if delta == 0 {
            return Err(InventoryError::invalid("delta", "must not be 0"));
        }
        let (previous, view) = {
            let mut inventory = self.inventory.write();
            let item = inventory
                .get_mut(&(store_id, product_id))
                .expect("every store × product row is seeded");
            let previous = item.quantity_on_hand;
            let next = previous.checked_add(delta).filter(|n| *n >= 0).ok_or_else(|| {
                InventoryError::invalid(
                    "delta",
                    format!("{delta} would make the stock negative (quantity on hand is {previous})"),
                )
            })?;
            item.quantity_on_hand = next;
            if delta > 0 {
                item.last_restocked = today();
            }
            (previous, self.view(item))
        };
        self.publish(store_id, product_id);
        Ok((previous, view))
    }

    /// For every low-stock row (in one store or all): how much to order to get back to twice the
    /// threshold, and from whom.
    pub fn restock_recommendations(&self, store_id: Option<u32>) -> Result<Vec<RestockRecommendation>> {
        let low = self.low_stock(store_id)?;
        low.into_iter()
            .map(|row| {
                let product = self.product(row.product_id)?;
                let supplier = self.supplier(product.supplier_id)?;
                let recommended_quantity = row.reorder_threshold * 2 - row.quantity_on_hand;
                Ok(RestockRecommendation {
                    store_id: row.store_id,
                    store_name: row.store_name,
                    product_id: row.product_id,
                    product_name: row.product_name,
                    supplier_id: supplier.id,
                    supplier_name: supplier.name,
                    quantity_on_hand: row.quantity_on_hand,
                    reorder_threshold: row.reorder_threshold,
                    recommended_quantity,
                    estimated_cost: cents(recommended_quantity as f64 * product.unit_price),
                })
            })
            .collect()
    }

    /// Drafts a purchase order for one store. Lines are `items` when given, else the store's
    /// restock recommendations for the supplier (by default the supplier with the most
    /// low-stock products there).
    pub fn draft_purchase_order(
        &self,
        store_id: u32,
        supplier_id: Option<u32>,
        urgency: Urgency,
        items: Option<&[(u32, i64)]>,
        notes: Option<String>,
    ) -> Result<PurchaseOrder> {
        let store = self.store(store_id)?;
        if let Some(id) = supplier_id {
            self.supplier(id)?;
        }
        let mut lines: Vec<(Product, i64)> = Vec::new();
        let supplier_id = match items {
            Some([]) => return Err(InventoryError::invalid("items", "must list at least one product")),
            Some(items) => {
                for (pid, qty) in items {
                    let product = self.product(*pid).map_err(|_| {
                        InventoryError::invalid("items", format!("no product with id {pid}"))
                    })?;
                    if *qty <= 0 {
                        return Err(InventoryError::invalid("items", format!("quantity for product {pid} must be more than 0")));
                    }
                    lines.push((product, *qty));
                }
                let first = supplier_id.unwrap_or(lines[0].0.supplier_id);
                if let Some((p, _)) = lines.iter().find(|(p, _)| p.supplier_id != first) {
                    return Err(InventoryError::invalid(
                        "items",
                        format!("{} (product {}) is not supplied by supplier {first}", p.name, p.id),
                    ));
                }
                first
            }
            None => {
                let recs = self.restock_recommendations(Some(store_id))?;
                let chosen = match supplier_id {
                    Some(id) => id,
                    None => {
                        let mut counts: BTreeMap<u32, usize> = BTreeMap::new();
                        for r in &recs {
                            *counts.entry(r.supplier_id).or_default() += 1;
                        }
                        let best = counts.iter().max_by_key(|(id, n)| (**n, std::cmp::Reverse(**id)));
                        *best
                            .ok_or_else(|| {
                                InventoryError::invalid("storeId", format!("{} has no low-stock products to order", store.name))
                            })?
                            .0
                    }
                };
                for r in recs.iter().filter(|r| r.supplier_id == chosen) {
                    lines.push((self.product(r.product_id)?, r.recommended_quantity));
                }
                if lines.is_empty() {
                    return Err(InventoryError::invalid(
                        "supplierId",
                        format!("nothing from supplier {chosen} is below its reorder threshold at {}", store.name),
                    ));
                }
                chosen
            }
        };
        let supplier = self.supplier(supplier_id)?;
        let lines: Vec<PurchaseOrderLine> = lines
            .into_iter()
            .map(|(p, quantity)| PurchaseOrderLine {
                product_id: p.id,
                sku: p.sku,
                product_name: p.name,
                quantity,
                unit_of_measure: p.unit_of_measure,
                unit_price: p.unit_price,
                line_total: cents(quantity as f64 * p.unit_price),
            })
            .collect();
        let total = cents(lines.iter().map(|l| l.line_total).sum());
        let number = self.next_po.fetch_add(1, Ordering::Relaxed);
        Ok(PurchaseOrder {
            po_number: format!("PO-{store_id}-{number}"),
            status: "draft".into(),
            store,
            supplier,
            urgency,
            requested_delivery: date_after_days(urgency.lead_days()),
            lines,
            total,
            notes,
        })
    }
}

fn store(id: u32, name: &str, city: &str, state: &str) -> Store {
    Store {
        id,
        name: name.into(),
        city: city.into(),
        state: state.into(),
    }
}

fn category(id: u32, name: &str, description: &str) -> Category {
    Category {
        id,
        name: name.into(),
        description: description.into(),
    }
}

fn supplier(id: u32, name: &str, email: &str, phone: &str) -> Supplier {
    Supplier {
        id,
        name: name.into(),
        contact_email: email.into(),
        phone: phone.into(),
    }
}

/// Today's date (UTC) as YYYY-MM-DD.
pub fn today() -> String {
    date_after_days(0)
}

/// The date `days` from today (UTC) as YYYY-MM-DD; civil-from-days after Howard Hinnant, so no
/// date crate is needed for this one use.
pub fn date_after_days(days: u32) -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let z = (secs / 86_400) as i64 + days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + if month <= 2 { 1 } else { 0 };
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_has_the_promised_shape() {
        let s = InventoryService::seeded();
        assert_eq!(s.stores().len(), 4);
        assert_eq!(s.categories().len(), 6);
        assert_eq!(s.all_products().len(), 30);
        assert_eq!(s.suppliers().len(), 5);
        assert_eq!(s.store(1).unwrap().name, "Downtown Market");
        assert_eq!(s.store(2).unwrap().city, "Seattle");
        for store in s.stores() {
            assert_eq!(s.inventory(store.id, None).unwrap().len(), 30);
            assert!(!s.low_stock(Some(store.id)).unwrap().is_empty(), "store {} has low stock", store.id);
        }
    }

    #[test]
    fn adjust_refuses_negative_stock_and_names_delta() {
        let s = InventoryService::seeded();
        let before = s.inventory(1, Some(1)).unwrap()[0].quantity_on_hand;
        let err = s.adjust_stock(1, 1, -(before + 1)).unwrap_err();
        assert_eq!(err.argument(), "delta");
        let (prev, row) = s.adjust_stock(1, 1, 5).unwrap();
        assert_eq!((prev, row.quantity_on_hand), (before, before + 5));
        assert_eq!(s.store(9).unwrap_err().argument(), "storeId");
    }

    #[test]
    fn purchase_order_defaults_to_the_busiest_supplier() {
        let s = InventoryService::seeded();
        let po = s.draft_purchase_order(1, None, Urgency::Urgent, None, None).unwrap();
        assert!(!po.lines.is_empty());
        assert!(po.lines.iter().all(|l| s.product(l.product_id).unwrap().supplier_id == po.supplier.id));
    }

    #[test]
    fn date_is_well_formed() {
        let d = today();
        assert_eq!(d.len(), 10);
        assert!(d.starts_with("20"));
    }
}

//! The resources: the dashboard UI and two templates (a store's summary and a product's
//! details), all read from the live inventory.

use rmcp::model::{MetaObject, ReadResourceResult, Resource, ResourceContents, ResourceTemplate};
use rmcp::ErrorData as McpError;

use crate::dashboard::{resource_ui_meta, DASHBOARD_HTML, DASHBOARD_MIME, DASHBOARD_URI};
use crate::data::InventoryService;

pub const STORE_SUMMARY_TEMPLATE: &str = "inventory://stores/{storeId}/summary";
pub const PRODUCT_DETAILS_TEMPLATE: &str = "inventory://products/{productId}/details";
const JSON_MIME: &str = "application/json";

pub fn store_summary_uri(store_id: u32) -> String {
    format!("inventory://stores/{store_id}/summary")
}

pub fn product_details_uri(product_id: u32) -> String {
    format!("inventory://products/{product_id}/details")
}

/// A resource URI this server understands. Ids are parsed but not yet checked to exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResourceRef {
    Dashboard,
    StoreSummary(u32),
    ProductDetails(u32),
}

impl ResourceRef {
    /// Parses `uri`; `Err` carries a message naming the part that is wrong.
    pub fn parse(uri: &str) -> Result<Self, String> {
        if uri == DASHBOARD_URI {
            return Ok(ResourceRef::Dashboard);
        }
        let id = |rest: &str, name: &str| {
            rest.parse::<u32>()
                .map_err(|_| format!("`{name}` in {uri} must be a whole number, got {rest:?}"))
        };
        if let Some(rest) = uri.strip_prefix("inventory://stores/").and_then(|r| r.strip_suffix("/summary")) {
            return id(rest, "storeId").map(ResourceRef::StoreSummary);
        }
        if let Some(rest) = uri.strip_prefix("inventory://products/").and_then(|r| r.strip_suffix("/details")) {
            return id(rest, "productId").map(ResourceRef::ProductDetails);
        }
        Err(format!("unknown resource {uri}"))
    }
}

/// The concrete resources (`resources/list`): the dashboard. Store summaries and product
/// details are templates, enumerable through completions.
pub fn list() -> Vec<Resource> {
    let mut meta = MetaObject::new();
    meta.insert("ui".into(), resource_ui_meta());
    vec![Resource::new(DASHBOARD_URI, "store-dashboard")
        .with_title("Grocery store inventory dashboard")
        .with_description("Interactive dashboard of stock per store with low-stock highlighting (MCP App).")
        .with_mime_type(DASHBOARD_MIME)
        .with_meta(meta)]
}

pub fn templates() -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new(STORE_SUMMARY_TEMPLATE, "store-summary")
            .with_title("Store inventory summary")
            .with_description("A store's totals and every inventory row, as JSON. Subscribable: updated on stock changes.")
            .with_mime_type(JSON_MIME),
        ResourceTemplate::new(PRODUCT_DETAILS_TEMPLATE, "product-details")
            .with_title("Product details")
            .with_description("A product with its category, supplier and stock in every store, as JSON.")
            .with_mime_type(JSON_MIME),
    ]
}

/// Checks that `uri` names an existing resource (used by `resources/subscribe` too).
pub fn resolve(service: &InventoryService, uri: &str) -> Result<ResourceRef, McpError> {
    let resource = ResourceRef::parse(uri).map_err(|m| McpError::resource_not_found(m, None))?;
    match &resource {
        ResourceRef::Dashboard => {}
        ResourceRef::StoreSummary(id) => {
            service.store(*id).map_err(|e| McpError::resource_not_found(e.to_string(), None))?;
        }
        ResourceRef::ProductDetails(id) => {
            service.product(*id).map_err(|e| McpError::resource_not_found(e.to_string(), None))?;
        }
    }
    Ok(resource)
}

pub fn read(service: &InventoryService, uri: &str) -> Result<ReadResourceResult, McpError> {
    let json = |value: serde_json::Value| {
        ResourceContents::text(serde_json::to_string_pretty(&value).expect("JSON"), uri).with_mime_type(JSON_MIME)
    };
    let contents = match resolve(service, uri)? {
        ResourceRef::Dashboard => {
            let mut meta = MetaObject::new();
            meta.insert("ui".into(), resource_ui_meta());
            ResourceContents::text(DASHBOARD_HTML, uri)
                .with_mime_type(DASHBOARD_MIME)
                .with_meta(meta)
        }
        ResourceRef::StoreSummary(id) => json(serde_json::to_value(
            service.store_inventory(id).map_err(|e| McpError::resource_not_found(e.to_string(), None))?,
        )
        .expect("JSON")),
        ResourceRef::ProductDetails(id) => json(serde_json::to_value(
            service.product_details(id).map_err(|e| McpError::resource_not_found(e.to_string(), None))?,
        )
        .expect("JSON")),
    };
    Ok(ReadResourceResult::new(vec![contents]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_template_uris() {
        assert_eq!(ResourceRef::parse("inventory://stores/2/summary"), Ok(ResourceRef::StoreSummary(2)));
        assert_eq!(ResourceRef::parse("inventory://products/30/details"), Ok(ResourceRef::ProductDetails(30)));
        assert!(ResourceRef::parse("inventory://stores/x/summary").unwrap_err().contains("storeId"));
        assert!(ResourceRef::parse("inventory://nope").is_err());
    }
}

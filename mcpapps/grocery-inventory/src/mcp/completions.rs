//! `completion/complete`: suggestions for prompt arguments and resource-template variables.
//!
//! Ids are matched by prefix of the id or by the start of a word of the name, so typing "down"
//! offers the Downtown Market's id and "3" offers products 3 and 30.

use rmcp::model::{CompleteRequestParams, CompleteResult, CompletionInfo, Reference};

use super::prompts::GLOSSARY;
use super::resources::{PRODUCT_DETAILS_TEMPLATE, STORE_SUMMARY_TEMPLATE};
use crate::data::InventoryService;
use crate::model::Urgency;

/// True when `label` (or one of its words) starts with `typed` (lowercase).
fn word_prefix(label: &str, typed: &str) -> bool {
    let label = label.to_lowercase();
    label.starts_with(typed) || label.split_whitespace().any(|w| w.starts_with(typed))
}

fn matching(candidates: impl IntoIterator<Item = (String, String)>, typed: &str) -> Vec<String> {
    let typed = typed.trim().to_lowercase();
    candidates
        .into_iter()
        .filter(|(id, label)| typed.is_empty() || id.starts_with(&typed) || word_prefix(label, &typed))
        .map(|(id, _)| id)
        .collect()
}

fn store_ids(service: &InventoryService, typed: &str) -> Vec<String> {
    matching(service.stores().into_iter().map(|s| (s.id.to_string(), s.name)), typed)
}

fn product_ids(service: &InventoryService, typed: &str) -> Vec<String> {
    matching(
        service.all_products().iter().map(|p| (p.id.to_string(), p.name.clone())),
        typed,
    )
}

fn supplier_ids(service: &InventoryService, typed: &str) -> Vec<String> {
    matching(service.suppliers().into_iter().map(|s| (s.id.to_string(), s.name)), typed)
}

fn urgencies(typed: &str) -> Vec<String> {
    matching(Urgency::ALL.iter().map(|u| (u.as_str().to_string(), u.as_str().to_string())), typed)
}

fn terms(typed: &str) -> Vec<String> {
    let typed = typed.trim().to_lowercase();
    GLOSSARY
        .iter()
        .map(|(t, _)| t.to_string())
        .filter(|t| typed.is_empty() || word_prefix(t, &typed))
        .collect()
}

/// Values for the argument being completed; empty when the reference or argument is unknown.
pub fn complete(service: &InventoryService, request: &CompleteRequestParams) -> CompleteResult {
    let typed = request.argument.value.as_str();
    let values = match (&request.r#ref, request.argument.name.as_str()) {
        (Reference::Prompt(p), arg) => match (p.name.as_str(), arg) {
            ("analyze_store_performance", "storeId") | ("draft_supplier_order", "storeId") => store_ids(service, typed),
            ("draft_supplier_order", "supplierId") => supplier_ids(service, typed),
            ("draft_supplier_order", "urgency") => urgencies(typed),
            ("explain_inventory_term", "term") => terms(typed),
            _ => vec![],
        },
        (Reference::Resource(r), arg) => match (r.uri.as_str(), arg) {
            (STORE_SUMMARY_TEMPLATE, "storeId") => store_ids(service, typed),
            (PRODUCT_DETAILS_TEMPLATE, "productId") => product_ids(service, typed),
            _ => vec![],
        },
        _ => vec![],
    };
    let total = values.len() as u32;
    let values: Vec<String> = values.into_iter().take(CompletionInfo::MAX_VALUES).collect();
    let has_more = (values.len() as u32) < total;
    CompleteResult::new(CompletionInfo::with_pagination(values, Some(total), has_more).expect("at most MAX_VALUES"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_prefixes_match() {
        assert!(word_prefix("Downtown Market", "down"));
        assert!(word_prefix("safety stock", "stock"));
        assert!(!word_prefix("routine", "e"));
    }
}

//! The two ways callers reach app tools: [`tool_bridge`] (R20) for the model (prefixed names,
//! model-visible tools, `Error:` texts) and [`forward`] (R32) for the browser (raw JSON-RPC passed
//! through, visibility and `sessionId` enforced).

pub mod forward;
pub mod tool_bridge;

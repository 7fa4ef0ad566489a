//! What the host calls: the top layer of the module.
//!
//! [`instance`] adapts the `host-abi` interface to the apps (every export runs inside
//! `runtime::containment::contain`); [`calls`] tracks the calls in flight for `cancel(call_id)`;
//! [`forward`] (R32) passes a client's request to an app (visibility and `sessionId` enforced,
//! the app's result passed through as it came); [`tool_bridge`] (R20) is a model-side tool call
//! (prefixed names, model-visible tools).
//!
//! Architecture invariant: nothing below this layer imports it (`tests/layers.rs`).

pub mod calls;
pub mod forward;
pub mod instance;
pub mod tool_bridge;

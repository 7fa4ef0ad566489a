//! The wire to one app (what `apps/app_server.rs` connects, supervises and stops):
//! [`process`] (R44) launches its process; [`session`] (R16, R19) is the rmcp client
//! session, with [`ordering`] keeping its notifications in order, [`subscriptions`] holding the
//! 2026-07-28 listen stream and [`short_way`] taking tool calls the short way ([`http_relay`],
//! [`stdio_relay`]);
//! [`catalog`] (R18, R19) is what the app offers; [`relay`] (R42) routes
//! what the app does during a call back to that call's client.

pub mod catalog;
pub mod http_relay;
pub mod http_sender;
pub mod ordering;
pub mod process;
pub mod relay;
pub mod session;
pub mod short_way;
pub mod stdio_relay;
pub mod subscriptions;

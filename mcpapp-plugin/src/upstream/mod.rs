//! The wire to one app (what `apps/app_server.rs` connects, supervises and stops):
//! [`process`] (R44) launches its process; [`session`] (R16, R19) is the rmcp client
//! session, with [`ordering`] keeping its notifications in order, [`subscriptions`] holding the
//! 2026-07-28 listen stream and [`short_way`] taking tool calls the short way (its own JSON on
//! rmcp's session, over HTTP or stdio); [`notifier`] is where the session's notifications and
//! questions go, [`error`] how a request failed, [`app_result`] what it gave;
//! [`catalog`] (R18, R19) is what the app offers; [`relay`] (R42) routes
//! what the app does during a call back to that call's client — "relay" means only that.
//! [`confinement`] (R48) holds the process to what its app declared, [`seccomp`] being the
//! program the kernel runs on each of its system calls.

pub mod app_result;
pub mod catalog;
pub mod confinement;
pub mod error;
pub mod notifier;
pub mod ordering;
pub mod process;
pub mod relay;
pub mod seccomp;
pub mod session;
pub mod short_way;
pub mod subscriptions;

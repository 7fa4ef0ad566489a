//! The ground every layer stands on: the module's tokio runtime and the boundary's rules.
//!
//! [`executor`] owns the module's tokio runtime and is the only way a task starts;
//! [`containment`] keeps a panic from crossing the boundary; [`logging`] and [`events`] are the
//! module's two channels to the host's sink; [`faults`] is the test-only fault injection;
//! [`parse_count`] counts the message path's JSON parses; [`allocator`] is the module's own allocator; [`library`] lets go of the library's
//! process-wide threads when its last instance ends; [`spawner`] is the one thread that forks.
//!
//! Architecture invariant: this layer imports no other layer of the module (`tests/layers.rs`).

#[cfg(not(fuzzing))]
mod allocator;
pub mod containment;
pub mod events;
pub mod executor;
pub mod faults;
pub mod library;
pub mod logging;
pub mod parse_count;
pub mod spawner;

//! The boundary glue: what the host calls and what keeps the boundary's rules.
//!
//! [`instance`] adapts the `host-abi` interface to the registry (every export runs inside
//! [`containment::contain`]); [`runtime`] owns the module's tokio runtime and is the only way a
//! task starts; [`logging`] and [`events`] are the module's two channels to the host's sink;
//! [`calls`] tracks the calls in flight for `cancel(call_id)`; [`faults`] is the test-only fault
//! injection; [`allocator`] is the module's own allocator; [`library`] lets go of the library's
//! process-wide threads when its last instance ends.

#[cfg(not(fuzzing))]
mod allocator;
pub mod calls;
pub mod containment;
pub mod events;
pub mod faults;
pub mod instance;
pub mod library;
pub mod logging;
pub mod runtime;

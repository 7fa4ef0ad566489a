//! The calls in flight of one module instance, by the host's call id, so that `cancel(call_id)`
//! finds them.
//!
//! A call registers when its task starts on the module runtime, which is after the host got its
//! future back, so a host that cancels at once (its client went away) can be first. Such an
//! early cancel is remembered for a short while ([`EARLY_CANCEL_TTL`], at most
//! [`EARLY_CANCEL_MAX`] of them) and applied when the call registers. Both steps take the one lock,
//! so a cancel and a registration cannot pass each other.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

/// How long a cancel for a call not (yet) registered is kept. A call's task starts within
/// milliseconds of the host's request; a call id that registers later than this is not one the
/// host is still waiting for.
pub const EARLY_CANCEL_TTL: Duration = Duration::from_secs(5);
/// How many early cancels are kept at most (the oldest go first): a host cancelling unknown ids
/// in bulk must not grow the module's memory.
pub const EARLY_CANCEL_MAX: usize = 1024;

/// Call id 0 means "not cancellable" (the host has no id for the call).
pub const NO_CALL_ID: u64 = 0;

/// What [`Calls::cancel`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelOutcome {
    /// The call was in flight and is cancelled.
    Cancelled,
    /// No such call yet: remembered, it is cancelled as it registers.
    Remembered,
    /// Call id 0: nothing to cancel.
    Ignored,
}

#[derive(Default)]
pub struct Calls {
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    inflight: HashMap<u64, CancellationToken>,
    /// Early cancels in arrival order (so also in expiry order).
    early: VecDeque<(u64, Instant)>,
}

impl Table {
    fn forget_expired(&mut self, now: Instant) {
        while self.early.front().is_some_and(|(_, at)| now.duration_since(*at) > EARLY_CANCEL_TTL) {
            self.early.pop_front();
        }
    }

    /// Removes an early cancel of `call_id`; whether there was one.
    fn take_early(&mut self, call_id: u64) -> bool {
        match self.early.iter().position(|(id, _)| *id == call_id) {
            Some(i) => {
                self.early.remove(i);
                true
            }
            None => false,
        }
    }

    fn remember(&mut self, call_id: u64, now: Instant) {
        if self.early.iter().any(|(id, _)| *id == call_id) {
            return;
        }
        if self.early.len() >= EARLY_CANCEL_MAX {
            self.early.pop_front();
        }
        self.early.push_back((call_id, now));
    }
}

/// Unregisters a call when its task ends (or is dropped).
pub struct Registration {
    calls: Arc<Calls>,
    call_id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        if self.call_id != NO_CALL_ID {
            self.calls.table.lock().inflight.remove(&self.call_id);
        }
    }
}

impl Calls {
    /// Registers `token` as call `call_id`'s; cancels it at once if a cancel came first.
    pub fn register(self: &Arc<Self>, call_id: u64, token: &CancellationToken) -> Registration {
        self.register_at(call_id, token, Instant::now())
    }

    fn register_at(self: &Arc<Self>, call_id: u64, token: &CancellationToken, now: Instant) -> Registration {
        if call_id != NO_CALL_ID {
            let mut table = self.table.lock();
            table.forget_expired(now);
            if table.take_early(call_id) {
                tracing::debug!(call_id, "call {call_id} was cancelled before it started");
                token.cancel();
            }
            table.inflight.insert(call_id, token.clone());
        }
        Registration { calls: self.clone(), call_id }
    }

    /// Cancels call `call_id`, or remembers the cancel for when it registers.
    pub fn cancel(&self, call_id: u64) -> CancelOutcome {
        self.cancel_at(call_id, Instant::now())
    }

    fn cancel_at(&self, call_id: u64, now: Instant) -> CancelOutcome {
        if call_id == NO_CALL_ID {
            return CancelOutcome::Ignored;
        }
        let mut table = self.table.lock();
        table.forget_expired(now);
        match table.inflight.get(&call_id) {
            Some(token) => {
                token.cancel();
                CancelOutcome::Cancelled
            }
            None => {
                table.remember(call_id, now);
                CancelOutcome::Remembered
            }
        }
    }

    /// Calls in flight (for `module.status`).
    pub fn in_flight(&self) -> usize {
        self.table.lock().inflight.len()
    }

    #[cfg(test)]
    fn early_len(&self) -> usize {
        self.table.lock().early.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancel_finds_a_registered_call() {
        let calls = Arc::new(Calls::default());
        let token = CancellationToken::new();
        let registration = calls.register(7, &token);
        assert!(!token.is_cancelled());
        assert_eq!(calls.cancel(7), CancelOutcome::Cancelled);
        assert!(token.is_cancelled());
        drop(registration);
        assert_eq!(calls.in_flight(), 0);
    }

    #[test]
    fn a_cancel_that_comes_first_cancels_the_call_as_it_registers() {
        let calls = Arc::new(Calls::default());
        assert_eq!(calls.cancel(8), CancelOutcome::Remembered);
        let token = CancellationToken::new();
        let _registration = calls.register(8, &token);
        assert!(token.is_cancelled());
        assert_eq!(calls.early_len(), 0, "used once");
        // Another call is not affected.
        let other = CancellationToken::new();
        let _r = calls.register(9, &other);
        assert!(!other.is_cancelled());
    }

    #[test]
    fn early_cancels_expire() {
        let calls = Arc::new(Calls::default());
        let start = Instant::now();
        calls.cancel_at(8, start);
        let token = CancellationToken::new();
        let _registration = calls.register_at(8, &token, start + EARLY_CANCEL_TTL + Duration::from_millis(1));
        assert!(!token.is_cancelled(), "a cancel older than the TTL is forgotten");
        assert_eq!(calls.early_len(), 0);
    }

    #[test]
    fn early_cancels_are_bounded() {
        let calls = Arc::new(Calls::default());
        let now = Instant::now();
        for id in 1..=(EARLY_CANCEL_MAX as u64 + 10) {
            calls.cancel_at(id, now);
        }
        assert_eq!(calls.early_len(), EARLY_CANCEL_MAX);
        let oldest = CancellationToken::new();
        let _r = calls.register_at(1, &oldest, now);
        assert!(!oldest.is_cancelled(), "the oldest were dropped first");
        let newest = CancellationToken::new();
        let _r = calls.register_at(EARLY_CANCEL_MAX as u64 + 10, &newest, now);
        assert!(newest.is_cancelled());
    }

    #[test]
    fn call_id_zero_is_never_tracked() {
        let calls = Arc::new(Calls::default());
        assert_eq!(calls.cancel(NO_CALL_ID), CancelOutcome::Ignored);
        let token = CancellationToken::new();
        let _r = calls.register(NO_CALL_ID, &token);
        assert_eq!(calls.in_flight(), 0);
        assert_eq!(calls.early_len(), 0);
    }
}

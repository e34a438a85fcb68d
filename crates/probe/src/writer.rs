//! The writer thread: drains the event buffer into the file, reads the
//! pools' sizes, switches stream-ordered tracing off when due, and hands
//! over CUPTI's completed buffers and the probe's self-cost counters — all
//! off the training's threads. Also the full flush that exit and the shim
//! ask for.

use crate::clock::now_ns;
use crate::env;
use crate::state::{self, Probe, probe};
use crate::{calls, guard};
use prewarm_events::NoticeLevel;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The writer thread's tick: sink drained, pools read.
const FLUSH_EVERY: Duration = Duration::from_millis(100);
/// The tick while kernel records are on (setup, first steps): pools are read
/// this often there, where phases are short.
const FLUSH_EVERY_EARLY: Duration = Duration::from_millis(10);
/// Completed CUPTI buffers and the self-cost counters: once a second.
const SECOND_NS: u64 = 1_000_000_000;

/// Starts the writer thread; false when the system refused a thread (events
/// are then written at exit, failed allocations and step ends only).
pub fn spawn(p: &'static Probe) -> bool {
    std::thread::Builder::new()
        .name("prewarm-probe".into())
        .spawn(move || {
            crate::detach::never_from_this_thread();
            let _ = catch_unwind(AssertUnwindSafe(|| flush_loop(p)));
        })
        .is_ok()
}

/// Writes everything buffered now, the pools measured by the driver
/// included: at exit and when the shim asks.
pub fn flush_all() {
    if let Some(p) = probe() {
        if p.kernel_records.load(Ordering::Relaxed) || p.activity_buffers_out() > 0 {
            // SAFETY: plain CUPTI call; every buffer comes back through our callback.
            unsafe { (p.cupti.flush_all)(1) };
        }
        // At exit (the driver stays up until the loader's finalisers): the
        // pools, measured, after a summary the writer may be writing.
        calls::summarize_pools_at_exit(p);
        p.push_counters();
        p.sink.flush();
    }
}

/// A millisecond switch of the writer's, its default where unset; a value
/// that is not a number gets a notice and the default.
fn millis_or(p: &Probe, name: &str, default: Option<Duration>) -> Option<Duration> {
    match env::millis(name) {
        Ok(set) => set.or(default),
        Err(bad) => {
            p.notice(
                NoticeLevel::Warning,
                format!("{name}={bad:?} is not a number of milliseconds; the default is used"),
            );
            default
        }
    }
}

/// Drains the buffer and reads the pools every tick (10 ms while kernel
/// records are on, else 100 ms), switches stream-ordered tracing off when
/// due, and hands over completed CUPTI buffers and the self-cost counters
/// every second ([`writer_tick`]); its own time adds to `flush_ns`.
fn flush_loop(p: &'static Probe) {
    crate::signals::leave_signals_to_the_program();
    let mut last_second = now_ns();
    let mut counted = 0u64;
    // At least a millisecond: a zero tick would spin this thread.
    let early_tick = millis_or(p, env::EARLY_TICK_MS, Some(FLUSH_EVERY_EARLY))
        .unwrap_or(FLUSH_EVERY_EARLY)
        .max(Duration::from_millis(1));
    let pool_read_every = millis_or(p, env::POOL_READ_MS, None);
    let mut last_pool_read = last_second;
    loop {
        let early = p.kernel_records.load(Ordering::Relaxed);
        std::thread::sleep(if early { early_tick } else { FLUSH_EVERY });
        if probe().is_none() {
            return;
        }
        // The watch may have ended during the sleep: this tick is after it.
        let early = p.kernel_records.load(Ordering::Relaxed);
        let now = now_ns();
        let second = now.saturating_sub(last_second) >= SECOND_NS;
        if second {
            last_second = now;
        }
        let read_pools = pools_due(early, now.saturating_sub(last_pool_read), pool_read_every);
        if read_pools {
            last_pool_read = now;
        }
        if !writer_tick(p, second, early, read_pools, &mut counted) {
            return;
        }
        // Buffers drained inside this tick already count in `activity_ns`.
        let drained = state::take_activity_on_this_thread();
        let spent = now_ns().saturating_sub(now).saturating_sub(drained);
        p.flush_ns.fetch_add(spent, Ordering::Relaxed);
    }
}

/// Whether a writer tick reads the pools' sizes from the driver: every tick
/// while the first steps are watched (`early`); after them every tick, or
/// once `every` has passed since the last read (`since_last_ns`), never
/// when `every` is zero.
fn pools_due(early: bool, since_last_ns: u64, every: Option<Duration>) -> bool {
    match every {
        _ if early => true,
        None => true,
        Some(every) => !every.is_zero() && u128::from(since_last_ns) >= every.as_nanos(),
    }
}

/// One tick of the writer thread; false once the process is exiting. The
/// self-cost counters go out every second, and also every tick while kernel
/// records are on (the first steps) if callbacks came since the last ones
/// (`counted`), so a phase's own cost can be read off them.
fn writer_tick(
    p: &'static Probe,
    second: bool,
    early: bool,
    read_pools: bool,
    counted: &mut u64,
) -> bool {
    {
        // Held while this thread calls into CUDA/CUPTI, so that exit can
        // wait for such a call to end before libraries are torn down.
        let _calls = guard::lock(&p.writer_calls);
        // Once the process exits, records are written as they come.
        if p.sink.is_write_through() {
            return false;
        }
        if second && p.kernel_records.load(Ordering::Relaxed) {
            // SAFETY: flushes completed activity buffers.
            unsafe { (p.cupti.flush_all)(0) };
        }
        if p.pools.switch_due() {
            calls::stop_pool_tracing(p);
        }
        // The pools' sizes, from the driver when due (a record when changed).
        calls::summarize_pools(p, read_pools);
    }
    let callbacks = p.callbacks.load(Ordering::Relaxed);
    if second || (early && callbacks != *counted) {
        *counted = callbacks;
        p.push_counters();
    }
    p.sink.flush();
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_are_read_every_tick_unless_told_and_always_while_watched() {
        let ms = Duration::from_millis;
        assert!(pools_due(false, 0, None));
        assert!(pools_due(true, 0, Some(ms(0))));
        assert!(!pools_due(false, u64::MAX, Some(ms(0))));
        assert!(!pools_due(false, 999_999_999, Some(ms(1000))));
        assert!(pools_due(false, 1_000_000_000, Some(ms(1000))));
    }
}

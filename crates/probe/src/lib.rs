//! prewarm-probe: the library CUDA loads into every training process through
//! `CUDA_INJECTION64_PATH`. It subscribes to CUPTI callbacks for every device
//! allocation path, module load and context creation, takes a kernel activity
//! record for each function's first launch during setup and the first steps
//! (launches.rs), and streams compact events to
//! `$PREWARM_DOCTOR_DIR/<rank>.pid-<pid>.events`.
//!
//! Rules it lives by: at most one set lookup per kernel launch, and only
//! while the first steps are watched (none after); no
//! panics or aborts in the host process and nothing written to its
//! stdout/stderr (guard.rs); any failure leaves a notice in the event file and
//! lets the run continue un-instrumented.

#[cfg(panic = "abort")]
compile_error!(
    "prewarm-probe must be built with panic = \"unwind\": it catches every panic at its C entry points so that a probe bug never takes the training process down; with panic = \"abort\" any bug would abort the training"
);

mod activity;
mod callbacks;
mod caller;
mod calls;
mod clock;
mod cupti;
mod driver_api;
mod dynlib;
mod guard;
mod inflight;
mod launch_state;
mod launches;
pub mod objects;
mod pools;
mod signals;
mod sink;
mod state;

use clock::now_ns;
use cupti::{CUPTI_SUCCESS, Cupti, Driver};
use prewarm_events::{NoticeLevel, encode_header};
use sink::Sink;
use state::{Probe, install, probe};
use std::ffi::c_void;
use std::fs::OpenOptions;
use std::io::Write;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Environment the doctor sets for the probe.
pub mod env {
    /// Directory for this host's event files; without it the probe does nothing.
    pub const DIR: &str = "PREWARM_DOCTOR_DIR";
    /// libcupti path found by the doctor (used when no copy is loaded yet).
    pub const CUPTI: &str = "PREWARM_DOCTOR_CUPTI";
    /// Host tag for multi-node runs.
    pub const HOST: &str = "PREWARM_DOCTOR_HOST";
    /// Kernel activity records: unset (or `first`) for each function's first
    /// launch only, `0` for none at all, `all` for every launch while the
    /// first steps are watched (the path before first-launch tracing).
    pub const KERNEL_RECORDS: &str = "PREWARM_DOCTOR_KERNEL_RECORDS";
    /// `1` turns CUPTI's module-loaded callback on (module image sizes). Off by
    /// default: CUPTI then processes every module load, which cost ~20% of
    /// step 1 on the H200 overhead benchmark.
    pub const MODULE_RECORDS: &str = "PREWARM_DOCTOR_MODULE_RECORDS";
    /// Stream-ordered calls in a row on known pools after which the probe
    /// stops tracing them (unset: 4096, or a training step on known pools
    /// first); `all` traces every one (their counts stay known, at ~1.4 us of
    /// CUPTI dispatch per call).
    pub const POOL_CALLS: &str = "PREWARM_DOCTOR_POOL_CALLS";
    /// Milliseconds between the writer thread's ticks while kernel records
    /// are on (default 10): for the overhead breakdown.
    pub const EARLY_TICK_MS: &str = "PREWARM_DOCTOR_EARLY_TICK_MS";
    /// Milliseconds between the writer thread's reads of the pools' sizes
    /// once the first steps are over (unset: every tick, 100 ms; `0`: none
    /// after them but the watch's end and exit): for the overhead
    /// breakdown, where the async allocator's pool is read all run long.
    pub const POOL_READ_MS: &str = "PREWARM_DOCTOR_POOL_READ_MS";
    /// `probe`: CUPTI calls the probe's clock for activity timestamps instead
    /// of keeping its own (converted by an offset): for the overhead breakdown.
    pub const CUPTI_CLOCK: &str = "PREWARM_DOCTOR_CUPTI_CLOCK";
}

/// The writer thread's tick: sink drained, pools read.
const FLUSH_EVERY: Duration = Duration::from_millis(100);
/// The tick while kernel records are on (setup, first steps): pools are read
/// this often there, where phases are short.
const FLUSH_EVERY_EARLY: Duration = Duration::from_millis(10);
/// Completed CUPTI buffers and the self-cost counters: once a second.
const SECOND_NS: u64 = 1_000_000_000;

/// CUDA calls this once per process, during cuInit, when the library is named
/// by `CUDA_INJECTION64_PATH`. Always returns 1 so CUDA initialisation proceeds.
#[unsafe(no_mangle)]
pub extern "C" fn InitializeInjection() -> i32 {
    guard::install_quiet_panic_hook();
    let _ = catch_unwind(initialise);
    1
}

/// For the shim: switch kernel activity records on (1) or off (0). Returns 1 on success.
#[unsafe(no_mangle)]
pub extern "C" fn prewarm_probe_set_kernel_records(enabled: i32) -> i32 {
    catch_unwind(|| {
        probe()
            .map(|p| callbacks::set_kernel_records(p, enabled != 0) as i32)
            .unwrap_or(0)
    })
    .unwrap_or(0)
}

/// For the shim: pause kernel records (1) around an autotune benchmark's
/// repeated launches, or resume them (0); resuming never turns on records
/// that are off. Returns 1 when it switched.
#[unsafe(no_mangle)]
pub extern "C" fn prewarm_probe_pause_kernel_records(paused: i32) -> i32 {
    catch_unwind(|| {
        probe()
            .map(|p| callbacks::pause_kernel_records(p, paused != 0) as i32)
            .unwrap_or(0)
    })
    .unwrap_or(0)
}

/// For the shim: training step `step` ended (it says so for the first
/// steps): a step that used only known pools stops the tracing of
/// stream-ordered calls (pools.rs has the rule).
#[unsafe(no_mangle)]
pub extern "C" fn prewarm_probe_step_ended(step: u32) {
    let _ = catch_unwind(|| {
        if let Some(p) = probe() {
            p.pools.step_ended(step);
        }
    });
}

/// For the shim: write everything buffered now (e.g. at a step boundary or exit).
#[unsafe(no_mangle)]
pub extern "C" fn prewarm_probe_flush() {
    let _ = catch_unwind(flush_all);
}

/// For `prewarm-doctor check`: 1 when capture is live in this process.
#[unsafe(no_mangle)]
pub extern "C" fn prewarm_probe_active() -> i32 {
    catch_unwind(|| probe().is_some() as i32).unwrap_or(0)
}

/// For the CPU harness: raises a panic inside the probe, through the same
/// catch-and-count path a callback uses, to prove that nothing reaches the
/// process's stderr and that capture continues. Returns 1 when it was caught.
#[doc(hidden)]
#[unsafe(no_mangle)]
pub extern "C" fn prewarm_probe_test_internal_error() -> i32 {
    let Some(p) = probe() else { return 0 };
    let caught = catch_unwind(|| panic!("deliberate panic from the probe's self-test"));
    if caught.is_err() {
        p.internal_error("self-test");
    }
    caught.is_err() as i32
}

fn flush_all() {
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

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn own_path() -> String {
    dynlib::path_of_address(InitializeInjection as extern "C" fn() -> i32 as usize)
        .map(|(p, _)| p)
        .unwrap_or_default()
}

fn cmdline() -> String {
    std::fs::read("/proc/self/cmdline")
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|s| !s.is_empty())
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

fn initialise() {
    let Some(dir) = var(env::DIR) else { return };
    let pid = std::process::id();
    let rank = var("RANK");
    let file_name = format!(
        "{}{}",
        prewarm_events::names::process_stem(rank.as_deref(), pid),
        prewarm_events::names::EVENTS_SUFFIX
    );
    if std::fs::create_dir_all(&dir).is_err() {
        return;
    }
    let Ok(mut file) = OpenOptions::new()
        .create_new(true)
        .append(true)
        .open(format!("{dir}/{file_name}"))
    else {
        return;
    };

    let loaded = Cupti::load(var(env::CUPTI).as_deref());
    let driver = Driver::load();
    // CUPTI's activity clock: its own, converted by an offset measured again
    // at each buffer, so that nothing inside CUPTI calls into the probe; ours
    // when asked (its step-1 cost on the H200 was within noise either way).
    let want_own_clock = var(env::CUPTI_CLOCK).as_deref() == Some("probe");
    let (clock_note, own_clock) = match &loaded {
        Ok((c, _)) => match c.register_timestamp.filter(|_| want_own_clock) {
            // SAFETY: registers a plain function returning u64 nanoseconds.
            Some(reg) if unsafe { reg(state::monotonic_timestamp) } == CUPTI_SUCCESS => {
                ("cupti-timestamp-callback".to_string(), true)
            }
            _ => {
                let off = state::activity_clock_offset(c);
                (
                    format!("offset {off} ns, measured again at each buffer"),
                    false,
                )
            }
        },
        Err(_) => ("none".to_string(), true),
    };

    let host = var(env::HOST).unwrap_or_else(prewarm_events::host::hostname);
    let pid_s = pid.to_string();
    let ppid_s = std::os::unix::process::parent_id().to_string();
    let start_s = now_ns().to_string();
    let own = own_path();
    let cmd = cmdline();
    let (cupti_path, cupti_version, cupti_how, status) = match &loaded {
        Ok((c, how)) => (
            c.path.clone(),
            c.version.to_string(),
            how.to_string(),
            "active".to_string(),
        ),
        Err(e) => (
            String::new(),
            String::new(),
            String::new(),
            format!("disabled: {e}"),
        ),
    };
    let mut fields: Vec<(&str, String)> = vec![
        ("writer", "prewarm-probe".into()),
        ("probe_version", env!("CARGO_PKG_VERSION").into()),
        ("pid", pid_s),
        ("ppid", ppid_s),
        ("host", host),
        ("start_ns", start_s),
        ("cmdline", cmd),
        ("probe_path", own.clone()),
        ("cupti_path", cupti_path),
        ("cupti_version", cupti_version),
        ("cupti_found", cupti_how),
        ("activity_clock", clock_note),
        ("status", status),
    ];
    for key in [
        "RANK",
        "LOCAL_RANK",
        "WORLD_SIZE",
        "GROUP_RANK",
        "LOCAL_WORLD_SIZE",
        "CUDA_VISIBLE_DEVICES",
    ] {
        if let Some(v) = var(key) {
            fields.push((key, v));
        }
    }
    let borrowed: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let header = encode_header(&borrowed);
    if file.write_all(&header).is_err() {
        return;
    }

    let cupti = match loaded {
        Ok((c, _)) => c,
        Err(e) => {
            let mut bytes = Vec::new();
            prewarm_events::encode_record(
                &prewarm_events::Record::Notice(prewarm_events::Notice {
                    t: now_ns(),
                    level: NoticeLevel::Disabled,
                    text: format!("no capture in this process: {e}"),
                }),
                &mut bytes,
            );
            let _ = file.write_all(&bytes);
            return;
        }
    };
    caller::warm_up();
    let driver_err = driver.as_ref().err().cloned();
    let sink = Sink::new(file, header.len() as u64);
    let pool_calls = pool_calls_setting();
    // A count the user set is the only rule; the default also follows steps.
    let (quiet_calls, follow_steps) = match pool_calls {
        Ok(Some(n)) => (n, false),
        _ => (pools::DEFAULT_QUIET_CALLS, true),
    };
    let kernel_watch = launch_state::KernelWatch::from_setting(var(env::KERNEL_RECORDS).as_deref());
    let p = install(
        cupti,
        driver.ok(),
        sink,
        &own,
        own_clock,
        quiet_calls,
        kernel_watch,
    );
    if follow_steps {
        p.pools.follow_steps();
    }
    if let Err(bad) = pool_calls {
        p.notice(
            NoticeLevel::Warning,
            format!(
                "{}={bad:?} is not a number or `all`; the default {} is used",
                env::POOL_CALLS,
                pools::DEFAULT_QUIET_CALLS
            ),
        );
    }
    if let Some(e) = driver_err {
        p.notice(
            NoticeLevel::Warning,
            format!("device free memory will not be sampled: {e}"),
        );
    }
    start(p);
}

/// `PREWARM_DOCTOR_POOL_CALLS`: the stream-ordered calls in a row on known
/// pools after which they are no longer traced (`all`: never; unset: the
/// default count, or a step on known pools first), or the value that is
/// neither.
fn pool_calls_setting() -> Result<Option<u64>, String> {
    match var(env::POOL_CALLS).as_deref() {
        None => Ok(None),
        Some("all") => Ok(Some(u64::MAX)),
        Some(n) => n.parse::<u64>().map(Some).map_err(|_| n.to_string()),
    }
}

fn start(p: &'static Probe) {
    let mut subscriber: *mut c_void = std::ptr::null_mut();
    // SAFETY: CUPTI writes the subscriber handle.
    let rc = unsafe {
        (p.cupti.subscribe)(
            &mut subscriber,
            callbacks::on_callback,
            std::ptr::null_mut(),
        )
    };
    if rc != CUPTI_SUCCESS {
        p.disable(&format!(
            "cuptiSubscribe failed: {} (another CUPTI client, such as an active profiler, may own the subscription)",
            p.cupti.describe(rc)
        ));
        return;
    }
    p.subscriber
        .store(subscriber, std::sync::atomic::Ordering::Release);
    let mut missing = Vec::new();
    for (cbid, api, _) in driver_api::TRACKED {
        // SAFETY: valid subscriber, domain and callback id.
        let rc = unsafe { (p.cupti.enable_callback)(1, subscriber, 1, *cbid) };
        if rc != CUPTI_SUCCESS {
            missing.push(format!("{}#{cbid}", api.name()));
        }
    }
    for (cbid, name) in [
        (driver_api::CBID_POOL_CREATE, "cuMemPoolCreate"),
        (driver_api::CBID_POOL_DESTROY, "cuMemPoolDestroy"),
    ] {
        // SAFETY: as above.
        if unsafe { (p.cupti.enable_callback)(1, subscriber, 1, cbid) } != CUPTI_SUCCESS {
            missing.push(format!("{name}#{cbid}"));
            // Pools could be destroyed unseen: only read while in use.
            p.pools.keep_tracing();
        }
    }
    let want_modules = var(env::MODULE_RECORDS).as_deref() == Some("1");
    for cbid in [state::CBID_CONTEXT_CREATED, state::CBID_MODULE_LOADED] {
        if cbid == state::CBID_MODULE_LOADED && !want_modules {
            continue;
        }
        // SAFETY: resource domain (3): context created, module loaded.
        unsafe { (p.cupti.enable_callback)(1, subscriber, 3, cbid) };
    }
    if !missing.is_empty() {
        p.notice(
            NoticeLevel::Info,
            format!(
                "driver entry points not traced by this CUDA: {}",
                missing.join(", ")
            ),
        );
    }
    if let Err(why) = p.cupti.promise_zeroed_buffers() {
        p.notice(
            NoticeLevel::Info,
            format!(
                "CUPTI clears each activity buffer itself, on the thread that needs one (about 3 ms at each thread's first kernel launch on an H200): {why}"
            ),
        );
    }
    // SAFETY: registers our buffer callbacks.
    let rc =
        unsafe { (p.cupti.register_buffers)(state::buffer_requested, state::buffer_completed) };
    let want_kernels = p.kernel_watch != launch_state::KernelWatch::Off;
    if rc != CUPTI_SUCCESS {
        p.notice(
            NoticeLevel::Warning,
            format!(
                "no kernel records (local-memory growth unseen): {}",
                p.cupti.describe(rc)
            ),
        );
    } else if want_kernels {
        callbacks::set_kernel_records(p, true);
    }
    p.notice(
        NoticeLevel::Info,
        format!(
            "capture active: CUPTI {} from {}",
            p.cupti.version, p.cupti.path
        ),
    );
    // SAFETY: registers a plain extern "C" function.
    unsafe { libc::atexit(at_exit) };
    state::watch_forks();
    signals::install(flush_from_signal);
    let spawned = std::thread::Builder::new()
        .name("prewarm-probe".into())
        .spawn(move || {
            let _ = catch_unwind(AssertUnwindSafe(|| flush_loop(p)));
        });
    if spawned.is_err() {
        p.notice(
            NoticeLevel::Warning,
            "no writer thread (the system refused a thread): events are written at exit, at failed allocations and at step ends only",
        );
    }
}

/// The writer thread: drains the buffer and reads the pools every tick (10 ms
/// while kernel records are on, else 100 ms), switches stream-ordered tracing
/// off when due, and hands over completed CUPTI buffers and the self-cost
/// counters every second ([`writer_tick`]); its own time adds to `flush_ns`.
fn flush_loop(p: &'static Probe) {
    signals::leave_signals_to_the_program();
    let mut last_second = now_ns();
    let mut counted = 0u64;
    let early_tick = var(env::EARLY_TICK_MS)
        .and_then(|ms| ms.parse().ok())
        .map_or(FLUSH_EVERY_EARLY, Duration::from_millis);
    let pool_read_every = var(env::POOL_READ_MS)
        .and_then(|ms| ms.parse().ok())
        .map(Duration::from_millis);
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

fn flush_from_signal() {
    if let Some(p) = probe() {
        p.sink.flush_from_signal();
    }
}

/// The process is exiting (registered with atexit when capture starts): write
/// everything, then switch the sink to writing each record at once, because
/// callbacks keep arriving after this (other exit handlers, destructors).
extern "C" fn at_exit() {
    let _ = catch_unwind(|| {
        if let Some(p) = probe() {
            flush_all();
            p.sink.write_through();
            p.wait_for_writer_calls();
        }
    });
}

/// Runs when the dynamic loader finalises the probe, after every atexit
/// handler: the final self-cost and drop counters, which then include the
/// callbacks made during teardown.
extern "C" fn at_unload() {
    let _ = catch_unwind(|| {
        if let Some(p) = probe() {
            p.push_counters();
            p.sink.write_through();
        }
    });
}

#[used]
#[unsafe(link_section = ".fini_array")]
static AT_UNLOAD: extern "C" fn() = at_unload;

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

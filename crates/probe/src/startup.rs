//! Capture's start in a process (from `InitializeInjection`, during cuInit):
//! the event file and its header, CUPTI and the driver loaded, the probe's
//! state installed, CUPTI subscribed, the writer thread and the exit hooks.
//! Any failure before the subscription leaves the process un-instrumented,
//! with a header and a notice that say why when the file could be opened.

use crate::clock::now_ns;
use crate::cupti::{CUPTI_SUCCESS, Cupti, Driver};
use crate::env::{self, var};
use crate::sink::Sink;
use crate::state::{self, Probe, install, probe};
use crate::{callbacks, caller, driver_api, dynlib, launch_state, pools, signals, writer};
use prewarm_events::{NoticeLevel, encode_header};
use std::ffi::c_void;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::panic::catch_unwind;

/// CUPTI as found (and how), or why not.
type LoadedCupti = Result<(Cupti, &'static str), String>;

/// Starts capture in this process, or leaves it alone when the doctor did
/// not ask (no run folder) or the event file cannot be made.
pub fn initialise() {
    let Some(dir) = var(env::DIR) else { return };
    let Some(mut file) = open_event_file(&dir) else {
        return;
    };
    let loaded = Cupti::load(var(env::CUPTI).as_deref());
    let driver = Driver::load();
    let (clock_note, own_clock) = activity_clock(&loaded);
    let own = own_path();
    let header = encode_header(&borrow(&header_fields(&loaded, clock_note, &own)));
    if file.write_all(&header).is_err() {
        return;
    }
    let cupti = match loaded {
        Ok((c, _)) => c,
        Err(e) => {
            write_disabled_notice(&mut file, &e);
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

/// This process's event file in `dir`, made new (never another's).
fn open_event_file(dir: &str) -> Option<File> {
    let file_name = format!(
        "{}{}",
        prewarm_events::names::process_stem(var("RANK").as_deref(), std::process::id()),
        prewarm_events::names::EVENTS_SUFFIX
    );
    std::fs::create_dir_all(dir).ok()?;
    OpenOptions::new()
        .create_new(true)
        .append(true)
        .open(format!("{dir}/{file_name}"))
        .ok()
}

/// CUPTI's activity clock, as the header states it, and whether it is the
/// probe's own: CUPTI's, converted by an offset measured again at each
/// buffer, so that nothing inside CUPTI calls into the probe; ours when
/// asked (its step-1 cost on the H200 was within noise either way).
fn activity_clock(loaded: &LoadedCupti) -> (String, bool) {
    let want_own_clock = var(env::CUPTI_CLOCK).as_deref() == Some("probe");
    match loaded {
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
    }
}

/// The event file's header: who wrote it, this process, CUPTI as found, and
/// the launcher's rank variables.
fn header_fields(
    loaded: &LoadedCupti,
    clock_note: String,
    own: &str,
) -> Vec<(&'static str, String)> {
    let (cupti_path, cupti_version, cupti_how, status) = match loaded {
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
    let mut fields: Vec<(&'static str, String)> = vec![
        ("writer", "prewarm-probe".into()),
        ("probe_version", env!("CARGO_PKG_VERSION").into()),
        ("pid", std::process::id().to_string()),
        ("ppid", std::os::unix::process::parent_id().to_string()),
        (
            "host",
            var(env::HOST).unwrap_or_else(prewarm_events::host::hostname),
        ),
        ("start_ns", now_ns().to_string()),
        ("cmdline", cmdline()),
        ("probe_path", own.to_string()),
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
    fields
}

fn borrow<'a>(fields: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    fields.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// The one record of a process the probe could not capture: why.
fn write_disabled_notice(file: &mut File, why: &str) {
    let mut bytes = Vec::new();
    prewarm_events::encode_record(
        &prewarm_events::Record::Notice(prewarm_events::Notice {
            t: now_ns(),
            level: NoticeLevel::Disabled,
            text: format!("no capture in this process: {why}"),
        }),
        &mut bytes,
    );
    let _ = file.write_all(&bytes);
}

fn own_path() -> String {
    dynlib::path_of_address(own_path as fn() -> String as usize)
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

/// Subscribes to CUPTI and switches on what the probe traces, then the
/// writer thread and the exit and signal hooks.
fn start(p: &'static Probe) {
    let Some(subscriber) = subscribe(p) else {
        return;
    };
    enable_callbacks(p, subscriber);
    read_watch_end_settings(p);
    if let Err(why) = p.cupti.promise_zeroed_buffers() {
        p.notice(
            NoticeLevel::Info,
            format!(
                "CUPTI clears each activity buffer itself, on the thread that needs one (about 3 ms at each thread's first kernel launch on an H200): {why}"
            ),
        );
    }
    start_kernel_records(p);
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
    if !writer::spawn(p) {
        p.notice(
            NoticeLevel::Warning,
            "no writer thread (the system refused a thread): events are written at exit, at failed allocations and at step ends only",
        );
    }
}

/// The probe's CUPTI subscriber, or `None` (capture disabled, said why)
/// when another client holds the subscription.
fn subscribe(p: &'static Probe) -> Option<*mut c_void> {
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
        return None;
    }
    p.subscriber
        .store(subscriber, std::sync::atomic::Ordering::Release);
    Some(subscriber)
}

/// The detach after the first-launch watch (detach.rs), on unless `0`.
fn read_watch_end_settings(p: &'static Probe) {
    let detach = var(env::DETACH_AFTER_WATCH);
    if let Some(bare) = crate::detach::detach_from_setting(detach.as_deref())
        && p.kernel_watch != launch_state::KernelWatch::Off
    {
        crate::detach::want(p, bare);
    }
}

/// The driver calls the probe traces, the pool create/destroy calls and the
/// resource callbacks; a notice names the entry points this CUDA lacks.
fn enable_callbacks(p: &'static Probe, subscriber: *mut c_void) {
    let mut missing = Vec::new();
    for (cbid, api) in driver_api::TRACKED {
        // SAFETY: valid subscriber, domain and callback id.
        let rc = unsafe { (p.cupti.enable_callback)(1, subscriber, 1, *cbid) };
        if rc != CUPTI_SUCCESS {
            missing.push(format!("{}#{cbid}", api.name()));
        }
    }
    for cbid in [driver_api::CBID_POOL_CREATE, driver_api::CBID_POOL_DESTROY] {
        // SAFETY: as above.
        if unsafe { (p.cupti.enable_callback)(1, subscriber, 1, cbid) } != CUPTI_SUCCESS {
            let name = prewarm_events::callback_ids::callback_name(u64::from(cbid));
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
}

/// CUPTI's activity buffers registered and the kernel watch switched on,
/// unless the switch asked for none; a notice when CUPTI refused.
fn start_kernel_records(p: &'static Probe) {
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
}

fn flush_from_signal() {
    if let Some(p) = probe() {
        p.sink.flush_from_signal();
    }
}

/// Longest wait at exit for an attach under way (it takes 16–35 ms on a
/// GPU): bounded, so that an attach stuck in CUPTI never holds up the exit.
const ATTACH_AT_EXIT: std::time::Duration = std::time::Duration::from_millis(500);

/// The process is exiting (registered with atexit when capture starts): write
/// everything, then switch the sink to writing each record at once, because
/// callbacks keep arriving after this (other exit handlers, destructors).
extern "C" fn at_exit() {
    let _ = catch_unwind(|| {
        if let Some(p) = probe() {
            // An exit inside the detach's gap: the attach's record and
            // notice come through the write-through sink once written.
            p.detach.wait_for_attach(ATTACH_AT_EXIT);
            writer::flush_all();
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

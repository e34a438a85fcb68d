//! The background loader: reads the run folder through the one pipeline
//! every report uses (`crate::pipeline`) and sends the dashboard's data — the
//! report model and the live progress — to the event loop over a channel. A finished run is read once. A run still being
//! written is read again whenever its files change, never more often than
//! every 0.5 s and never spending more than a third of one core (the pause
//! after a load is twice what the load took).

use super::dashboard::{Dashboard, GpuView, LiveView};
use crate::load::{LoadError, RunData};
use crate::pipeline::Analysed;
use crate::run_folder::layout::RUN_FILE;
use crate::run_folder::meta::CacheMode;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What arrives on the dashboard's channel.
#[derive(Debug)]
pub enum Update {
    /// A fresh view of the run folder.
    Data(Box<Dashboard>),
    /// The folder could not be read (yet).
    Error(String),
    /// A line of the training's output.
    Log(String),
    /// `run --tui`: the command (or the whole matrix) ended with this code.
    Finished(i32),
}

/// Seconds of GPU memory history in the sparklines.
const HISTORY_S: f64 = 60.0;
/// Points in a sparkline (one per half second).
const HISTORY_POINTS: usize = 120;
const MIN_PAUSE: Duration = Duration::from_millis(500);
const MAX_PAUSE: Duration = Duration::from_secs(10);

/// The running loader; `finish` asks for one last load and ends it.
pub struct Loader {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Loader {
    /// Starts loading `root`. `ours`: this doctor is running the command, so
    /// the folder is live until `finish` is called.
    pub fn spawn(root: PathBuf, ours: bool, tx: Sender<Update>) -> Loader {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("tui-loader".into())
            .spawn(move || load_loop(&root, ours, &flag, &tx))
            .ok();
        Loader { stop, handle }
    }

    /// Loads once more (the final state) and stops.
    pub fn finish(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for Loader {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn load_loop(root: &Path, ours: bool, stop: &AtomicBool, tx: &Sender<Update>) {
    let mut last = None;
    let mut pause = MIN_PAUSE;
    loop {
        let stopping = stop.load(Ordering::SeqCst);
        let sig = signature(root);
        let mut live = ours;
        if last != Some(sig) {
            let started = Instant::now();
            let update = match load_once(root, ours && !stopping) {
                Ok(d) => {
                    live |= d.live.is_some();
                    Update::Data(Box::new(d))
                }
                Err(e) => {
                    live = true;
                    if just_starting(root, &e) {
                        Update::Error("waiting for the first attempt to start".into())
                    } else {
                        Update::Error(e.to_string())
                    }
                }
            };
            if tx.send(update).is_err() {
                return;
            }
            pause = (started.elapsed() * 2).clamp(MIN_PAUSE, MAX_PAUSE);
            last = Some(sig);
        } else {
            live = true;
        }
        if stopping || !live {
            return;
        }
        let until = Instant::now() + pause;
        while Instant::now() < until && !stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Sizes and modification times of every file of the run, hashed: unchanged
/// means nothing to re-read.
pub fn signature(root: &Path) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    fn walk(dir: &Path, depth: u32, h: &mut impl Hasher) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        let mut entries: Vec<_> = rd.filter_map(|e| e.ok()).collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let Ok(md) = e.metadata() else { continue };
            e.file_name().hash(h);
            if md.is_dir() {
                if depth < 3 && !e.file_name().to_string_lossy().starts_with("cache-") {
                    walk(&e.path(), depth + 1, h);
                }
            } else {
                md.len().hash(h);
                md.modified().ok().hash(h);
            }
        }
    }
    walk(root, 0, &mut h);
    h.finish()
}

/// The attempt being run now: the latest one whose hosts have no exit status yet.
fn current_attempt(run: &RunData) -> Option<(String, String)> {
    run.attempts
        .iter()
        .filter(|a| {
            a.hosts.iter().any(|h| {
                h.meta
                    .as_ref()
                    .is_some_and(|m| m.exit.is_none() && m.spawn_error.is_none())
            })
        })
        .max_by_key(|a| {
            a.hosts
                .iter()
                .filter_map(|h| h.meta.as_ref().map(|m| m.t_start_ns))
                .max()
        })
        .map(|a| (a.variant.clone(), a.attempt.clone()))
}

/// Whether a load failed only because the run has no attempt folder yet
/// (its run.json is written, its first attempt not started).
pub fn just_starting(root: &Path, e: &LoadError) -> bool {
    matches!(e, LoadError::NotARun { .. }) && root.join(RUN_FILE).exists()
}

/// Reads the folder once: the report model, and the progress while an
/// attempt is running (or `ours`: this doctor is running the command).
pub fn load_once(root: &Path, ours: bool) -> Result<Dashboard, LoadError> {
    let analysed = Analysed::load(root)?;
    let current = current_attempt(&analysed.run);
    let live = (current.is_some() || ours).then(|| live_view(&analysed.run, current.as_ref()));
    Ok(Dashboard::new(analysed.into_model(), live))
}

fn live_view(run: &RunData, current: Option<&(String, String)>) -> LiveView {
    let total = run.meta.as_ref().map_or(run.attempts.len(), |m| {
        let warm = if m.cache == CacheMode::Warm {
            m.variants.len()
        } else {
            0
        };
        m.variants.len() * m.repeat as usize + warm
    });
    let done = run
        .attempts
        .iter()
        .filter(|a| {
            a.hosts.iter().all(|h| {
                h.meta
                    .as_ref()
                    .is_some_and(|m| m.exit.is_some() || m.spawn_error.is_some())
            })
        })
        .count();
    let elapsed_s = run
        .meta
        .as_ref()
        .and_then(|m| chrono::DateTime::parse_from_rfc3339(&m.created).ok())
        .map(|c| (chrono::Local::now().fixed_offset() - c).num_milliseconds() as f64 / 1000.0)
        .unwrap_or(0.0)
        .max(0.0);
    let eta_s = (done > 0 && total > done).then(|| elapsed_s / done as f64 * (total - done) as f64);
    let attempt = current.and_then(|(v, a)| {
        run.attempts
            .iter()
            .find(|x| &x.variant == v && &x.attempt == a)
    });
    let mut gpus = Vec::new();
    for host in attempt.map_or(&[][..], |a| &a.hosts[..]) {
        let infos = host.meta.as_ref().map_or(&[][..], |m| &m.gpus[..]);
        for (index, samples) in &host.nvml.devices {
            let info = infos.iter().find(|g| g.index == *index);
            let points: Vec<(u64, u64)> = samples.iter().map(|s| (s.t, s.used)).collect();
            gpus.push(GpuView {
                index: *index,
                name: info.map_or(String::new(), |g| g.name.clone()),
                total: samples
                    .last()
                    .map(|s| s.total)
                    .or(info.map(|g| g.total_bytes))
                    .unwrap_or(0),
                used: samples.last().map_or(0, |s| s.used),
                history: history(&points, HISTORY_S, HISTORY_POINTS),
            });
        }
    }
    LiveView {
        total,
        done,
        current: current.map(|(v, a)| format!("{v}/{a}")),
        elapsed_s,
        eta_s,
        gpus,
    }
}

/// The last `span_s` seconds of a (t ns, bytes) series as `n` evenly spaced
/// values (the highest in each slot; an empty slot repeats the value before).
pub fn history(points: &[(u64, u64)], span_s: f64, n: usize) -> Vec<u64> {
    let Some(&(end, _)) = points.last() else {
        return Vec::new();
    };
    let span = (span_s * 1e9) as u64;
    let start = end.saturating_sub(span);
    let slot = (span / n as u64).max(1);
    let first = points.partition_point(|p| p.0 < start);
    let mut out = vec![None; n];
    for &(t, v) in &points[first..] {
        let i = (((t - start) / slot) as usize).min(n - 1);
        out[i] = Some(out[i].map_or(v, |x: u64| x.max(v)));
    }
    let mut last = first.checked_sub(1).map_or(0, |i| points[i].1);
    let mut values = Vec::with_capacity(n);
    for v in out {
        last = v.unwrap_or(last);
        values.push(last);
    }
    values
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_is_evenly_spaced_and_carries_values_forward() {
        let s = 1_000_000_000u64;
        let pts = [(0, 1), (10 * s, 5), (20 * s, 3)];
        let h = history(&pts, 20.0, 4);
        assert_eq!(h, vec![1, 1, 5, 3]);
        assert!(history(&[], 60.0, 10).is_empty());
    }

    #[test]
    fn a_finished_recording_is_not_live() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("reports/h200-matrix");
        let run = crate::load::load_run(&root).unwrap();
        assert_eq!(current_attempt(&run), None);
        let d = load_once(&root, false).unwrap();
        assert!(d.live.is_none());
        assert_eq!(d.model.attempts.len(), run.attempts.len());
    }
}

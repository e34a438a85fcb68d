//! Decoding one process's files (probe events streamed, shim lines parsed)
//! into the compact collections the analysis works on, and handing them out
//! one process at a time per worker thread so memory stays bounded.

use super::shim::{ShimEvent, ShimOwnTime};
use super::{HostData, Problem, ProcessFiles, read_shim, stream_records, unreadable};
use prewarm_events::*;
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::BufReader;
use std::path::Path;

/// Everything read from one process's files.
#[derive(Default)]
pub struct ProcessRecords {
    pub header: BTreeMap<String, String>,
    pub libraries: HashMap<u32, String>,
    pub mem: Vec<MemCall>,
    /// Stream-ordered pool summaries (probe 0.2+; older probes wrote MemCalls).
    pub pools: Vec<PoolUse>,
    pub local: Vec<LocalMemoryGrowth>,
    /// Stretches the probe traced nothing in (CUPTI detached and attached
    /// again), in time order.
    pub untraced: Vec<UntracedSpan>,
    pub first_launches: Vec<KernelFirstLaunch>,
    pub contexts: Vec<ContextCreated>,
    pub modules: Vec<ModuleLoad>,
    pub notices: Vec<Notice>,
    pub dropped: Option<RecordsDropped>,
    pub cost: Option<ProbeCost>,
    /// Every self-cost record, in file order (the probe's time per phase).
    pub costs: Vec<ProbeCost>,
    pub last_t: u64,
    pub shim: Vec<ShimEvent>,
    /// The shim's own time as its lines state it, in time order.
    pub shim_own_time: Vec<ShimOwnTime>,
    pub problems: Vec<Problem>,
}

/// Streams the probe file and reads the shim file of one process.
/// `exited_normally`: its host's command exited normally (see
/// [`HostData::exited_normally`]), so an event file cut short is damage.
pub fn read_process(root: &Path, files: &ProcessFiles, exited_normally: bool) -> ProcessRecords {
    let mut r = ProcessRecords::default();
    if let Some(path) = &files.events {
        match File::open(path) {
            Ok(f) => {
                let outcome = stream_records(BufReader::new(f), |rec| {
                    if let Some(t) = rec.time() {
                        r.last_t = r.last_t.max(t);
                    }
                    match rec {
                        Record::Library(l) => {
                            r.libraries.insert(l.id, l.path);
                        }
                        Record::Mem(m) => {
                            r.last_t = r.last_t.max(m.t_end);
                            r.mem.push(m)
                        }
                        Record::Pool(p) => r.pools.push(p),
                        Record::Untraced(u) => {
                            r.last_t = r.last_t.max(u.t_end);
                            r.untraced.push(u)
                        }
                        Record::LocalMemory(l) => r.local.push(l),
                        Record::KernelFirst(k) => r.first_launches.push(k),
                        Record::Context(c) => r.contexts.push(c),
                        Record::Module(m) => r.modules.push(m),
                        Record::Notice(n) => r.notices.push(n),
                        Record::Dropped(d) => r.dropped = Some(d),
                        Record::Cost(c) => {
                            r.costs.push(c.clone());
                            r.cost = Some(c)
                        }
                        // Written by the probe, read by no analysis yet: the
                        // kernel-record switches, NVTX markers (the shim's
                        // step markers are read from its own file), NVML
                        // samples (the doctor's own file, `load_nvml`), and
                        // kinds from a newer writer (counted by the decoder).
                        Record::Activity(_)
                        | Record::Marker(_)
                        | Record::NvmlDevice(_)
                        | Record::NvmlProcess(_)
                        | Record::Unknown { .. } => {}
                    }
                });
                // The probe buffers per thread: calls of different threads
                // reach the file in flush order, not in time order; so do
                // pool summaries (the writer's tick, a callback's, exit's).
                r.mem.sort_by_key(|m| m.t_end);
                r.pools.sort_by_key(|p| p.t);
                r.untraced.sort_by_key(|u| u.t_start);
                // CUPTI hands kernel records over in buffers whose order is
                // not launch order either: put each growth where it landed.
                r.local = growths_in_launch_order(std::mem::take(&mut r.local), &r.first_launches);
                if let Some(h) = &outcome.header {
                    r.header = h.fields.iter().cloned().collect();
                }
                r.problems.extend(outcome.problems_when(
                    root,
                    path,
                    exited_normally.then_some("the command exited normally"),
                ));
            }
            Err(e) => r.problems.push(unreadable(root, path, &e)),
        }
    }
    if let Some(path) = &files.shim {
        let (lines, problems) = read_shim(root, path);
        r.shim = lines.events;
        r.shim_own_time = lines.own_time;
        r.problems.extend(problems);
    }
    r
}

/// Local-memory growths re-derived in launch order.
///
/// The probe names a growth at the first kernel record it *processes* whose
/// context total (CUPTI's `localMemoryTotal`) exceeds the largest seen so
/// far. CUPTI delivers kernel records in buffers that need not come in
/// launch order (on the H200 recordings, one run of records per launching
/// thread), and a buffer of later launches can be processed first: the
/// growth is then named at a later launch of another thread, after the
/// reservation had long grown (on the H200 the autograd thread's buffer came
/// first, and the forward's GELU growth was named at a backward kernel
/// 120 ms later). Every first-launch record carries the context's total too,
/// so the growths are walked again in launch order: a growth is the earliest
/// launch whose total exceeds every earlier one's. Where that launch is the
/// probe's own growth record it is kept (with `total_before` from the walk);
/// where it is only a first-launch record, a growth is made from it (kernel,
/// times, totals; its registers and local memory per thread are not in that
/// record: 0, unknown). Growth records that the walk finds already reserved
/// are dropped. Failed growths (zero times: the launch that could not grow
/// it) stay as written.
pub fn growths_in_launch_order(
    local: Vec<LocalMemoryGrowth>,
    first: &[KernelFirstLaunch],
) -> Vec<LocalMemoryGrowth> {
    let (failed, ok): (Vec<_>, Vec<_>) = local.into_iter().partition(|l| l.t_start == 0);
    // (launch start, a growth record before a first launch at the same
    // instant, context, total, which record).
    enum Seen<'a> {
        Growth(LocalMemoryGrowth),
        First(&'a KernelFirstLaunch),
    }
    let mut seen: Vec<(u64, u8, u32, u64, Seen)> = ok
        .into_iter()
        .map(|l| (l.t_start, 0, l.context_id, l.total_after, Seen::Growth(l)))
        .chain(
            first
                .iter()
                .filter(|k| k.t_start != 0)
                .map(|k| (k.t_start, 1, k.context_id, k.local_total, Seen::First(k))),
        )
        .collect();
    seen.sort_by_key(|s| (s.0, s.1));
    let mut max: HashMap<u32, u64> = HashMap::new();
    let mut out = Vec::new();
    for (_, _, ctx, total, s) in seen {
        let before = max.get(&ctx).copied().unwrap_or(0);
        if total <= before {
            continue;
        }
        max.insert(ctx, total);
        out.push(match s {
            Seen::Growth(l) => LocalMemoryGrowth {
                total_before: before,
                ..l
            },
            Seen::First(k) => LocalMemoryGrowth {
                t_start: k.t_start,
                t_end: k.t_end,
                device: k.device,
                context_id: k.context_id,
                correlation_id: 0,
                kernel: k.kernel.clone(),
                total_before: before,
                total_after: total,
                per_thread: 0,
                registers: 0,
                grid: [0; 3],
                block: [0; 3],
            },
        });
    }
    out.extend(failed);
    out
}

impl HostData {
    /// Decodes each process of this host and hands its records to `f`, on
    /// as many worker threads as there are cores (ranks are independent, and
    /// large runs have many). A worker holds one process's records at a time:
    /// they are dropped as soon as `f` returns, so memory stays bounded by
    /// the workers, not the ranks. Results come back in no particular order.
    pub fn map_processes<T: Send>(
        &self,
        root: &Path,
        f: impl Fn(&ProcessFiles, ProcessRecords) -> Option<T> + Sync,
    ) -> Vec<T> {
        let exited_normally = self.exited_normally();
        let workers = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(self.processes.len().max(1));
        let next = std::sync::atomic::AtomicUsize::new(0);
        let results = std::sync::Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            for _ in 0..workers {
                scope.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(files) = self.processes.get(i) else {
                            break;
                        };
                        if let Some(out) = f(files, read_process(root, files, exited_normally)) {
                            results
                                .lock()
                                .expect("no worker panics while holding the lock")
                                .push(out);
                        }
                    }
                });
            }
        });
        results.into_inner().expect("workers finished")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn growth(t: u64, ctx: u32, kernel: &str, before: u64, after: u64) -> LocalMemoryGrowth {
        LocalMemoryGrowth {
            t_start: t,
            t_end: if t == 0 { 0 } else { t + 10 },
            device: 0,
            context_id: ctx,
            correlation_id: 7,
            kernel: kernel.into(),
            total_before: before,
            total_after: after,
            per_thread: 16,
            registers: 18,
            grid: [1, 1, 1],
            block: [128, 1, 1],
        }
    }

    fn first(t: u64, ctx: u32, kernel: &str, total: u64) -> KernelFirstLaunch {
        KernelFirstLaunch {
            t_start: t,
            t_end: t + 10,
            device: 0,
            context_id: ctx,
            kernel: kernel.into(),
            local_total: total,
        }
    }

    fn pool(t: u64, reserved: u64) -> Record {
        Record::Pool(PoolUse {
            t,
            pool_id: 1,
            device: 0,
            handle: 0x10,
            library: 0,
            allocs: t,
            alloc_bytes: 0,
            frees: 0,
            failed: 0,
            reserved,
            reserved_high: reserved,
            used: 0,
        })
    }

    #[test]
    fn pool_summaries_of_different_threads_are_read_in_time_order() {
        // The exit's summary (t=300) flushed before the writer's (t=200):
        // read in file order, the pool would seem to shrink, then grow.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rank-0.pid-1.events");
        let mut bytes = encode_header(&[("pid", "1"), ("start_ns", "0"), ("status", "active")]);
        for r in [
            pool(100, 32 * MIB),
            pool(300, 96 * MIB),
            pool(200, 64 * MIB),
        ] {
            encode_record(&r, &mut bytes);
        }
        std::fs::write(&path, bytes).unwrap();
        let files = ProcessFiles {
            pid: 1,
            rank: Some(0),
            events: Some(path),
            shim: None,
        };
        let r = read_process(dir.path(), &files, false);
        let order: Vec<(u64, u64)> = r.pools.iter().map(|p| (p.t, p.reserved / MIB)).collect();
        assert_eq!(order, vec![(100, 32), (200, 64), (300, 96)]);
    }

    /// The shape of the H200 `shared-gpu-2` recording: the autograd
    /// thread's buffer was processed first, so the probe named the growth
    /// 148.5 -> 239.2 MiB at a backward kernel (`mul`, 277.747 s) although
    /// the forward's GELU (277.627 s) was the first launch with that total.
    #[test]
    fn a_growth_named_late_moves_to_the_first_launch_that_shows_it() {
        let (a, b) = (155_713_536, 250_871_808);
        let local = vec![
            growth(1_000, 1, "uniform", 0, a),
            growth(277_747, 1, "mul", a, b),
        ];
        let firsts = vec![
            first(1_000, 1, "uniform", a),
            first(277_619, 1, "nvjet", a),
            first(277_627, 1, "gelu", b),
            first(277_747, 1, "mul", b),
        ];
        let out = growths_in_launch_order(local, &firsts);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0], growth(1_000, 1, "uniform", 0, a));
        let g = &out[1];
        assert_eq!((g.t_start, g.t_end), (277_627, 277_637));
        assert_eq!(g.kernel, "gelu");
        assert_eq!((g.total_before, g.total_after), (a, b));
        // Not in a first-launch record: unknown, never the other kernel's.
        assert_eq!((g.registers, g.per_thread, g.correlation_id), (0, 0, 0));
    }

    #[test]
    fn growths_in_launch_order_stay_as_written() {
        let local = vec![
            growth(100, 1, "a", 0, 148 * MIB),
            growth(200, 1, "b", 148 * MIB, 240 * MIB),
            // Another context keeps its own reservation.
            growth(150, 2, "c", 0, 148 * MIB),
            // A launch that could not grow it: placed at the failure, kept.
            growth(0, 1, "spills", 240 * MIB, 4096 * MIB),
        ];
        let firsts = vec![
            first(100, 1, "a", 148 * MIB),
            first(150, 2, "c", 148 * MIB),
            first(200, 1, "b", 240 * MIB),
            first(300, 1, "d", 240 * MIB),
        ];
        let out = growths_in_launch_order(local.clone(), &firsts);
        assert_eq!(
            out,
            vec![
                local[0].clone(),
                local[2].clone(),
                local[1].clone(),
                local[3].clone()
            ]
        );
    }

    /// Two growths processed in the wrong order: the probe saw the larger
    /// total first, so it never wrote the earlier, smaller growth; the walk
    /// in launch order gives each its own record, the later one growing from
    /// the earlier one's total.
    #[test]
    fn growths_processed_out_of_order_are_split_in_launch_order() {
        let local = vec![growth(300, 1, "big", 0, 300 * MIB)];
        let firsts = vec![
            first(100, 1, "small", 100 * MIB),
            first(300, 1, "big", 300 * MIB),
        ];
        let out = growths_in_launch_order(local, &firsts);
        assert_eq!(out.len(), 2);
        assert_eq!(
            (
                out[0].kernel.as_str(),
                out[0].total_before,
                out[0].total_after
            ),
            ("small", 0, 100 * MIB)
        );
        assert_eq!(
            (
                out[1].kernel.as_str(),
                out[1].total_before,
                out[1].total_after
            ),
            ("big", 100 * MIB, 300 * MIB)
        );
        assert_eq!(out[1].registers, 18);
    }
}

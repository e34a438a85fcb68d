//! Decoding one process's files (probe events streamed, shim lines parsed)
//! into the compact collections the analysis works on, and handing them out
//! one process at a time per worker thread so memory stays bounded.

use super::shim::ShimEvent;
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
    pub problems: Vec<Problem>,
}

/// Streams the probe file and reads the shim file of one process.
pub fn read_process(root: &Path, files: &ProcessFiles) -> ProcessRecords {
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
                        _ => {}
                    }
                });
                // The probe buffers per thread: calls of different threads
                // reach the file in flush order, not in time order.
                r.mem.sort_by_key(|m| m.t_end);
                if let Some(h) = &outcome.header {
                    r.header = h.fields.iter().cloned().collect();
                }
                r.problems.extend(outcome.problems(root, path));
            }
            Err(e) => r.problems.push(unreadable(root, path, &e)),
        }
    }
    if let Some(path) = &files.shim {
        let (events, problems) = read_shim(root, path);
        r.shim = events;
        r.problems.extend(problems);
    }
    r
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
                        if let Some(out) = f(files, read_process(root, files)) {
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

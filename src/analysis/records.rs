//! Reading one process's files (probe events streamed, shim lines parsed) into
//! the compact collections the analysis works on.

use crate::load::shim::ShimEvent;
use crate::load::{Problem, ProcessFiles, read_shim, stream_records, unreadable};
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
                        Record::Cost(c) => r.cost = Some(c),
                        _ => {}
                    }
                });
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

/// Normalises PCI bus ids ("00000000:19:00.0" vs "0000:19:00.0").
pub fn bus_key(id: &str) -> String {
    let lower = id.to_ascii_lowercase();
    match lower.split_once(':') {
        Some((domain, rest)) => {
            format!("{:x}:{rest}", u64::from_str_radix(domain, 16).unwrap_or(0))
        }
        None => lower,
    }
}

/// Shortens a (possibly mangled) kernel name for display.
pub fn kernel_display(name: &str) -> String {
    let demangled = cpp_demangle::Symbol::new(name)
        .ok()
        .and_then(|s| {
            s.demangle(
                &cpp_demangle::DemangleOptions::default()
                    .no_params()
                    .no_return_type(),
            )
            .ok()
        })
        .unwrap_or_else(|| name.to_string());
    if demangled.chars().count() > 100 {
        let cut: String = demangled.chars().take(97).collect();
        format!("{cut}...")
    } else {
        demangled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_ids_match_across_nvml_and_cuda_spellings() {
        assert_eq!(bus_key("00000000:19:00.0"), bus_key("0000:19:00.0"));
        assert_ne!(bus_key("00000000:1A:00.0"), bus_key("0000:19:00.0"));
    }

    #[test]
    fn kernel_names_are_demangled_and_shortened() {
        assert_eq!(kernel_display("_Z3fooi"), "foo");
        assert_eq!(kernel_display("rowwise_mix"), "rowwise_mix");
        assert!(kernel_display(&"x".repeat(500)).ends_with("..."));
    }
}

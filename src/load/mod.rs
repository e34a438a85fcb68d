//! Reading a run directory back: metadata, per-process event files, shim
//! events, the NVML timeline and NCCL logs. Damaged files never panic: what can
//! be read is kept and each problem names the file (and offset or line).

pub mod nccl;
pub mod records;
pub mod shim;

use crate::run_folder::layout::{HOST_FILE, NVML_FILE, RUN_FILE};
use crate::run_folder::meta::{HostMeta, RunMeta};
use prewarm_events::{FileHeader, NvmlDeviceSample, NvmlProcessSample, Reader, Record, Tail};
use shim::{ShimLines, parse_shim};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

/// A run directory that cannot be used at all.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{path} does not exist")]
    Missing { path: PathBuf },
    #[error(
        "{path} is not a prewarm-doctor run directory: no run.json and no <variant>/<attempt>/<host>/host.json inside (point at the folder `prewarm-doctor run` printed)"
    )]
    NotARun { path: PathBuf },
    #[error("{path}: {what}")]
    BadMeta { path: PathBuf, what: String },
}

/// A problem inside an otherwise usable run: which file, where in it, and
/// what is wrong. Structured so renderers, the JSON account and the matrix can
/// name damaged attempts without parsing messages.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Problem {
    /// The file, relative to the run directory.
    pub file: String,
    /// Byte offset in the file where the problem starts, when one place is to blame.
    pub offset: Option<u64>,
    /// 1-based line, for line-oriented files (shim JSON lines).
    pub line: Option<u64>,
    /// What is wrong and what was done about it.
    pub what: String,
    /// True for damage (corrupt or unreadable data); false for expected loss
    /// such as a tail cut short by a crashed process.
    pub damaged: bool,
}

impl Problem {
    /// A problem with the file as a whole (cannot be opened, not valid JSON, ...).
    pub fn whole_file(file: String, what: String, damaged: bool) -> Self {
        Problem {
            file,
            offset: None,
            line: None,
            what,
            damaged,
        }
    }
}

impl Problem {
    /// Where in the file and what is wrong, without the file's name:
    /// "at byte offset 93375: ends mid-record ...".
    pub fn where_and_what(&self) -> String {
        match (self.offset, self.line) {
            (Some(o), Some(l)) => format!("line {l} (byte offset {o}): {}", self.what),
            (Some(o), None) => format!("at byte offset {o}: {}", self.what),
            (None, Some(l)) => format!("line {l}: {}", self.what),
            (None, None) => self.what.clone(),
        }
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.file, self.where_and_what())
    }
}

/// One process's files, not yet decoded ([`HostData::map_processes`] decodes them).
#[derive(Debug, Clone)]
pub struct ProcessFiles {
    pub pid: u32,
    pub rank: Option<u32>,
    pub events: Option<PathBuf>,
    pub shim: Option<PathBuf>,
}

/// The NVML timeline of one host.
#[derive(Debug, Clone, Default)]
pub struct NvmlTimeline {
    pub devices: BTreeMap<u32, Vec<NvmlDeviceSample>>,
    pub processes: Vec<NvmlProcessSample>,
}

/// One host folder of one attempt.
#[derive(Debug, Clone)]
pub struct HostData {
    pub dir: PathBuf,
    pub meta: Option<HostMeta>,
    pub processes: Vec<ProcessFiles>,
    pub nvml: NvmlTimeline,
    pub nccl: Vec<nccl::NcclComm>,
    pub problems: Vec<Problem>,
}

impl HostData {
    /// Whether this host's command exited normally: exit code 0, no signal,
    /// none forwarded. Its processes then ended on their own, so a file of
    /// theirs that stops short was cut after it was written (damage), not by
    /// a process killed mid-write (expected loss).
    pub fn exited_normally(&self) -> bool {
        self.meta.as_ref().is_some_and(exited_normally)
    }
}

fn exited_normally(m: &HostMeta) -> bool {
    m.exit
        .as_ref()
        .is_some_and(|e| e.code == 0 && e.signal.is_none() && e.forwarded == 0)
}

/// One attempt of one variant, across hosts.
#[derive(Debug, Clone)]
pub struct AttemptData {
    pub variant: String,
    pub attempt: String,
    pub hosts: Vec<HostData>,
}

/// A whole run directory.
#[derive(Debug, Clone)]
pub struct RunData {
    pub root: PathBuf,
    pub meta: Option<RunMeta>,
    pub attempts: Vec<AttemptData>,
}

fn rel(root: &Path, p: &Path) -> String {
    p.strip_prefix(root).unwrap_or(p).display().to_string()
}

fn sorted_dirs(p: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(p)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Loads the directory structure and small files; event files are streamed later.
pub fn load_run(root: &Path) -> Result<RunData, LoadError> {
    if !root.exists() {
        return Err(LoadError::Missing {
            path: root.to_path_buf(),
        });
    }
    let run_file = root.join(RUN_FILE);
    let meta = if run_file.exists() {
        let text = std::fs::read_to_string(&run_file).map_err(|e| LoadError::BadMeta {
            path: run_file.clone(),
            what: e.to_string(),
        })?;
        Some(
            serde_json::from_str::<RunMeta>(&text).map_err(|e| LoadError::BadMeta {
                path: run_file.clone(),
                what: format!("not a valid run.json ({e})"),
            })?,
        )
    } else {
        None
    };
    let mut attempts = Vec::new();
    for vdir in sorted_dirs(root) {
        for adir in sorted_dirs(&vdir) {
            let mut hosts = Vec::new();
            for hdir in sorted_dirs(&adir) {
                if hdir.join(HOST_FILE).exists() {
                    hosts.push(load_host(root, &hdir));
                }
            }
            if !hosts.is_empty() {
                attempts.push(AttemptData {
                    variant: vdir
                        .file_name()
                        .unwrap_or_default()
                        .to_string_lossy()
                        .into_owned(),
                    attempt: adir
                        .file_name()
                        .unwrap_or_default()
                        .to_string_lossy()
                        .into_owned(),
                    hosts,
                });
            }
        }
    }
    if attempts.is_empty() {
        return Err(LoadError::NotARun {
            path: root.to_path_buf(),
        });
    }
    attempts.sort_by(|a, b| {
        (
            a.variant.as_str(),
            a.attempt.parse::<u64>().unwrap_or(u64::MAX),
            a.attempt.as_str(),
        )
            .cmp(&(
                b.variant.as_str(),
                b.attempt.parse::<u64>().unwrap_or(u64::MAX),
                b.attempt.as_str(),
            ))
    });
    Ok(RunData {
        root: root.to_path_buf(),
        meta,
        attempts,
    })
}

/// Parses `rank-R.pid-P.events` / `proc.pid-P.shim.jsonl` names
/// (`prewarm_events::names`, where the probe and the shim get them).
pub fn parse_process_file_name(name: &str) -> Option<(Option<u32>, u32, bool)> {
    prewarm_events::names::parse_process_file(name)
}

fn load_host(root: &Path, dir: &Path) -> HostData {
    let mut problems = Vec::new();
    let meta_path = dir.join(HOST_FILE);
    let meta = match std::fs::read_to_string(&meta_path)
        .map(|t| serde_json::from_str::<HostMeta>(&t))
    {
        Ok(Ok(m)) => Some(m),
        Ok(Err(e)) => {
            problems.push(Problem {
                    file: rel(root, &meta_path),
                    offset: None,
                    line: Some(e.line() as u64),
                    what: format!("not a valid host.json ({e}); this host's exit status, GPUs and notices are unknown"),
                    damaged: true,
                });
            None
        }
        Err(e) => {
            problems.push(unreadable(root, &meta_path, &e));
            None
        }
    };
    let mut by_pid: BTreeMap<u32, ProcessFiles> = BTreeMap::new();
    let mut nccl_files = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.filter_map(|e| e.ok()) {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("nccl.") && name.ends_with(".log") {
                nccl_files.push(e.path());
                continue;
            }
            if name.starts_with(prewarm_events::names::PRESCRIPTION_ERRORS_PREFIX)
                && name.ends_with(prewarm_events::names::PRESCRIPTION_ERRORS_SUFFIX)
            {
                problems.extend(prescription_failures(root, &e.path()));
                continue;
            }
            let Some((rank, pid, is_shim)) = parse_process_file_name(&name) else {
                continue;
            };
            let entry = by_pid.entry(pid).or_insert(ProcessFiles {
                pid,
                rank,
                events: None,
                shim: None,
            });
            if entry.rank.is_none() {
                entry.rank = rank;
            }
            if is_shim {
                entry.shim = Some(e.path());
            } else {
                entry.events = Some(e.path());
            }
        }
    }
    let nvml = load_nvml(root, &dir.join(NVML_FILE), meta.as_ref(), &mut problems);
    let normal_exit = meta.as_ref().is_some_and(exited_normally);
    nccl_files.sort();
    let mut nccl = Vec::new();
    for f in nccl_files {
        // NCCL's own output: bytes that are not UTF-8 are replaced, not fatal.
        match std::fs::read(&f) {
            Ok(bytes) => {
                let text = String::from_utf8_lossy(&bytes);
                nccl.extend(nccl::parse_nccl_log(
                    &text,
                    &f.file_name().unwrap_or_default().to_string_lossy(),
                ));
                // A process that exited normally wrote its whole log: one
                // that stops mid-line or mid-init was cut afterwards.
                if normal_exit && let Some(cut) = nccl::cut_short(&text) {
                    problems.push(Problem {
                        file: rel(root, &f),
                        offset: Some(cut.offset),
                        line: Some(cut.line),
                        what: format!(
                            "{} although the command exited normally: the log was cut short after it was written",
                            cut.what
                        ),
                        damaged: true,
                    });
                }
            }
            Err(e) => problems.push(unreadable(root, &f, &e)),
        }
    }
    HostData {
        dir: dir.to_path_buf(),
        meta,
        processes: by_pid.into_values().collect(),
        nvml,
        nccl,
        problems,
    }
}

/// A prescription's failures in one process (the shim writes one line per
/// failed item: block, item, error): counted, so reports show them. Not
/// damage: the training ran, only part of the warmup did not.
fn prescription_failures(root: &Path, path: &Path) -> Option<Problem> {
    let text = match std::fs::read(path) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(e) => return Some(unreadable(root, path, &e)),
    };
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let first = lines.first()?;
    Some(Problem::whole_file(
        rel(root, path),
        format!(
            "the prescription failed {} time(s) in this process; the training was not affected (first: {})",
            lines.len(),
            first.replace('\t', " | ")
        ),
        false,
    ))
}

/// The doctor's NVML timeline. The doctor writes it whatever happens to the
/// command, and its sampler writes a last sample of every GPU after the
/// command ended (`t_end_ns`): a file of a host whose doctor finished that
/// stops mid-record or before that end was cut after it was written.
fn load_nvml(
    root: &Path,
    path: &Path,
    meta: Option<&HostMeta>,
    problems: &mut Vec<Problem>,
) -> NvmlTimeline {
    let mut t = NvmlTimeline::default();
    if !path.exists() {
        return t;
    }
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) => {
            problems.push(unreadable(root, path, &e));
            return t;
        }
    };
    let outcome = stream_records(BufReader::new(file), |r| match r {
        Record::NvmlDevice(s) => t.devices.entry(s.gpu).or_default().push(s),
        Record::NvmlProcess(s) => t.processes.push(s),
        _ => {}
    });
    // The sampler finished (its count is recorded) and said nothing of
    // stopping early.
    let finished = meta
        .filter(|m| m.nvml_samples > 0)
        .filter(|m| {
            !m.notices
                .iter()
                .any(|n| n.starts_with("the NVML timeline stopped early"))
        })
        .and_then(|m| m.t_end_ns.map(|end| (m, end)));
    problems.extend(outcome.problems_when(
        root,
        path,
        finished.map(|_| "the doctor sampled until the command ended"),
    ));
    for v in t.devices.values_mut() {
        v.sort_by_key(|s| s.t);
    }
    t.processes.sort_by_key(|s| s.t);
    let last = t
        .devices
        .values()
        .filter_map(|v| v.last())
        .map(|s| s.t)
        .max();
    if let Some((m, end)) = finished
        && outcome.error.is_none()
        && !matches!(outcome.tail, Some(Tail::Truncated { .. }))
        && last.is_none_or(|l| l < end)
    {
        let size = std::fs::metadata(path).map_or(0, |md| md.len());
        problems.push(Problem {
            file: rel(root, path),
            offset: Some(size),
            line: None,
            what: format!(
                "ends {} although the doctor sampled until the command ended ({:.2} s after it started): the file was cut short after it was written",
                last.map_or("before its first sample".to_string(), |l| format!(
                    "at a sample {:.2} s after the command started",
                    l.saturating_sub(m.t_start_ns) as f64 / 1e9
                )),
                end.saturating_sub(m.t_start_ns) as f64 / 1e9
            ),
            damaged: true,
        });
    }
    t
}

/// How streaming one event file went.
#[derive(Debug, Clone)]
pub struct StreamOutcome {
    pub header: Option<FileHeader>,
    pub records: u64,
    pub tail: Option<Tail>,
    pub error: Option<prewarm_events::DecodeError>,
    pub unknown_records: u64,
}

impl StreamOutcome {
    /// What went wrong reading the file, if anything: at most one problem for
    /// damage or a cut-short tail, plus one for records of unknown kinds.
    pub fn problems(&self, root: &Path, path: &Path) -> Vec<Problem> {
        self.problems_when(root, path, None)
    }

    /// [`StreamOutcome::problems`] for a file whose writer may have finished
    /// on its own: `finished` says why it did ("the command exited
    /// normally"); a cut-short tail is then damage, the file was cut after it
    /// was written, not by a process killed mid-write.
    pub fn problems_when(&self, root: &Path, path: &Path, finished: Option<&str>) -> Vec<Problem> {
        let file = rel(root, path);
        let mut out = Vec::new();
        if let Some(e) = &self.error {
            out.push(Problem {
                file: file.clone(),
                offset: Some(e.offset),
                line: None,
                what: format!(
                    "{}; the {} records before it were used, the rest of the file was ignored",
                    e.what, self.records
                ),
                damaged: true,
            });
        } else if let Some(Tail::Truncated { offset, bytes }) = self.tail {
            out.push(Problem {
                file: file.clone(),
                offset: Some(offset),
                line: None,
                what: match finished {
                    Some(why) => format!(
                        "ends mid-record ({bytes} trailing bytes ignored) although {why}: the file was cut short after it was written; the {} records before the cut were used",
                        self.records
                    ),
                    None => format!(
                        "ends mid-record ({bytes} trailing bytes ignored): the process stopped while writing; everything before was used"
                    ),
                },
                damaged: finished.is_some(),
            });
        }
        if self.unknown_records > 0 {
            out.push(Problem::whole_file(
                file,
                format!(
                    "{} records of kinds this version does not know were skipped (written by a newer probe)",
                    self.unknown_records
                ),
                false,
            ));
        }
        out
    }
}

/// A file that exists but cannot be read (permissions, I/O error).
pub fn unreadable(root: &Path, path: &Path, e: &std::io::Error) -> Problem {
    Problem::whole_file(rel(root, path), format!("cannot be read: {e}"), true)
}

/// Streams every record of an event file through `f`.
pub fn stream_records<R: std::io::Read>(input: R, mut f: impl FnMut(Record)) -> StreamOutcome {
    let mut reader = match Reader::new(input) {
        Ok(r) => r,
        Err(e) => {
            return StreamOutcome {
                header: None,
                records: 0,
                tail: None,
                error: Some(e),
                unknown_records: 0,
            };
        }
    };
    let header = Some(reader.header().clone());
    let mut records = 0u64;
    loop {
        match reader.next_record() {
            Ok(Some(r)) => {
                records += 1;
                f(r);
            }
            Ok(None) => {
                return StreamOutcome {
                    header,
                    records,
                    tail: reader.tail(),
                    error: None,
                    unknown_records: reader.unknown_records,
                };
            }
            Err(e) => {
                return StreamOutcome {
                    header,
                    records,
                    tail: None,
                    error: Some(e),
                    unknown_records: reader.unknown_records,
                };
            }
        }
    }
}

/// The step file of the shim file `stem` names by its pid alone: a shim
/// before 2026-12-05 named its step file with a RANK the program set after
/// its first line (`rank-0.pid-P` beside `proc.pid-P`). Exactly one such
/// file, or none.
fn same_process_step_file(shim: &Path, stem: &str) -> Option<std::path::PathBuf> {
    use prewarm_events::names::STEPS_SUFFIX;
    let pid_part = &stem[stem.rfind(".pid-")?..];
    let wanted = format!("{pid_part}{STEPS_SUFFIX}");
    let mut found = std::fs::read_dir(shim.parent()?)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().ends_with(&wanted))
        });
    let first = found.next()?;
    found.next().is_none().then_some(first)
}

/// Reads a shim file. Its problems are folded into at most one per file (the
/// first bad line with its byte offset, and how many more there were).
pub fn read_shim(root: &Path, path: &Path) -> (ShimLines, Vec<Problem>) {
    let (lines, mut problems) = match std::fs::read(path) {
        Ok(bytes) => shim_from_bytes(&rel(root, path), &bytes),
        Err(e) => (ShimLines::default(), vec![unreadable(root, path, &e)]),
    };
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    use prewarm_events::names::{SHIM_SUFFIX, STEPS_SUFFIX};
    let Some(stem) = name.strip_suffix(SHIM_SUFFIX) else {
        return (lines, problems);
    };
    let steps = path.with_file_name(format!("{stem}{STEPS_SUFFIX}"));
    let steps = if steps.exists() {
        steps
    } else {
        match same_process_step_file(path, stem) {
            Some(other) => other,
            None => return (lines, problems),
        }
    };
    let bytes = match std::fs::read(&steps) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (lines, problems),
        Err(e) => {
            problems.push(unreadable(root, &steps, &e));
            return (lines, problems);
        }
    };
    match shim::parse_step_file(&bytes) {
        Ok(file) => (shim::with_step_file(lines, file), problems),
        Err(what) => {
            problems.push(Problem {
                file: rel(root, &steps),
                offset: None,
                line: None,
                what: format!("not a step file: {what}; the warm steps' ends in it are not used"),
                damaged: true,
            });
            (lines, problems)
        }
    }
}

/// Parses the bytes of a shim file named `file` (relative to the run): the
/// events, and at most one problem for the file.
pub fn shim_from_bytes(file: &str, bytes: &[u8]) -> (ShimLines, Vec<Problem>) {
    let (lines, bad) = parse_shim(bytes);
    let Some(first) = bad.first() else {
        return (lines, Vec::new());
    };
    let damaged = bad.iter().any(|b| !b.cut_short);
    let mut what = first.what.clone();
    if bad.len() > 1 {
        what.push_str(&format!(
            " (and {} more bad lines; every good line was used)",
            bad.len() - 1
        ));
    } else if damaged {
        what.push_str(" (the line was skipped; every other line was used)");
    }
    let problem = Problem {
        file: file.to_string(),
        offset: Some(first.offset),
        line: Some(first.line),
        what,
        damaged,
    };
    (lines, vec![problem])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_file_names() {
        assert_eq!(
            parse_process_file_name("rank-3.pid-77.events"),
            Some((Some(3), 77, false))
        );
        assert_eq!(
            parse_process_file_name("proc.pid-9.shim.jsonl"),
            Some((None, 9, true))
        );
        assert_eq!(parse_process_file_name("nvml.events"), None);
        assert_eq!(parse_process_file_name("rank-x.pid-1.events"), None);
    }

    #[test]
    fn foreign_folders_are_refused_clearly() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/b/c")).unwrap();
        let err = load_run(dir.path()).unwrap_err();
        assert!(
            err.to_string()
                .contains("is not a prewarm-doctor run directory")
        );
        let err = load_run(&dir.path().join("nope")).unwrap_err();
        assert!(err.to_string().contains("does not exist"));
    }
}

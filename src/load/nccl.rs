//! NCCL communicator creation, from NCCL's INIT debug output (which the doctor
//! sends to `<host>/nccl.<host>.<pid>.log`, never to the user's terminal).

use serde::Serialize;
use std::collections::BTreeMap;

/// One communicator as one rank saw it come up.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NcclComm {
    pub log: String,
    pub pid: Option<u32>,
    /// NCCL's communicator pointer (unique within the process).
    pub comm: String,
    pub comm_id: Option<String>,
    pub rank: Option<u32>,
    pub nranks: Option<u32>,
    pub cuda_dev: Option<i32>,
    pub bus_id: Option<String>,
    /// Wall-clock (Unix seconds) of the Init START / COMPLETE lines, when NCCL
    /// printed timestamps.
    pub start_unix: Option<f64>,
    pub complete_unix: Option<f64>,
    /// NCCL's own total init time, seconds ("Init timings" line).
    pub init_seconds: Option<f64>,
    /// NCCL's breakdown of the init time (kernels, alloc, bootstrap, ...).
    pub timings: BTreeMap<String, f64>,
}

impl NcclComm {
    /// A communicator first seen in `log` (process `pid`), nothing else known yet.
    pub fn seen(log: &str, pid: Option<u32>, comm: &str) -> Self {
        Self {
            log: log.to_string(),
            pid,
            comm: comm.to_string(),
            comm_id: None,
            rank: None,
            nranks: None,
            cuda_dev: None,
            bus_id: None,
            start_unix: None,
            complete_unix: None,
            init_seconds: None,
            timings: BTreeMap::new(),
        }
    }
}

fn field<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let mut words = text.split_whitespace();
    while let Some(w) = words.next() {
        if w == name {
            return words.next();
        }
    }
    None
}

fn leading_timestamp(line: &str) -> (Option<f64>, &str) {
    let trimmed = line.trim_start();
    if let Some(rest) = trimmed.strip_prefix('[')
        && let Some((inside, after)) = rest.split_once(']')
        && let Ok(v) = inside.trim().parse::<f64>()
    {
        return (Some(v), after.trim_start());
    }
    (None, trimmed)
}

fn pid_of(prefix: &str) -> Option<u32> {
    // "host:pid:tid [dev]"
    let first = prefix.split_whitespace().next()?;
    let mut parts = first.rsplitn(3, ':');
    let _tid = parts.next()?;
    parts.next()?.parse().ok()
}

/// Parses one NCCL log file; `name` is kept for reference.
pub fn parse_nccl_log(text: &str, name: &str) -> Vec<NcclComm> {
    let mut comms: Vec<NcclComm> = Vec::new();
    for line in text.lines() {
        let (ts, line) = leading_timestamp(line);
        let Some((prefix, msg)) = line.split_once("NCCL INFO ") else {
            continue;
        };
        let pid = pid_of(prefix);
        if msg.contains(" - Init START") || msg.contains(" - Init COMPLETE") {
            let Some(comm) = field(msg, "comm") else {
                continue;
            };
            let idx = match comms.iter().position(|c| {
                c.comm == comm
                    && c.pid == pid
                    && c.complete_unix.is_none()
                    && c.init_seconds.is_none()
            }) {
                Some(i) => i,
                None => {
                    comms.push(NcclComm::seen(name, pid, comm));
                    comms.len() - 1
                }
            };
            let c = &mut comms[idx];
            c.rank = field(msg, "rank").and_then(|v| v.parse().ok()).or(c.rank);
            c.nranks = field(msg, "nranks")
                .and_then(|v| v.parse().ok())
                .or(c.nranks);
            c.cuda_dev = field(msg, "cudaDev")
                .and_then(|v| v.parse().ok())
                .or(c.cuda_dev);
            c.bus_id = field(msg, "busId").map(str::to_string).or(c.bus_id.clone());
            c.comm_id = field(msg, "commId")
                .map(str::to_string)
                .or(c.comm_id.clone());
            if msg.contains(" - Init START") {
                c.start_unix = ts.or(c.start_unix);
            } else {
                c.complete_unix = ts.or(c.complete_unix);
            }
        } else if let Some(rest) = msg.strip_prefix("Init timings") {
            // "Init timings - ncclCommInitRankConfig: rank 0 nranks 1 total 0.53 (kernels 0.18, alloc 0.01, ...)"
            let total = field(rest, "total").and_then(|v| v.parse::<f64>().ok());
            let mut timings = BTreeMap::new();
            if let Some((_, inside)) = rest.split_once('(') {
                for part in inside.trim_end_matches(')').split(',') {
                    let mut kv = part.split_whitespace();
                    if let (Some(k), Some(v)) = (kv.next(), kv.next())
                        && let Ok(v) = v.parse::<f64>()
                    {
                        timings.insert(k.to_string(), v);
                    }
                }
            }
            let rank: Option<u32> = field(rest, "rank").and_then(|v| v.parse().ok());
            // Attach to the latest communicator of this process/rank still without timings.
            if let Some(c) = comms.iter_mut().rev().find(|c| {
                c.pid == pid && c.init_seconds.is_none() && (rank.is_none() || c.rank == rank)
            }) {
                c.init_seconds = total;
                c.timings = timings;
            }
        }
    }
    comms
}

/// Where a log stops short, for a process that exited normally.
#[derive(Debug, Clone, PartialEq)]
pub struct Cut {
    /// Byte offset of the line to blame.
    pub offset: u64,
    /// Its 1-based line.
    pub line: u64,
    pub what: String,
}

/// Whether a whole log reads as cut short: its last line has no end (NCCL
/// ends every line), or a communicator's `Init START` has no `Init COMPLETE`
/// after it (a process that went on to exit normally completed every init
/// it started). `None` for a log that reads whole.
pub fn cut_short(text: &str) -> Option<Cut> {
    if !text.is_empty() && !text.ends_with('\n') {
        let start = text.rfind('\n').map_or(0, |i| i + 1);
        return Some(Cut {
            offset: start as u64,
            line: text.lines().count() as u64,
            what: "ends mid-line".into(),
        });
    }
    // (pid, comm) -> (offset, line) of an Init START still waiting.
    let mut open: BTreeMap<(Option<u32>, String), (u64, u64)> = BTreeMap::new();
    let mut offset = 0u64;
    for (i, raw) in text.split_inclusive('\n').enumerate() {
        let (_, line) = leading_timestamp(raw);
        if let Some((prefix, msg)) = line.split_once("NCCL INFO ")
            && let Some(comm) = field(msg, "comm")
        {
            let key = (pid_of(prefix), comm.to_string());
            if msg.contains(" - Init START") {
                open.insert(key, (offset, i as u64 + 1));
            } else if msg.contains(" - Init COMPLETE") {
                open.remove(&key);
            }
        }
        offset += raw.len() as u64;
    }
    let ((_, comm), (offset, line)) = open.into_iter().min_by_key(|(_, at)| *at)?;
    Some(Cut {
        offset,
        line,
        what: format!(
            "communicator {comm}'s Init START has no Init COMPLETE after it (the log ends first)"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_cut_mid_line_or_mid_init_is_cut_short_and_a_whole_one_is_not() {
        let log = "\
[1.0] h:42:42 [0] NCCL INFO ncclCommInitRankConfig comm 0x55d0 rank 0 nranks 2 - Init START
[1.5] h:42:42 [0] NCCL INFO Channel 00/64 : 0
[1.8] h:42:42 [0] NCCL INFO ncclCommInitRankConfig comm 0x55d0 rank 0 nranks 2 - Init COMPLETE
[1.9] h:42:42 [0] NCCL INFO Init timings - ncclCommInitRankConfig: rank 0 nranks 2 total 0.80
";
        assert_eq!(cut_short(log), None);
        assert_eq!(cut_short(""), None);
        let mid_line = &log[..log.len() - 10];
        let cut = cut_short(mid_line).unwrap();
        assert_eq!((cut.line, cut.what.as_str()), (4, "ends mid-line"));
        assert_eq!(cut.offset as usize, log.rfind("[1.9]").unwrap());
        let mid_init = &log[..log.find("[1.8]").unwrap()];
        let cut = cut_short(mid_init).unwrap();
        assert_eq!((cut.offset, cut.line), (0, 1));
        assert!(cut.what.contains("0x55d0"), "{}", cut.what);
        // The same pointer in another process is another communicator.
        let other = log.replacen("h:42:42 [0] NCCL INFO ncclCommInitRankConfig comm 0x55d0 rank 0 nranks 2 - Init COMPLETE", "h:43:43 [0] NCCL INFO ncclCommInitRankConfig comm 0x55d0 rank 0 nranks 2 - Init COMPLETE", 1);
        assert!(cut_short(&other).is_some());
    }

    #[test]
    fn parses_init_lines_and_timings() {
        let log = "\
[1764428400.123456] h:4242:4250 [0] NCCL INFO ncclCommInitRankConfig comm 0x55d0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 19000 commId 0xabc - Init START
[1764428400.923456] h:4242:4250 [0] NCCL INFO ncclCommInitRankConfig comm 0x55d0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 19000 commId 0xabc - Init COMPLETE
[1764428400.923500] h:4242:4250 [0] NCCL INFO Init timings - ncclCommInitRankConfig: rank 0 nranks 2 total 0.80 (kernels 0.20, alloc 0.05, bootstrap 0.01)
h:4242:4250 [0] NCCL INFO ncclCommSplit comm 0x77e0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 19000 commId 0xdef - Init COMPLETE
";
        let comms = parse_nccl_log(log, "nccl.h.4242.log");
        assert_eq!(comms.len(), 2);
        let c = &comms[0];
        assert_eq!(c.pid, Some(4242));
        assert_eq!(c.nranks, Some(2));
        assert_eq!(c.comm_id.as_deref(), Some("0xabc"));
        assert!((c.complete_unix.unwrap() - c.start_unix.unwrap() - 0.8).abs() < 1e-6);
        assert_eq!(c.init_seconds, Some(0.80));
        assert_eq!(c.timings["alloc"], 0.05);
        assert_eq!(comms[1].comm, "0x77e0");
        assert_eq!(comms[1].start_unix, None);
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

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

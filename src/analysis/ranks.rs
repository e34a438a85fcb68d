//! How the ranks of one attempt differ. The rank that runs out of memory first
//! is the one with the highest step-1 peak, not the average; the skew says
//! whether one rank (a pipeline stage, the rank that also builds a second
//! communicator) carries extra step-1 work.

use super::account::{PhaseAccount, ProcessAccount};
use super::phases::Phase;
use serde::Serialize;

/// The step-1 account of a process, if it reached step 1.
pub fn step1(p: &ProcessAccount) -> Option<&PhaseAccount> {
    p.phases.iter().find(|ph| ph.phase == Phase::Step1)
}

/// The highest device memory in use during a process's step 1.
pub fn step1_peak(p: &ProcessAccount) -> Option<u64> {
    step1(p).and_then(|s| s.device_used_peak)
}

/// Out-of-pool bytes that landed in step 1: allocation calls, local-memory
/// growth and NCCL's inferred init bytes (device growth inside an init window
/// without allocation calls).
pub fn step1_out_of_pool(p: &ProcessAccount) -> u64 {
    step1(p).map_or(0, |s| s.out_of_pool_allocated + s.local_memory_growth)
        + p.nccl
            .iter()
            .filter(|c| c.phase == Some(Phase::Step1))
            .map(|c| c.inferred_bytes)
            .sum::<u64>()
}

/// The item with the highest `key`, the first of equals. Every "worst rank"
/// is chosen so: an attempt's processes come sorted by rank (then host and
/// pid), so a tie goes to the lowest rank, and the figures a report takes
/// from a worst rank are those of the rank its rank table names
/// (multinode-fsdp2: two ranks with the same step-1 out-of-pool bytes).
pub fn first_highest<T: Copy, K: PartialOrd>(
    items: impl IntoIterator<Item = T>,
    key: impl Fn(T) -> K,
) -> Option<T> {
    items
        .into_iter()
        .reduce(|a, b| if key(b) > key(a) { b } else { a })
}

/// The rank whose step-1 figures stand for its attempt's event classes
/// (docs/verdicts.md §1): the most out-of-pool bytes in step 1.
pub fn most_step1_out_of_pool<'a>(ranks: &[&'a ProcessAccount]) -> Option<&'a ProcessAccount> {
    first_highest(ranks.iter().copied(), step1_out_of_pool)
}

/// How ranks are ordered by who runs out of memory first: the step-1
/// device peak, then the step-1 out-of-pool bytes (all that is known of a
/// rank without a peak).
pub fn peak_order(p: &ProcessAccount) -> (Option<u64>, u64) {
    (step1_peak(p), step1_out_of_pool(p))
}

/// The rank that runs out of memory first ([`peak_order`]): its step-1
/// account gives the memory held at step-1 end (docs/verdicts.md §1).
pub fn highest_step1_peak<'a>(ranks: &[&'a ProcessAccount]) -> Option<&'a ProcessAccount> {
    first_highest(ranks.iter().copied(), peak_order)
}

/// NCCL communicators this process created in step 1.
pub fn step1_comm_count(p: &ProcessAccount) -> u32 {
    p.nccl
        .iter()
        .filter(|c| c.phase == Some(Phase::Step1))
        .count() as u32
}

/// Whether a process is a training rank: it reached a step or failed
/// (launchers and helpers that only touched CUDA are not).
pub fn is_rank(p: &ProcessAccount) -> bool {
    p.steps.count > 0 || p.steps.step1_s.is_some() || !p.forensics.is_empty()
}

/// One figure and the rank it belongs to.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RankFigure<T> {
    /// None for a process without RANK (a plain `python` run).
    pub rank: Option<u32>,
    /// The host tag, so a rank can be found among many nodes.
    pub host: String,
    pub pid: u32,
    pub value: T,
}

/// Worst rank and spread per figure, over the ranks of one attempt.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RankSpread {
    /// Processes that reached a step or failed (helpers that only touched CUDA are not ranks).
    pub ranks: u32,
    /// Host tags the ranks came from, sorted.
    pub hosts: Vec<String>,
    /// The rank that runs out of memory first when step 1 grows.
    pub worst_step1_peak: Option<RankFigure<u64>>,
    /// Highest minus lowest step-1 device peak.
    pub step1_peak_skew: Option<u64>,
    /// The rank with the most lazy initialisation outside the pool in step 1.
    pub worst_step1_out_of_pool: Option<RankFigure<u64>>,
    pub step1_out_of_pool_skew: Option<u64>,
    /// The rank every other rank waits for at step 1's collectives.
    pub slowest_step1: Option<RankFigure<f64>>,
    /// Slowest minus fastest step 1, in seconds.
    pub step1_skew_s: Option<f64>,
    /// NCCL communicators created in step 1, fewest and most over ranks.
    pub step1_nccl_comms: (u32, u32),
    /// The job's world size, as the ranks report it.
    pub world_size: Option<u32>,
    /// Ranks below the world size with no capture in this run folder (a node
    /// whose doctor wrote elsewhere, or that never started).
    pub missing_ranks: Vec<u32>,
}

impl<T> RankFigure<T> {
    /// "rank 3 on node-b" (or "pid 123 on node-b" for a process without a rank).
    pub fn owner(&self) -> String {
        let name = self
            .rank
            .map_or(format!("pid {}", self.pid), |r| format!("rank {r}"));
        format!("{name} on {}", self.host)
    }
}

fn figure<T: Copy>(p: &ProcessAccount, value: T) -> RankFigure<T> {
    RankFigure {
        rank: p.rank,
        host: p.host.clone(),
        pid: p.pid,
        value,
    }
}

/// The figure of the rank `worst` picked (none when it has none) and the
/// highest minus the lowest over the ranks that have one.
fn spread_u64(
    ps: &[&ProcessAccount],
    worst: Option<&ProcessAccount>,
    f: impl Fn(&ProcessAccount) -> Option<u64>,
) -> (Option<RankFigure<u64>>, Option<u64>) {
    let values: Vec<u64> = ps.iter().filter_map(|p| f(p)).collect();
    let skew = values.iter().max().zip(values.iter().min());
    (
        worst.and_then(|p| f(p).map(|v| figure(p, v))),
        skew.map(|(h, l)| h - l),
    )
}

/// The spread over an attempt's ranks: processes that reached a step or
/// failed (helper processes that only touched CUDA are left out). None for
/// fewer than two such processes, unless ranks of the world are missing.
pub fn spread(processes: &[ProcessAccount]) -> Option<RankSpread> {
    let ranks: Vec<&ProcessAccount> = processes.iter().filter(|p| is_rank(p)).collect();
    let world_size = processes.iter().filter_map(|p| p.world_size).max();
    let present: std::collections::BTreeSet<u32> =
        processes.iter().filter_map(|p| p.rank).collect();
    let missing_ranks: Vec<u32> = (0..world_size.unwrap_or(0).min(1 << 20))
        .filter(|r| !present.contains(r))
        .collect();
    if ranks.len() < 2 && missing_ranks.is_empty() {
        return None;
    }
    let (worst_step1_peak, step1_peak_skew) =
        spread_u64(&ranks, highest_step1_peak(&ranks), step1_peak);
    let (worst_step1_out_of_pool, step1_out_of_pool_skew) =
        spread_u64(&ranks, most_step1_out_of_pool(&ranks), |p| {
            Some(step1_out_of_pool(p))
        });
    let times: Vec<(f64, &ProcessAccount)> = ranks
        .iter()
        .filter_map(|p| p.steps.step1_s.map(|v| (v, *p)))
        .collect();
    let slow = first_highest(times.iter().copied(), |t| t.0);
    let fast = times.iter().map(|t| t.0).reduce(f64::min);
    let comms: Vec<u32> = ranks.iter().map(|p| step1_comm_count(p)).collect();
    let mut hosts: Vec<String> = ranks.iter().map(|p| p.host.clone()).collect();
    hosts.sort();
    hosts.dedup();
    Some(RankSpread {
        ranks: ranks.len() as u32,
        hosts,
        worst_step1_peak,
        step1_peak_skew,
        worst_step1_out_of_pool,
        step1_out_of_pool_skew,
        slowest_step1: slow.map(|(v, p)| figure(p, v)),
        step1_skew_s: slow.zip(fast).map(|(s, f)| s.0 - f),
        step1_nccl_comms: (
            comms.iter().copied().min().unwrap_or(0),
            comms.iter().copied().max().unwrap_or(0),
        ),
        world_size,
        missing_ranks,
    })
}

/// "3, 5-7, 12" for a sorted list of ranks.
pub fn rank_ranges(ranks: &[u32]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < ranks.len() {
        let start = ranks[i];
        let mut end = start;
        while i + 1 < ranks.len() && ranks[i + 1] == end + 1 {
            i += 1;
            end = ranks[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::rank_ranges;

    #[test]
    fn ranges_are_compact() {
        assert_eq!(rank_ranges(&[]), "");
        assert_eq!(rank_ranges(&[3]), "3");
        assert_eq!(rank_ranges(&[1, 2, 3, 5, 8, 9]), "1-3, 5, 8-9");
    }
}

//! The instants the replay must answer for one process: the phases' ends,
//! the step-end readings of torch's allocator, the exposures' peaks.

use crate::analysis::framework_joins::{self, CommWindow, Window};
use crate::analysis::phases::{Boundaries, Phase};
use crate::load::records::ProcessRecords;
use crate::load::shim::ShimEvent;

/// torch's own figures at one step end, put beside the doctor's pool.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct StepEndReading {
    pub(super) step: u32,
    pub(super) t: u64,
    /// torch's pool reserve.
    pub(super) reserved: Option<u64>,
    /// Device total minus free, as torch read it.
    pub(super) device_used: Option<u64>,
}

/// Every step end the shim recorded, with torch's figures.
pub(super) fn step_end_readings(r: &ProcessRecords) -> Vec<StepEndReading> {
    r.shim
        .iter()
        .filter_map(|e| match e {
            ShimEvent::StepEnd {
                t,
                step,
                reserved,
                device_free,
                device_total,
                ..
            } => Some(StepEndReading {
                step: *step,
                t: *t,
                reserved: *reserved,
                device_used: device_total
                    .zip(*device_free)
                    .map(|(a, b)| a.saturating_sub(b)),
            }),
            _ => None,
        })
        .collect()
}

/// The instants whose memory state the account needs, in the order the
/// replay answers them: each phase's accounting instant, both ends of each
/// communicator's measurement span, then each step end.
#[derive(Debug)]
pub(super) struct QueryPlan {
    pub(super) phase_windows: Vec<(Phase, Window)>,
    /// When the process died (its exception), if it did.
    pub(super) died_at: Option<u64>,
    /// Each communicator's init window, made disjoint (framework_joins::comm_spans).
    pub(super) spans: Vec<Option<Window>>,
    /// Where each communicator's inferred bytes are read: span ends outside
    /// any local-memory growth's window (framework_joins::comm_measure_spans).
    pub(super) read_at: Vec<Option<Window>>,
    /// Where each communicator's allocation calls count: from its Init START
    /// line to its span's end (framework_joins::comm_alloc_windows).
    pub(super) alloc_at: Vec<Option<Window>>,
    pub(super) step_ends: Vec<StepEndReading>,
    pub(super) queries: Vec<u64>,
}

impl QueryPlan {
    pub(super) fn new(
        r: &ProcessRecords,
        bounds: &Boundaries,
        comm_windows: &[CommWindow],
    ) -> QueryPlan {
        let phase_windows: Vec<(Phase, Window)> = Phase::ALL
            .iter()
            .filter_map(|p| bounds.window(*p).map(|w| (*p, w)))
            .collect();
        let spans =
            framework_joins::comm_spans(&comm_windows.iter().map(|c| c.window).collect::<Vec<_>>());
        let read_at = framework_joins::comm_measure_spans(
            &spans,
            &crate::analysis::memory::growth_windows(r),
        );
        let alloc_at = framework_joins::comm_alloc_windows(comm_windows, &spans);
        let mut plan = QueryPlan {
            phase_windows,
            died_at: bounds.died,
            spans,
            read_at,
            alloc_at,
            step_ends: step_end_readings(r),
            queries: Vec::new(),
        };
        let phase_instants: Vec<u64> = plan
            .phase_windows
            .iter()
            .map(|(_, w)| plan.gap_instant(*w))
            .collect();
        let comm_instants = plan.read_at.iter().flatten().flat_map(|s| [s.0, s.1]);
        let mut queries: Vec<u64> = phase_instants.into_iter().chain(comm_instants).collect();
        queries.extend(plan.step_ends.iter().map(|s| s.t));
        plan.queries = queries;
        plan
    }

    /// Where a phase [a, b] is accounted: its end, or the exception when the
    /// process died inside it (teardown frees memory and would hide what was
    /// held).
    pub(super) fn gap_instant(&self, (a, b): Window) -> u64 {
        match self.died_at {
            Some(d) if d >= a && d <= b => d,
            _ => b,
        }
    }

    /// Windows across which the replay does not measure module code: the
    /// communicators' spans (their growth is NCCL's inferred figure).
    pub(super) fn comm_exclusions(&self) -> Vec<Window> {
        self.spans.iter().flatten().copied().collect()
    }

    /// The replay state of the first communicator query.
    pub(super) fn first_comm_query(&self) -> usize {
        self.phase_windows.len()
    }

    /// The replay state of the first step-end query.
    pub(super) fn first_step_query(&self) -> usize {
        self.first_comm_query() + 2 * self.read_at.iter().flatten().count()
    }
}

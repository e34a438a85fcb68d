//! Framework events joined to CUDA events on the one clock: Triton autotune
//! and compile windows (from the shim), NCCL communicator creation (from NCCL's
//! INIT log, wall-clock converted to CLOCK_MONOTONIC), the step-1 stall
//! breakdown and the list of warmups that still land after setup.

use super::account::*;
use super::memory::{OopAlloc, Replay};
use super::phases::{Boundaries, Phase};
use crate::load::nccl::NcclComm;
use crate::load::records::ProcessRecords;
use crate::load::shim::ShimEvent;
use crate::prewarm::catalog::EventClass;
use prewarm_events::MemEffect;
use std::collections::BTreeMap;

mod class_costs;
mod late_warmups;
mod nccl;
mod stalls;
#[cfg(test)]
mod tests;
mod triton;

pub use class_costs::*;
pub use late_warmups::*;
pub use nccl::*;
pub use stalls::*;
pub use triton::*;

/// A time window [t0, t1] on the monotonic clock.
pub type Window = (u64, u64);

fn secs(t: u64, start: u64) -> f64 {
    t.saturating_sub(start) as f64 / 1e9
}

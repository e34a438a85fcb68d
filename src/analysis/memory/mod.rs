//! Replaying a process's allocation calls and local-memory growth in time
//! order: per-phase totals by source, the state at chosen instants, and the
//! exposure of every out-of-pool request.

use super::device::DeviceView;
use super::phases::Boundaries;
use crate::load::records::ProcessRecords;

mod device_growth;
mod replayer;
mod state;
#[cfg(test)]
mod tests;

use device_growth::*;
pub use device_growth::{failed_launch_time, growth_windows};
use replayer::*;
pub use state::*;

/// Replays the process; `queries` are instants whose state the caller needs.
///
/// `exclude` are windows whose device growth without allocation calls is
/// another part's (the NCCL communicator spans): module-code growth is not
/// measured across them.
///
/// Stages: the device growth measured around each local-memory record and at
/// lazy module loading, the records and queries in time order
/// ([`replay_items`]), then one walk that applies each ([`Replayer`]).
pub fn replay(
    r: &ProcessRecords,
    bounds: &Boundaries,
    device: &DeviceView,
    queries: &[u64],
    exclude: &[(u64, u64)],
) -> Replay {
    let known = known_allocations(r);
    let measured = measured_growths(r, device, &known);
    let module_code = module_code_growth(r, device, &known, exclude);
    let items = replay_items(r, queries, &module_code);
    let mut replayer = Replayer::new(r, bounds, device, &known, &measured, queries.len());
    replayer.out.module_code = module_code;
    for (t, _, item) in &items {
        replayer.apply(*t, item);
    }
    replayer.out
}

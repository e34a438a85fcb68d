//! Framework events joined to CUDA events on the one clock: Triton autotune
//! and compile windows (from the shim), NCCL communicator creation (from NCCL's
//! INIT log, wall-clock converted to CLOCK_MONOTONIC), the step-1 stall
//! breakdown and the list of warmups that still land after setup.

mod class_costs;
mod late_warmups;
mod nccl;
mod stalls;
#[cfg(test)]
mod tests;
mod triton;
mod window;

pub use class_costs::*;
pub use late_warmups::*;
pub use nccl::*;
pub use stalls::*;
pub use triton::*;
pub use window::Window;

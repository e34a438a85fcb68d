//! The event file format written by the probe (one file per process) and by the
//! doctor's NVML sampler, read back by the analysis.
//!
//! A file is a versioned header followed by append-only, length-prefixed and
//! checksummed records, so a file cut short by a crashed rank is still readable
//! up to its last complete record. The layout is documented in `docs/event-format.md`.
//!
//! This crate has two small dependencies (crc32fast, libc) because it is linked
//! into the probe that runs inside the training process.

pub mod callback_ids;
pub mod clock;
mod codec;
mod file;
pub mod host;
pub mod names;
mod record;

pub use codec::DecodeError;
pub use file::{
    FORMAT_VERSION, FileHeader, MAGIC, MAX_RECORD_LEN, ReadOutcome, Reader, Tail, encode_header,
    encode_record, read_file_bytes,
};
pub use record::{
    ActivityState, ContextCreated, KernelFirstLaunch, LibraryName, LocalMemoryGrowth, Marker,
    MemApi, MemCall, MemEffect, ModuleLoad, Notice, NoticeLevel, NvmlDeviceSample,
    NvmlProcessSample, PoolUse, ProbeCost, Record, RecordsDropped, SLOWEST_DETACH_TEARDOWN,
    SLOWEST_RESOURCE, SLOWEST_WATCH_PAUSE, UNKNOWN_BYTES, UntracedSpan,
};

//! The doctor's own output, and the one place that decides where bytes go:
//! standard output, an `-o` file or folder (PNG pages), the GitHub job
//! summary, "wrote X" lines, and messages on stderr. Renderers
//! (`crate::report`) only write bytes to a `Write`; commands say what to
//! write and get back what to tell the user.
//!
//! A closed stdout or stderr (`report | head -1`, `run ... 2>&1 | true`)
//! never panics and never changes an exit code: stderr lines are best
//! effort, and a reader that went away on stdout ends that output quietly
//! while the command still exits with the code it would have had.
//!
//! SIGPIPE, deliberately: a Rust program starts with SIGPIPE ignored, so a
//! write to a closed pipe returns `EPIPE` instead of killing the process. The
//! doctor keeps that: `run` must outlive a closed pipe to reap the training
//! command and pass its exit code on. The command itself gets the default
//! disposition back (the standard library resets SIGPIPE to `SIG_DFL` in every
//! child it spawns), exactly as it would without the doctor;
//! `tests/cli_output.rs` checks both sides.

mod destination;
mod messages;
mod stdout;

pub use destination::{OutputError, refuse_destination, write_diff, write_report, write_text};
pub use messages::{error, stderr_text};
pub use stdout::{StdoutLines, print_stdout};

//! prewarm-doctor as a library: the data flows one way, capture → load
//! (events) → analysis → report, joined once by `pipeline` (load → analyse →
//! model) for every verb and the dashboard, with the CLI (`cli`, `commands`)
//! on top.
//! The probe injected into training processes lives in `crates/probe`; the
//! event file format both sides share lives in `crates/events`.

pub mod analysis;
pub mod capture;
pub mod cli;
pub mod commands;
pub mod injection;
pub mod load;
pub mod output;
pub mod pipeline;
pub mod prescribe;
pub mod prewarm;
pub mod report;
pub mod run_folder;
pub mod tui;
pub mod units;

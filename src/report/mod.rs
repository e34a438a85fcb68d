//! Outputs: the one report model ([`model::ReportModel`]), built once from
//! the analysis, and the formats that render it to bytes through one trait
//! ([`renderer::Renderer`]); none prints, and none chooses where its bytes
//! go (`crate::output` does).
//!
//! The files, from the bottom up: `escape`, `text_layout`, `figures`, the
//! wording (`verdict_text`, `comm_text`, `gate_text`, `step_text`,
//! `warmup_text`, `forensics_text`, `ranks_text`), the model, `account_tables`
//! and `select`, `renderer` (the trait and its error), the renderers
//! (`terminal` with `terminal_matrix`, `markdown`, `json`, `csv_out`, `html`,
//! `charts` with `svg` and `png`, `perfetto`), `format` (which renderer a
//! `--format` picks), then `diff` (two runs side by side, in a format). This
//! file only names them and re-exports what every format shares.

pub mod account_tables;
pub mod charts;
pub mod comm_text;
pub mod csv_out;
pub mod diff;
pub mod escape;
pub mod figures;
pub mod forensics_text;
pub mod format;
pub mod gate_text;
pub mod html;
pub mod html_breaks;
pub mod json;
pub mod markdown;
pub mod model;
pub mod perfetto;
pub mod png;
pub mod ranks_text;
pub mod renderer;
pub mod select;
pub mod step_text;
pub mod svg;
pub mod terminal;
pub mod terminal_matrix;
pub mod text_layout;
pub mod verdict_text;
pub mod warmup_text;

/// The byte formatter lives below analysis and report (`crate::units`).
pub use crate::units::{bytes, signed_bytes};
pub use figures::*;

#[cfg(test)]
mod tests {
    use super::*;

    /// NCCL prints init times with two decimals of a second: shown in 10 ms
    /// steps, never with a tenth of a millisecond it does not have.
    #[test]
    fn nccl_init_times_are_shown_at_the_logs_resolution() {
        assert_eq!(nccl_seconds(0.47), "470 ms");
        assert_eq!(nccl_seconds(0.05), "50 ms");
        assert_eq!(nccl_seconds(0.0), "0 ms");
        assert_eq!(nccl_seconds(1.23), "1.23 s");
        assert_eq!(nccl_seconds(0.999), "1.00 s");
        // A time from the Init START/COMPLETE timestamps: rounded alike.
        assert_eq!(nccl_seconds(0.3849), "380 ms");
    }

    #[test]
    fn long_keys_are_shortened_for_people() {
        assert_eq!(shorten("(4096, 'bf16')", 48), "(4096, 'bf16')");
        let long = "x".repeat(60);
        let short = shorten(&long, 10);
        assert_eq!(short.chars().count(), 10);
        assert!(short.ends_with('…'));
    }

    #[test]
    fn units() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(3 << 30), "3.0 GiB");
        assert_eq!(signed_bytes(-(1 << 20)), "-1.0 MiB");
        assert_eq!(seconds(0.0123), "12.3 ms");
        assert_eq!(seconds(12.345), "12.35 s");
    }
}

//! The run folder's format: where each file lives (`layout`), the JSON
//! descriptions and the data they hold (`meta`), and what is redacted before
//! anything is written or shown (`redact`). Below capture (which writes it)
//! and load (which reads it), so neither imports the other.

pub mod layout;
pub mod meta;
pub mod redact;

//! Prewarms: the catalog of known ones and how a matrix of variants is declared.

pub mod catalog;
pub mod variants;

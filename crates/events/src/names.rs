//! The names of the per-process files in a host folder of a run directory,
//! written by the probe (`.events`), the shim (`.shim.jsonl`, `.shim.steps`,
//! `prescription-errors.…`) and read by the loader: defined once here, below
//! both. The shim is Python: `src/shim/prewarm_doctor_events.py` spells the
//! same names, and a test (tests/shim_python.rs) checks it against these.

/// Suffix of a probe event file.
pub const EVENTS_SUFFIX: &str = ".events";
/// Suffix of a shim's JSON-lines file.
pub const SHIM_SUFFIX: &str = ".shim.jsonl";
/// Suffix of a shim's step file (warm steps' ends).
pub const STEPS_SUFFIX: &str = ".shim.steps";
/// Prefix of a prescription's failure file (`prescription-errors.<stem>.txt`).
pub const PRESCRIPTION_ERRORS_PREFIX: &str = "prescription-errors.";
/// Suffix of a prescription's failure file.
pub const PRESCRIPTION_ERRORS_SUFFIX: &str = ".txt";

/// `rank-R.pid-P` for a process that has a RANK, else `proc.pid-P`: the stem
/// every per-process file of that process shares.
pub fn process_stem(rank: Option<&str>, pid: u32) -> String {
    match rank {
        Some(r) if !r.is_empty() => format!("rank-{r}.pid-{pid}"),
        _ => format!("proc.pid-{pid}"),
    }
}

/// What a process file's name says: (rank, pid, whether it is the shim's
/// JSON-lines file rather than a probe event file); None for other files.
pub fn parse_process_file(name: &str) -> Option<(Option<u32>, u32, bool)> {
    let (stem, is_shim) = if let Some(s) = name.strip_suffix(SHIM_SUFFIX) {
        (s, true)
    } else if let Some(s) = name.strip_suffix(EVENTS_SUFFIX) {
        (s, false)
    } else {
        return None;
    };
    let (who, pid) = stem.split_once(".pid-")?;
    let pid = pid.parse().ok()?;
    let rank = match who {
        "proc" => None,
        other => Some(other.strip_prefix("rank-")?.parse().ok()?),
    };
    Some((rank, pid, is_shim))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stem_parses_back() {
        let name = format!("{}{EVENTS_SUFFIX}", process_stem(Some("3"), 77));
        assert_eq!(name, "rank-3.pid-77.events");
        assert_eq!(parse_process_file(&name), Some((Some(3), 77, false)));
        let shim = format!("{}{SHIM_SUFFIX}", process_stem(None, 9));
        assert_eq!(parse_process_file(&shim), Some((None, 9, true)));
        assert_eq!(parse_process_file("nvml.events"), None);
        assert_eq!(parse_process_file("rank-x.pid-1.events"), None);
    }
}

//! The shim's JSON-lines events (see src/shim/prewarm_doctor_shim.py).

use serde::Deserialize;
use std::collections::BTreeMap;

/// One line of a `.shim.jsonl` file.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(tag = "ev", rename_all = "snake_case")]
pub enum ShimEvent {
    Process {
        t: u64,
        #[serde(default)]
        versions: BTreeMap<String, Option<String>>,
        #[serde(default)]
        argv: Vec<String>,
    },
    Step1Begin {
        t: u64,
        rule: String,
    },
    /// `Optimizer.zero_grad()` before step 1 was placed (`opt`: the
    /// optimizer's index in creation order).
    ZeroGrad {
        t: u64,
        #[serde(default)]
        opt: u32,
    },
    /// The first grad-enabled top-level forward of a module holding optimizer
    /// `opt`'s parameters, after its `zero_grad()` (or the first at all).
    FirstForward {
        t: u64,
        #[serde(default)]
        opt: u32,
        #[serde(default)]
        after_zero_grad: bool,
    },
    StepEnd {
        t: u64,
        step: u32,
        #[serde(default)]
        reserved: Option<u64>,
        #[serde(default)]
        allocated: Option<u64>,
        #[serde(default)]
        max_reserved: Option<u64>,
        #[serde(default)]
        device_free: Option<u64>,
        #[serde(default)]
        device_total: Option<u64>,
    },
    Marker {
        t0: u64,
        t1: u64,
        name: String,
    },
    Autotune {
        kernel: String,
        key: String,
        t0: u64,
        t1: u64,
        #[serde(default)]
        configs: u32,
        #[serde(default)]
        benchmarked: u32,
        #[serde(default)]
        chosen: String,
        #[serde(default)]
        source: String,
    },
    AutotuneConfig {
        kernel: String,
        config: String,
        t0: u64,
        t1: u64,
        #[serde(default)]
        ms: Option<f64>,
        #[serde(default)]
        failed: bool,
    },
    Compile {
        kernel: String,
        t0: u64,
        t1: u64,
        #[serde(default)]
        cache_hit: Option<bool>,
    },
    ProcessGroup {
        #[serde(default)]
        backend: String,
        #[serde(default)]
        world: u32,
        #[serde(default)]
        rank: u32,
        #[serde(default)]
        nccl: String,
    },
    Exception {
        t: u64,
        #[serde(rename = "type", default)]
        kind: String,
        #[serde(default)]
        message: String,
        #[serde(default, rename = "where")]
        where_: Vec<String>,
        /// torch's pool as the process died (reserved, allocated bytes).
        #[serde(default)]
        pool_reserved: Option<u64>,
        #[serde(default)]
        pool_allocated: Option<u64>,
    },
    #[serde(other)]
    Unknown,
}

/// Parses a shim file. Returns the events plus problems (line number and why);
/// a truncated last line (crashed process) is reported, not fatal.
pub fn parse_shim(text: &str) -> (Vec<ShimEvent>, Vec<String>) {
    let mut events = Vec::new();
    let mut problems = Vec::new();
    let ends_clean = text.ends_with('\n') || text.is_empty();
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<ShimEvent>(line) {
            Ok(ShimEvent::Unknown) => {}
            Ok(e) => events.push(e),
            Err(e) => {
                let last = i + 1 == lines.len();
                if last && !ends_clean {
                    problems.push(format!(
                        "line {} is cut short (the process ended while writing it)",
                        i + 1
                    ));
                } else {
                    problems.push(format!("line {}: {e}", i + 1));
                }
            }
        }
    }
    (events, problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_known_skips_unknown_and_reports_truncation() {
        let text = "{\"ev\":\"step_end\",\"t\":5,\"step\":1,\"reserved\":10}\n{\"ev\":\"future_thing\",\"t\":1}\n{\"ev\":\"step1_begin\",\"t\":2,\"rule\":\"x\"}\n{\"ev\":\"step_e";
        let (events, problems) = parse_shim(text);
        assert_eq!(events.len(), 2);
        assert!(matches!(
            events[0],
            ShimEvent::StepEnd {
                step: 1,
                reserved: Some(10),
                ..
            }
        ));
        assert_eq!(problems.len(), 1);
        assert!(problems[0].contains("line 4 is cut short"));
    }

    #[test]
    fn garbage_in_the_middle_names_the_line() {
        let (events, problems) =
            parse_shim("not json\n{\"ev\":\"step1_begin\",\"t\":2,\"rule\":\"x\"}\n");
        assert_eq!(events.len(), 1);
        assert!(problems[0].starts_with("line 1:"));
    }
}

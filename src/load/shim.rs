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
    /// A compile's start, written before it runs: one that never gets its
    /// `Compile` line was still running when the process ended.
    CompileBegin {
        kernel: String,
        t0: u64,
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
    /// A torch process group and, once it exists, its NCCL communicator's
    /// pointer (as NCCL's init log prints it): what names a communicator
    /// after its mesh dimension or group (src/shim/prewarm_doctor_groups.py).
    CommGroup {
        t: u64,
        #[serde(default)]
        step: Option<u32>,
        #[serde(default)]
        name: String,
        /// torch's group description (`mesh_<dim>`, or `new_group(group_desc=)`).
        #[serde(default)]
        desc: Option<String>,
        /// The group's global ranks.
        #[serde(default)]
        ranks: Vec<u32>,
        #[serde(default)]
        comm: Option<String>,
    },
    Exception {
        t: u64,
        #[serde(rename = "type", default)]
        kind: String,
        #[serde(default)]
        message: String,
        #[serde(default, rename = "where")]
        where_: Vec<String>,
        /// The thread it was raised in when not the main thread (its hook
        /// is `threading.excepthook`: the thread ends, the process goes on).
        #[serde(default)]
        thread: Option<String>,
        /// torch's pool as the process died (reserved, allocated bytes).
        #[serde(default)]
        pool_reserved: Option<u64>,
        #[serde(default)]
        pool_allocated: Option<u64>,
    },
    /// What `prescribe` needs to replay one Triton autotune (one per kernel
    /// and key the autotuner had to tune): where the jitted function lives,
    /// each argument's layout or value, the launch grid, and `replay`: why it
    /// cannot be replayed, when it cannot.
    AutotuneCall {
        t: u64,
        kernel: String,
        #[serde(default)]
        module: Option<String>,
        #[serde(default)]
        qualname: Option<String>,
        #[serde(default)]
        key: String,
        #[serde(default)]
        args: Vec<serde_json::Value>,
        /// The keyword arguments in the order the call passed them: Triton
        /// appends each tensor argument's dtype to the key in that order.
        #[serde(default, deserialize_with = "ordered_pairs")]
        kwargs: Vec<(String, serde_json::Value)>,
        #[serde(default)]
        grid: Option<serde_json::Value>,
        #[serde(default)]
        replay: Option<String>,
    },
    /// A process group in creation order (index 0: the default group), with
    /// its member ranks and torch's name and description: how a prescription
    /// finds the same group again (never by pointer).
    PgCreated {
        t: u64,
        index: u32,
        #[serde(default)]
        ranks: Option<Vec<u32>>,
        #[serde(default)]
        name: Option<String>,
        #[serde(default)]
        desc: Option<String>,
    },
    /// The first collective the program ran on group `index`.
    PgFirstUse {
        t: u64,
        index: u32,
        #[serde(default)]
        op: String,
    },
    /// What the run was: world size and the optimizers' parameters (count,
    /// elements, a hash of shapes and dtypes, the floating dtypes), taken at
    /// the first forward of step 1. A prescription checks it before running.
    Fingerprint {
        t: u64,
        #[serde(default)]
        world: u32,
        #[serde(default)]
        params: u64,
        #[serde(default)]
        numel: u64,
        #[serde(default)]
        shapes: String,
        #[serde(default)]
        dtypes: Vec<String>,
    },
    /// A prescription ran (or was refused: `skipped` says why) in this process.
    Prescription {
        t: u64,
        #[serde(default)]
        t0: Option<u64>,
        #[serde(default)]
        t1: Option<u64>,
        #[serde(default)]
        file: Option<String>,
        #[serde(default)]
        ran: Vec<String>,
        #[serde(default)]
        failed: u32,
        #[serde(default)]
        skipped: Option<String>,
    },
    /// The shim's own time by entry point (the hook it went to): name ->
    /// (calls, ns), summed over the run so far.
    ShimOwn {
        t: u64,
        #[serde(default)]
        by: BTreeMap<String, (u64, u64)>,
        /// Its line writes so far: (count, ns inside the write call); None
        /// from a shim that did not time them.
        #[serde(default)]
        writes: Option<(u64, u64)>,
    },
    #[serde(other)]
    Unknown,
}

impl ShimEvent {
    /// A step's end with none of torch's figures: a warm step's, as the
    /// step file stores it.
    pub fn step_end_at(t: u64, step: u32) -> ShimEvent {
        ShimEvent::StepEnd {
            t,
            step,
            reserved: None,
            allocated: None,
            max_reserved: None,
            device_free: None,
            device_total: None,
        }
    }
}

/// The shim's own time so far, as one line states it (`own_ns`; earlier
/// shims wrote none): the time its hooks took on the training's threads up
/// to `t`, summed over threads. The analysis reads a phase's share off these cumulative figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ShimOwnTime {
    pub t: u64,
    pub own_ns: u64,
}

/// The shim's own time a line states (its `t` and `own_ns`), if it does.
fn own_time_of(line: &serde_json::Value) -> Option<ShimOwnTime> {
    Some(ShimOwnTime {
        t: line.get("t")?.as_u64()?,
        own_ns: line.get("own_ns")?.as_u64()?,
    })
}

/// What a shim file holds: its events, and the shim's own time as its lines
/// state it, in time order (empty for a shim that did not time itself).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ShimLines {
    pub events: Vec<ShimEvent>,
    pub own_time: Vec<ShimOwnTime>,
}

/// The step file's magic (`prewarm_doctor_events.STEP_FILE_MAGIC`).
const STEP_FILE_MAGIC: &[u8; 8] = b"PDSTEP01";
const STEP_HEADER: usize = 32;
const STEP_RECORD: usize = 24;

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(b)
}

/// Warm steps' ends from a step file (`<stem>.pid-<pid>.shim.steps`, the
/// shim's default; PREWARM_DOCTOR_STEP_FILE=0 writes lines instead): each record whose step is its slot's
/// (the header's first step plus its index) gives a `StepEnd` and the
/// shim's own time at it; a record never written is zeros, and one torn by
/// a kill fails that check, so neither is used. A cut-short last record is
/// left out too. Err names what makes the file unreadable as one.
pub fn parse_step_file(bytes: &[u8]) -> Result<ShimLines, String> {
    if bytes.len() < STEP_HEADER || &bytes[..8] != STEP_FILE_MAGIC {
        return Err("no step-file header (PDSTEP01)".into());
    }
    let record = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize;
    if record != STEP_RECORD {
        return Err(format!("records of {record} bytes, not {STEP_RECORD}"));
    }
    let first = u64_at(bytes, 16);
    let mut lines = ShimLines::default();
    for (i, r) in bytes[STEP_HEADER..].chunks_exact(STEP_RECORD).enumerate() {
        let (step, t, own_ns) = (u64_at(r, 0), u64_at(r, 8), u64_at(r, 16));
        if step == 0 || Some(step) != first.checked_add(i as u64) || t == 0 {
            continue;
        }
        let Ok(step) = u32::try_from(step) else {
            continue;
        };
        lines.events.push(ShimEvent::step_end_at(t, step));
        lines.own_time.push(ShimOwnTime { t, own_ns });
    }
    Ok(lines)
}

/// `lines` with the step ends of a step file added: a step a line already
/// ends is not taken twice; the own-time samples stay in time order.
pub fn with_step_file(mut lines: ShimLines, file: ShimLines) -> ShimLines {
    let ended: std::collections::HashSet<u32> = lines
        .events
        .iter()
        .filter_map(|e| match e {
            ShimEvent::StepEnd { step, .. } => Some(*step),
            _ => None,
        })
        .collect();
    for (e, own) in file.events.into_iter().zip(file.own_time) {
        if let ShimEvent::StepEnd { step, .. } = &e
            && ended.contains(step)
        {
            continue;
        }
        lines.events.push(e);
        lines.own_time.push(own);
    }
    lines.own_time.sort_unstable();
    lines
}

/// One line of a shim file that could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLine {
    /// 1-based line number.
    pub line: u64,
    /// Byte offset of the line's first byte in the file.
    pub offset: u64,
    pub what: String,
    /// The last line, without its newline: the process ended while writing it.
    pub cut_short: bool,
}

/// Parses the bytes of a shim file: the events, and every line that could not
/// be used (line, byte offset, why). A truncated last line (crashed process)
/// is reported as cut short, not as damage. Bytes that are not UTF-8 are
/// replaced (the shim writes ASCII JSON, so such a line then fails to parse
/// only if the damage hit its structure).
pub fn parse_shim(bytes: &[u8]) -> (ShimLines, Vec<BadLine>) {
    let mut events = Vec::new();
    let mut own_time = Vec::new();
    let mut bad = Vec::new();
    let ends_clean = bytes.is_empty() || bytes.ends_with(b"\n");
    let mut offset = 0u64;
    let mut lines = bytes.split(|&b| b == b'\n').peekable();
    let mut number = 0u64;
    while let Some(raw) = lines.next() {
        number += 1;
        let start = offset;
        offset += raw.len() as u64 + 1;
        let is_last = lines.peek().is_none();
        let text = String::from_utf8_lossy(raw);
        if text.trim().is_empty() {
            continue;
        }
        // One parse: the event and the own time it states, from one value.
        let parsed = serde_json::from_str::<serde_json::Value>(&text).and_then(|v| {
            let own = own_time_of(&v);
            // A value's objects are sorted by key: an autotune call's keyword
            // arguments keep the order the call passed them only when read
            // from the text itself (Triton's key follows that order).
            let e = if v.get("ev").and_then(|e| e.as_str()) == Some("autotune_call") {
                serde_json::from_str::<ShimEvent>(&text)?
            } else {
                ShimEvent::deserialize(v)?
            };
            Ok((own, e))
        });
        match parsed {
            Ok((own, e)) => {
                own_time.extend(own);
                if e != ShimEvent::Unknown {
                    events.push(e);
                }
            }
            Err(e) => {
                let cut_short = is_last && !ends_clean;
                bad.push(BadLine {
                    line: number,
                    offset: start,
                    what: if cut_short {
                        "the last line is cut short (the process ended while writing it)".into()
                    } else {
                        format!("not a shim event ({e})")
                    },
                    cut_short,
                });
            }
        }
    }
    // A line may state a time before the lines written ahead of it (step
    // 1's start is known only at the first optimizer step).
    own_time.sort_unstable();
    (ShimLines { events, own_time }, bad)
}

/// A JSON object's members in the order they were written (the shim writes
/// a call's keyword arguments in the order the call passed them).
fn ordered_pairs<'de, D>(d: D) -> Result<Vec<(String, serde_json::Value)>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    struct InOrder;
    impl<'de> serde::de::Visitor<'de> for InOrder {
        type Value = Vec<(String, serde_json::Value)>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an object of keyword arguments")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut m: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(pair) = m.next_entry::<String, serde_json::Value>()? {
                out.push(pair);
            }
            Ok(out)
        }
    }
    d.deserialize_map(InOrder)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A step file holding steps `first..` as `records` (step, t, own_ns).
    fn step_file(first: u64, records: &[(u64, u64, u64)]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(b"PDSTEP01");
        b.extend_from_slice(&24u32.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&first.to_le_bytes());
        b.extend_from_slice(&0u64.to_le_bytes());
        for (step, t, own) in records {
            for v in [step, t, own] {
                b.extend_from_slice(&v.to_le_bytes());
            }
        }
        b
    }

    fn steps_of(lines: &ShimLines) -> Vec<(u32, u64)> {
        lines
            .events
            .iter()
            .filter_map(|e| match e {
                ShimEvent::StepEnd { step, t, .. } => Some((*step, *t)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_step_file_gives_each_stored_step_and_skips_unwritten_and_torn_slots() {
        // Steps 6, 7, (8 never stored: step 8 was a line), 9 torn (its slot
        // says step 3), 10, then half a record (the process was killed).
        let mut bytes = step_file(
            6,
            &[
                (6, 600, 60),
                (7, 700, 70),
                (0, 0, 0),
                (3, 900, 90),
                (10, 1000, 100),
            ],
        );
        bytes.extend_from_slice(&11u64.to_le_bytes());
        let lines = parse_step_file(&bytes).unwrap();
        assert_eq!(steps_of(&lines), vec![(6, 600), (7, 700), (10, 1000)]);
        assert_eq!(
            lines.own_time,
            vec![
                ShimOwnTime { t: 600, own_ns: 60 },
                ShimOwnTime { t: 700, own_ns: 70 },
                ShimOwnTime {
                    t: 1000,
                    own_ns: 100
                },
            ]
        );
        // Not a step file: said, not guessed at.
        assert!(parse_step_file(b"PDSTEP0").is_err());
        let mut wide = step_file(1, &[]);
        wide[8] = 32;
        assert_eq!(
            parse_step_file(&wide).unwrap_err(),
            "records of 32 bytes, not 24"
        );
    }

    #[test]
    fn the_step_files_ends_join_the_lines_without_taking_a_step_twice() {
        let (lines, bad) = parse_shim(
            b"{\"ev\":\"step_end\",\"t\":500,\"step\":5,\"own_ns\":50}\n{\"ev\":\"step_end\",\"t\":800,\"step\":8,\"own_ns\":80}\n",
        );
        assert!(bad.is_empty());
        let file =
            parse_step_file(&step_file(6, &[(6, 600, 60), (7, 700, 70), (8, 801, 81)])).unwrap();
        let merged = with_step_file(lines, file);
        let mut steps = steps_of(&merged);
        steps.sort();
        assert_eq!(steps, vec![(5, 500), (6, 600), (7, 700), (8, 800)]);
        let times: Vec<u64> = merged.own_time.iter().map(|o| o.t).collect();
        assert_eq!(times, vec![500, 600, 700, 800]);
    }

    #[test]
    fn parses_known_skips_unknown_and_reports_truncation() {
        let text = "{\"ev\":\"step_end\",\"t\":5,\"step\":1,\"reserved\":10}\n{\"ev\":\"future_thing\",\"t\":1}\n{\"ev\":\"step1_begin\",\"t\":2,\"rule\":\"x\"}\n{\"ev\":\"step_e";
        let (lines, problems) = parse_shim(text.as_bytes());
        let events = lines.events;
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
        assert_eq!(problems[0].line, 4);
        assert!(problems[0].cut_short);
        assert_eq!(problems[0].offset, text.rfind('\n').unwrap() as u64 + 1);
    }

    #[test]
    fn garbage_in_the_middle_names_the_line() {
        let (lines, problems) =
            parse_shim(b"{\"ev\":\"step1_begin\",\"t\":2,\"rule\":\"x\"}\nnot json\n");
        assert_eq!(lines.events.len(), 1);
        assert_eq!((problems[0].line, problems[0].offset), (2, 38));
        assert!(!problems[0].cut_short);
        assert!(problems[0].what.starts_with("not a shim event"));
    }

    #[test]
    fn the_shims_own_time_is_read_off_every_line_in_time_order() {
        // step1_begin is written late, with the time (and own time) of step
        // 1's first forward; an unknown event still says the shim's time; a
        // line without own_ns (an older shim) says nothing of it.
        let text = concat!(
            "{\"ev\":\"autotune\",\"kernel\":\"k\",\"key\":\"1\",\"t0\":1,\"t1\":9,\"t\":9,\"own_ns\":300}\n",
            "{\"ev\":\"step1_begin\",\"t\":5,\"rule\":\"x\",\"own_ns\":200}\n",
            "{\"ev\":\"future_thing\",\"t\":12,\"own_ns\":450}\n",
            "{\"ev\":\"step_end\",\"t\":20,\"step\":1}\n",
        );
        let (lines, bad) = parse_shim(text.as_bytes());
        assert!(bad.is_empty());
        assert_eq!(lines.events.len(), 3);
        let own: Vec<(u64, u64)> = lines.own_time.iter().map(|o| (o.t, o.own_ns)).collect();
        assert_eq!(own, vec![(5, 200), (9, 300), (12, 450)]);
    }
}

//! What a prescription warms, decided from one attempt's account (what landed
//! after setup) and its shim records (how to replay it). Pure: no I/O. Every
//! late item is either warmed by a block or listed in `not_replayed` with the
//! reason; nothing is guessed.

use crate::analysis::account::{LateWarmup, ProcessAccount};
use crate::load::shim::ShimEvent;
use crate::prewarm::catalog::EventClass;
use serde_json::Value;
use std::collections::BTreeMap;

/// One process of the attempt: its account and its shim events.
pub struct ProcessInput<'a> {
    pub account: &'a ProcessAccount,
    pub shim: &'a [ShimEvent],
}

/// What a block is expected to move out of the steps (the largest rank's
/// share, from the account).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Move {
    pub seconds: f64,
    pub bytes: u64,
}

impl Move {
    fn add(&mut self, w: &LateWarmup) {
        self.seconds += w.seconds;
        self.bytes += w.bytes;
    }

    fn max(self, o: Move) -> Move {
        Move {
            seconds: self.seconds.max(o.seconds),
            bytes: self.bytes.max(o.bytes),
        }
    }
}

/// The run's fingerprint as the shim recorded it.
#[derive(Debug, Clone, PartialEq)]
pub struct Fingerprint {
    pub world: u32,
    pub params: u64,
    pub numel: u64,
    pub shapes: String,
    pub dtypes: Vec<String>,
}

/// A tiny cuBLAS forward+backward in one dtype, on these ranks (None: every process).
#[derive(Debug, Clone, PartialEq)]
pub struct CublasWarm {
    pub dtype: String,
    pub ranks: Option<Vec<u32>>,
}

/// One collective on the group created `index`-th, right after its creation.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupWarm {
    pub index: u32,
    pub members: Option<Vec<u32>>,
    pub name: Option<String>,
    pub desc: Option<String>,
    /// The step whose collective created its communicator, and which one.
    pub step: u32,
    pub op: String,
}

/// One Triton autotune to replay at setup.
#[derive(Debug, Clone, PartialEq)]
pub struct TritonWarm {
    pub kernel: String,
    pub module: String,
    pub qualname: String,
    pub key: String,
    /// The step where the key was first tuned (later than 1: a shape bucket).
    pub step: u32,
    pub ranks: Option<Vec<u32>>,
    pub args: Vec<Value>,
    /// In the order the training passed them (Triton's key follows it).
    pub kwargs: Vec<(String, Value)>,
    pub grid: Value,
}

/// Something that landed after setup and is not warmed, with the reason.
#[derive(Debug, Clone, PartialEq)]
pub struct NotReplayed {
    pub block: &'static str,
    pub what: String,
    pub why: String,
}

/// Everything a prescription holds.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Plan {
    pub fingerprint: Option<Fingerprint>,
    pub cublas: Vec<CublasWarm>,
    pub cublas_move: Move,
    pub groups: Vec<GroupWarm>,
    pub nccl_move: Move,
    pub triton: Vec<TritonWarm>,
    /// Expected move per kernel with a replayed key.
    pub triton_moves: BTreeMap<String, Move>,
    pub not_replayed: Vec<NotReplayed>,
    /// Lazy module loading after setup: advice only.
    pub lazy: Option<Move>,
    /// Autotune candidates whose benchmark grew the local-memory reservation
    /// after setup: the alternative to warming them (advice only).
    pub prune: Vec<PruneAlternative>,
    /// What `CUDA_MODULE_LOADING=EAGER` cost, when the run folder measured it:
    /// (variant, setup seconds, context bytes), against the prescribed attempt.
    pub eager: Option<(String, f64, i64)>,
}

/// The step a shim time falls in (None: setup, or step 1 was never placed).
fn step_of(shim: &[ShimEvent], t: u64) -> Option<u32> {
    let begin = shim.iter().find_map(|e| match e {
        ShimEvent::Step1Begin { t, .. } => Some(*t),
        _ => None,
    })?;
    if t < begin {
        return None;
    }
    let ended = shim
        .iter()
        .filter(|e| matches!(e, ShimEvent::StepEnd { t: end, .. } if *end < t))
        .count() as u32;
    Some(ended + 1)
}

fn add_rank(ranks: &mut Option<Vec<u32>>, rank: Option<u32>, first: bool) {
    match (rank, ranks.as_mut()) {
        (Some(r), Some(v)) => {
            if !v.contains(&r) {
                v.push(r);
                v.sort_unstable();
            }
        }
        (Some(r), None) if first => *ranks = Some(vec![r]),
        _ => *ranks = None,
    }
}

/// Builds the plan from every process of one attempt.
pub fn plan(processes: &[ProcessInput]) -> Plan {
    let mut p = Plan {
        fingerprint: processes.iter().find_map(|x| fingerprint(x.shim)),
        ..Plan::default()
    };
    cublas(processes, &mut p);
    nccl(processes, &mut p);
    triton(processes, &mut p);
    leftovers(processes, &mut p);
    p.prune = prune_alternatives(processes);
    p
}

fn fingerprint(shim: &[ShimEvent]) -> Option<Fingerprint> {
    shim.iter().find_map(|e| match e {
        ShimEvent::Fingerprint {
            world,
            params,
            numel,
            shapes,
            dtypes,
            ..
        } => Some(Fingerprint {
            world: *world,
            params: *params,
            numel: *numel,
            shapes: shapes.clone(),
            dtypes: dtypes.clone(),
        }),
        _ => None,
    })
}

fn late_of<'a>(
    x: &ProcessInput<'a>,
    class: EventClass,
) -> impl Iterator<Item = &'a LateWarmup> + use<'a> {
    x.account
        .late_warmups
        .iter()
        .filter(move |w| w.class == class)
}

fn cublas(processes: &[ProcessInput], p: &mut Plan) {
    let mut by_dtype: BTreeMap<String, (Option<Vec<u32>>, bool)> = BTreeMap::new();
    for x in processes {
        let mut mv = Move::default();
        let mut any = false;
        for w in late_of(x, EventClass::Cublas) {
            mv.add(w);
            any = true;
        }
        if !any {
            continue;
        }
        let rank = x.account.rank;
        match fingerprint(x.shim) {
            Some(fp) if !fp.dtypes.is_empty() => {
                p.cublas_move = p.cublas_move.max(mv);
                for d in fp.dtypes {
                    let e = by_dtype.entry(d).or_insert((None, true));
                    add_rank(&mut e.0, rank, e.1);
                    e.1 = false;
                }
            }
            found => p.not_replayed.push(NotReplayed {
                block: "cublas",
                what: format!("cuBLAS init after setup on {}", who(rank)),
                why: if found.is_some() {
                    "the optimizers hold no floating-point parameters, so no matmul dtype is known".into()
                } else {
                    "the recording has no fingerprint record (made before prescribe's records existed): the matmuls' dtypes are unknown; record the run again".into()
                },
            }),
        }
    }
    p.cublas = by_dtype
        .into_iter()
        .map(|(dtype, (ranks, _))| CublasWarm { dtype, ranks })
        .collect();
}

fn who(rank: Option<u32>) -> String {
    rank.map_or_else(|| "the process".to_string(), |r| format!("rank {r}"))
}

/// Groups first used after setup, per process: (index, step, op).
fn late_groups(shim: &[ShimEvent]) -> Vec<(u32, u32, String)> {
    shim.iter()
        .filter_map(|e| match e {
            ShimEvent::PgFirstUse { t, index, op } => {
                step_of(shim, *t).map(|s| (*index, s, op.clone()))
            }
            _ => None,
        })
        .collect()
}

fn nccl(processes: &[ProcessInput], p: &mut Plan) {
    let mut groups: BTreeMap<u32, GroupWarm> = BTreeMap::new();
    for x in processes {
        let late: Vec<&LateWarmup> = late_of(x, EventClass::NcclComm).collect();
        if late.is_empty() {
            continue;
        }
        let mut mv = Move::default();
        late.iter().for_each(|w| mv.add(w));
        p.nccl_move = p.nccl_move.max(mv);
        let has_records = x
            .shim
            .iter()
            .any(|e| matches!(e, ShimEvent::PgCreated { .. }));
        let found = late_groups(x.shim);
        if !has_records {
            p.not_replayed.push(NotReplayed {
                block: "nccl",
                what: format!("{} communicator(s) created after setup on {}", late.len(), who(x.account.rank)),
                why: "the recording has no process-group records (made before prescribe's records existed): which torch group each belongs to is unknown; record the run again".into(),
            });
            continue;
        }
        if found.len() < late.len() {
            p.not_replayed.push(NotReplayed {
                block: "nccl",
                what: format!(
                    "{} of {} communicator(s) created after setup on {}",
                    late.len() - found.len(),
                    late.len(),
                    who(x.account.rank)
                ),
                why: "no collective through torch.distributed's functions explains them (functional collectives, a library's own calls, or a communicator split): their group is unknown".into(),
            });
        }
        for (index, step, op) in found {
            let created = x.shim.iter().find_map(|e| match e {
                ShimEvent::PgCreated {
                    index: i,
                    ranks,
                    name,
                    desc,
                    ..
                } if *i == index => Some((ranks.clone(), name.clone(), desc.clone())),
                _ => None,
            });
            let (members, name, desc) = created.unwrap_or((None, None, None));
            let g = groups.entry(index).or_insert(GroupWarm {
                index,
                members,
                name,
                desc,
                step,
                op: op.clone(),
            });
            g.step = g.step.min(step);
        }
    }
    p.groups = groups.into_values().collect();
}

/// Late autotune calls of one process: (record, step).
fn late_calls(shim: &[ShimEvent]) -> Vec<(&ShimEvent, u32)> {
    shim.iter()
        .filter_map(|e| match e {
            ShimEvent::AutotuneCall { t, .. } => step_of(shim, *t).map(|s| (e, s)),
            _ => None,
        })
        .collect()
}

fn triton(processes: &[ProcessInput], p: &mut Plan) {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for x in processes {
        let rank = x.account.rank;
        for (e, step) in late_calls(x.shim) {
            let ShimEvent::AutotuneCall {
                kernel,
                module,
                qualname,
                key,
                args,
                kwargs,
                grid,
                replay,
                ..
            } = e
            else {
                continue;
            };
            let why = replay.clone().or_else(|| {
                (module.is_none() || qualname.is_none() || grid.is_none())
                    .then(|| "the record lacks the kernel's module, name or launch grid".into())
            });
            if let Some(why) = why {
                p.not_replayed.push(NotReplayed {
                    block: "triton",
                    what: format!("{kernel} key {key} (step {step}, {})", who(rank)),
                    why,
                });
                continue;
            }
            let ident = serde_json::json!([module, qualname, key, args, kwargs, grid]).to_string();
            let i = *seen.entry(ident).or_insert_with(|| {
                p.triton.push(TritonWarm {
                    kernel: kernel.clone(),
                    module: module.clone().unwrap_or_default(),
                    qualname: qualname.clone().unwrap_or_default(),
                    key: key.clone(),
                    step,
                    ranks: rank.map(|r| vec![r]),
                    args: args.clone(),
                    kwargs: kwargs.clone(),
                    grid: grid.clone().unwrap_or(Value::Null),
                });
                p.triton.len() - 1
            });
            let w = &mut p.triton[i];
            w.step = w.step.min(step);
            add_rank(&mut w.ranks, rank, false);
        }
        for w in late_of(x, EventClass::TritonAutotune) {
            if p.triton.iter().any(|t| t.kernel == w.subject) {
                let m = p.triton_moves.entry(w.subject.clone()).or_default();
                *m = m.max(Move {
                    seconds: w.seconds,
                    bytes: w.bytes,
                });
            }
        }
    }
}

/// A spilling autotune candidate: warming its kernel at setup moves the
/// local-memory growth there, where it stays held (the driver never gives it
/// back); pruning the candidate from the kernel's configs removes the demand.
#[derive(Debug, Clone, PartialEq)]
pub struct PruneAlternative {
    pub kernel: String,
    pub config: String,
    /// CUPTI's reservation increase for the candidate's launch.
    pub local_bytes: u64,
    pub per_thread: u32,
    pub registers: u16,
    pub step: Option<u32>,
}

/// Per kernel, the autotune candidate whose benchmark grew local memory the
/// most after setup (the one worth pruning: the others stay to choose from).
fn prune_alternatives(processes: &[ProcessInput]) -> Vec<PruneAlternative> {
    let mut out: Vec<PruneAlternative> = Vec::new();
    for x in processes {
        for l in &x.account.local_memory {
            let Some(config) = &l.autotune_config else {
                continue;
            };
            if l.phase == crate::analysis::phases::Phase::Setup || l.after <= l.before {
                continue;
            }
            let grew = l.after - l.before;
            let candidate = PruneAlternative {
                kernel: l.kernel.clone(),
                config: config.clone(),
                local_bytes: grew,
                per_thread: l.per_thread,
                registers: l.registers,
                step: l.step,
            };
            match out.iter_mut().find(|a| a.kernel == l.kernel) {
                Some(a) if a.local_bytes >= grew => {}
                Some(a) => *a = candidate,
                None => out.push(candidate),
            }
        }
    }
    out
}

/// Late items no block warms: listed with why; lazy loading as advice.
fn leftovers(processes: &[ProcessInput], p: &mut Plan) {
    let mut lazy: Option<Move> = None;
    for x in processes {
        let rank = x.account.rank;
        let recorded: Vec<&str> = x
            .shim
            .iter()
            .filter_map(|e| match e {
                ShimEvent::AutotuneCall { kernel, .. } => Some(kernel.as_str()),
                _ => None,
            })
            .collect();
        for w in &x.account.late_warmups {
            let why = match w.class {
                EventClass::TritonAutotune if !recorded.contains(&w.subject.as_str()) => {
                    "no call signature was recorded for it (a recording made before prescribe's records existed, or a Triton without the observed entry point): record the run again".to_string()
                }
                EventClass::Compile => "a JIT compile outside any autotune: prescribe replays autotuned calls only (a warm Triton cache, `--cache warm`, moves it)".into(),
                EventClass::LocalMemory => "local-memory growth of a kernel that was not autotuned: prescribe cannot replay an arbitrary kernel launch".into(),
                EventClass::ModuleLoad => {
                    let m = lazy.get_or_insert_with(Move::default);
                    *m = m.max(Move { seconds: w.seconds, bytes: w.bytes });
                    continue;
                }
                // Warmed by their blocks (autotune keys with a signature,
                // cuBLAS dtypes, groups), or listed there with the reason.
                EventClass::TritonAutotune | EventClass::Cublas | EventClass::NcclComm => continue,
            };
            p.not_replayed.push(NotReplayed {
                block: block_of(w.class),
                what: format!(
                    "{} {}{} ({}, first at step {})",
                    w.class.label(),
                    w.subject,
                    if w.minor { ", minor" } else { "" },
                    who(rank),
                    w.step.map_or_else(|| "?".to_string(), |s| s.to_string())
                ),
                why,
            });
        }
    }
    p.lazy = lazy;
}

fn block_of(c: EventClass) -> &'static str {
    match c {
        EventClass::Cublas => "cublas",
        EventClass::NcclComm => "nccl",
        EventClass::ModuleLoad => "lazy",
        EventClass::LocalMemory => "kernel",
        EventClass::TritonAutotune | EventClass::Compile => "triton",
    }
}

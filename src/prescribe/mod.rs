//! `prewarm-doctor prescribe`: from a recorded run, the Python module that
//! warms exactly what landed after setup (docs/prescribe.md, "Let the doctor
//! write the prewarm"). The plan is decided from the account and the shim's replay
//! records (plan.rs); the module is rendered from an askama template with
//! every recorded string written as an escaped Python literal (python.rs).

pub mod plan;
pub mod python;

use crate::analysis::AttemptAccount;
use crate::load::shim::{ShimEvent, parse_shim};
use crate::pipeline::Analysed;
use askama::Template;
use plan::{Move, Plan, ProcessInput};
use serde_json::{Value, json};
use std::path::Path;

/// Why no prescription could be written; each names the run or the flag.
#[derive(Debug, thiserror::Error)]
pub enum PrescribeError {
    #[error(transparent)]
    Load(#[from] crate::load::LoadError),
    #[error(
        "--attempt '{0}': no such attempt in this run (VARIANT or VARIANT/N; the run holds: {1})"
    )]
    NoSuchAttempt(String, String),
    #[error("{0}: rendering the prescription failed: {1}")]
    Render(String, String),
    #[error(
        "attempt {0} has no GPU capture in any process ({1}): a prescription made from it would warm nothing. Record the run where `prewarm-doctor check` passes, or pick another attempt with --attempt"
    )]
    NoCapture(String, String),
}

/// A written prescription: its Python text and what it holds.
pub struct Prescription {
    pub text: String,
    pub plan: Plan,
    pub attempt: String,
}

/// Loads `run`, picks the attempt (`VARIANT[/N]`; default: the baseline's
/// first) and writes its prescription.
pub fn prescribe(run: &Path, attempt: Option<&str>) -> Result<Prescription, PrescribeError> {
    let analysed = Analysed::load(run)?;
    let baseline = analysed.run.meta.as_ref().and_then(|m| m.baseline.clone());
    let index = pick(&analysed.attempts, attempt, baseline.as_deref())?;
    let account = &analysed.attempts[index];
    if !account.processes.iter().any(|p| p.capture.active) {
        let why = account
            .processes
            .iter()
            .map(|p| p.capture.detail.clone())
            .find(|d| !d.is_empty())
            .unwrap_or_else(|| "no process wrote a probe event file".into());
        return Err(PrescribeError::NoCapture(
            format!("{}/{}", account.variant, account.attempt),
            why,
        ));
    }
    let data = analysed
        .run
        .attempts
        .iter()
        .find(|a| a.variant == account.variant && a.attempt == account.attempt);
    let mut shims: Vec<(u32, Vec<ShimEvent>)> = Vec::new();
    for host in data.map(|d| d.hosts.as_slice()).unwrap_or_default() {
        for pf in &host.processes {
            let events = pf
                .shim
                .as_ref()
                .and_then(|p| std::fs::read(p).ok())
                .map(|b| parse_shim(&b).0.events)
                .unwrap_or_default();
            shims.push((pf.pid, events));
        }
    }
    let inputs: Vec<ProcessInput> = account
        .processes
        .iter()
        .map(|p| ProcessInput {
            account: p,
            shim: shims
                .iter()
                .find(|(pid, _)| *pid == p.pid)
                .map_or(&[][..], |(_, e)| e.as_slice()),
        })
        .collect();
    let mut plan = plan::plan(&inputs);
    plan.eager = eager_cost(&analysed, account);
    let name = format!("{}/{}", account.variant, account.attempt);
    let text = render(&run.display().to_string(), &name, &plan)
        .map_err(|e| PrescribeError::Render(run.display().to_string(), e.to_string()))?;
    Ok(Prescription {
        text,
        plan,
        attempt: name,
    })
}

/// What `CUDA_MODULE_LOADING=EAGER` cost in this run folder, when it holds a
/// variant that sets it: (variant, setup seconds, device bytes at context
/// creation), each against the prescribed attempt (the first process of each).
fn eager_cost(analysed: &Analysed, base: &AttemptAccount) -> Option<(String, f64, i64)> {
    let meta = analysed.run.meta.as_ref()?;
    let eager = meta.variants.iter().find(|v| {
        v.env
            .iter()
            .any(|(k, val)| k == "CUDA_MODULE_LOADING" && val == "EAGER")
    })?;
    let other = analysed
        .attempts
        .iter()
        .find(|a| a.variant == eager.name && !a.warmup)?;
    let first = |a: &AttemptAccount| {
        a.processes
            .iter()
            .find(|p| p.steps.setup_s.is_some())
            .map(|p| (p.steps.setup_s.unwrap_or(0.0), p.context_bytes.unwrap_or(0)))
    };
    let (s0, b0) = first(base)?;
    let (s1, b1) = first(other)?;
    Some((eager.name.clone(), s1 - s0, b1 as i64 - b0 as i64))
}

fn pick(
    attempts: &[AttemptAccount],
    wanted: Option<&str>,
    baseline: Option<&str>,
) -> Result<usize, PrescribeError> {
    let real = |a: &&AttemptAccount| !a.warmup;
    let found = match wanted {
        Some(w) => {
            let (v, n) = w.split_once('/').map_or((w, None), |(v, n)| (v, Some(n)));
            attempts
                .iter()
                .filter(real)
                .position(|a| a.variant == v && n.is_none_or(|n| a.attempt == n))
        }
        None => baseline
            .and_then(|b| attempts.iter().filter(real).position(|a| a.variant == b))
            .or_else(|| attempts.iter().filter(real).position(|_| true)),
    };
    let real_indices: Vec<usize> = (0..attempts.len())
        .filter(|&i| !attempts[i].warmup)
        .collect();
    found.map(|i| real_indices[i]).ok_or_else(|| {
        let held: Vec<String> = attempts
            .iter()
            .filter(real)
            .map(|a| format!("{}/{}", a.variant, a.attempt))
            .collect();
        PrescribeError::NoSuchAttempt(wanted.unwrap_or("").to_string(), held.join(", "))
    })
}

#[derive(Template)]
#[template(path = "prescription.py", escape = "none")]
struct Module {
    header: Vec<String>,
    run: String,
    attempt: String,
    fingerprint: String,
    cublas: String,
    groups: String,
    triton: String,
    not_replayed: String,
    advice: String,
}

fn ranks_value(r: &Option<Vec<u32>>) -> Value {
    r.as_ref().map_or(Value::Null, |v| json!(v))
}

fn data(plan: &Plan) -> (String, String, String, String, String) {
    let fp = plan.fingerprint.as_ref().map_or(Value::Null, |f| {
        json!({"world": f.world, "params": f.params, "numel": f.numel, "shapes": f.shapes, "dtypes": f.dtypes})
    });
    let cublas: Vec<Value> = plan
        .cublas
        .iter()
        .map(|c| json!({"dtype": c.dtype, "ranks": ranks_value(&c.ranks)}))
        .collect();
    let groups: Vec<Value> = plan
        .groups
        .iter()
        .map(|g| {
            json!({"index": g.index, "members": ranks_value(&g.members), "name": g.name,
                   "desc": g.desc, "step": g.step, "op": g.op})
        })
        .collect();
    let triton: Vec<Value> = plan
        .triton
        .iter()
        .map(|t| {
            json!({"kernel": t.kernel, "module": t.module, "qualname": t.qualname, "key": t.key,
                   "step": t.step, "ranks": ranks_value(&t.ranks), "args": t.args,
                   "kwargs": t.kwargs.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>(),
                   "grid": t.grid})
        })
        .collect();
    let not: Vec<Value> = plan
        .not_replayed
        .iter()
        .map(|n| json!([n.block, n.what, n.why]))
        .collect();
    (
        python::value(&fp),
        list(&cublas),
        list(&groups),
        list(&triton),
        list(&not),
    )
}

/// A list literal, one item per line (readable diffs of prescriptions).
fn list(items: &[Value]) -> String {
    if items.is_empty() {
        return "[]".into();
    }
    let lines: Vec<String> = items
        .iter()
        .map(|v| format!("    {},", python::value(v)))
        .collect();
    format!("[\n{}\n]", lines.join("\n"))
}

/// Renders the prescription module for `plan`, made from `run`'s `attempt`.
pub fn render(run: &str, attempt: &str, plan: &Plan) -> Result<String, askama::Error> {
    let (fingerprint, cublas, groups, triton, not_replayed) = data(plan);
    let advice: Vec<Value> = plan
        .lazy
        .iter()
        .map(|m| json!(lazy_advice(*m, plan.eager.as_ref())))
        .chain(plan.prune.iter().map(|a| json!(prune_advice(a))))
        .collect();
    Module {
        header: header(run, attempt, plan),
        run: python::str_lit(run),
        attempt: python::str_lit(attempt),
        fingerprint,
        cublas,
        groups,
        triton,
        not_replayed,
        advice: list(&advice),
    }
    .render()
}

fn moved(m: Move) -> String {
    format!(
        "expected to move {:.3} s and {} bytes ({:.1} MiB) out of the steps (largest rank)",
        m.seconds,
        m.bytes,
        m.bytes as f64 / (1u64 << 20) as f64
    )
}

/// The alternative to warming a spilling autotune candidate.
fn prune_advice(a: &plan::PruneAlternative) -> String {
    let per_thread = if a.per_thread > 0 {
        format!("{} bytes of local memory per thread, ", a.per_thread)
    } else {
        String::new()
    };
    let registers = if a.registers > 0 {
        format!("{} registers", a.registers)
    } else {
        "registers unknown".to_string()
    };
    format!(
        "{}'s autotune candidate {} grew the local-memory reservation by {} bytes ({:.1} MiB; {per_thread}{registers}) while it was benchmarked{}. The Triton block moves that growth to setup, where it stays held: the driver never gives local memory back. The alternative that removes the demand: prune that candidate from the kernel's autotune configs (the autotuner then chooses among the rest).",
        a.kernel,
        a.config,
        a.local_bytes,
        a.local_bytes as f64 / (1u64 << 20) as f64,
        a.step.map_or_else(String::new, |s| format!(" at step {s}"))
    )
}

fn lazy_advice(m: Move, eager: Option<&(String, f64, i64)>) -> String {
    let cost = match eager {
        Some((name, s, b)) => format!(
            "Measured in this run folder (variant '{}'): setup {:+.3} s and {:+} bytes at context creation against this attempt.",
            name,
            s,
            b
        ),
        None => "Measure it before adopting it: prewarm-doctor run --variant baseline --variant eager --variant-env eager:CUDA_MODULE_LOADING=EAGER -- CMD, then prescribe from that run folder.".into(),
    };
    format!(
        "lazy module loading after setup cost {:.3} s and {} bytes of module code (largest rank). CUDA_MODULE_LOADING=EAGER would load every module of every library at context creation instead (usually more memory in total); never applied automatically. {cost}",
        m.seconds, m.bytes
    )
}

fn header(run: &str, attempt: &str, plan: &Plan) -> Vec<String> {
    let c = python::comment_text;
    let mut h = vec![
        format!("Made from run '{}', attempt {}.", c(run), c(attempt)),
        match &plan.fingerprint {
            Some(f) => format!(
                "For world size {}, {} parameters ({} elements, layout hash {}).",
                f.world,
                f.params,
                f.numel,
                c(&f.shapes)
            ),
            None => {
                "No fingerprint was recorded: the model and world size cannot be checked.".into()
            }
        },
        String::new(),
    ];
    h.push(if plan.cublas.is_empty() {
        "cuBLAS block: nothing to warm.".into()
    } else {
        let dtypes: Vec<String> = plan.cublas.iter().map(|x| c(&x.dtype)).collect();
        format!(
            "cuBLAS block: forward+backward in {} (the optimizers' floating dtypes; autocast is not observed); {}.",
            dtypes.join(", "),
            moved(plan.cublas_move)
        )
    });
    h.push(if plan.groups.is_empty() {
        "NCCL block: nothing to warm.".into()
    } else {
        let gs: Vec<String> = plan.groups.iter().map(group_text).collect();
        format!("NCCL block: {}; {}.", gs.join("; "), moved(plan.nccl_move))
    });
    h.push(format!(
        "Triton block: {} autotune key(s) to replay.",
        plan.triton.len()
    ));
    for t in &plan.triton {
        let bucket = if t.step > 1 {
            format!(" (first tuned at step {}: a later shape bucket)", t.step)
        } else {
            " (step 1)".into()
        };
        h.push(format!("  {} key {}{}", c(&t.kernel), c(&t.key), bucket));
    }
    for (kernel, m) in &plan.triton_moves {
        h.push(format!("  {}: {}.", c(kernel), moved(*m)));
    }
    h.push(format!(
        "Not replayed: {} item(s), each with the reason (NOT_REPLAYED).",
        plan.not_replayed.len()
    ));
    if let Some(m) = plan.lazy {
        h.push(format!(
            "Lazy module loading: advice only (ADVICE): {:.3} s, {} bytes after setup.",
            m.seconds, m.bytes
        ));
    }
    for a in &plan.prune {
        h.push(format!(
            "Alternative (ADVICE): prune {}'s autotune candidate {} (it grew local memory by {:.1} MiB, never given back).",
            c(&a.kernel),
            c(&a.config),
            a.local_bytes as f64 / (1u64 << 20) as f64
        ));
    }
    h
}

fn group_text(g: &plan::GroupWarm) -> String {
    let members = g
        .members
        .as_ref()
        .map_or_else(|| "?".to_string(), |m| format!("{m:?}"));
    let label = g
        .desc
        .as_deref()
        .or(g.name.as_deref())
        .map(|s| format!(" '{}'", python::comment_text(s)))
        .unwrap_or_default();
    format!(
        "group #{}{label} of ranks {members} (first {} at step {})",
        g.index,
        python::comment_text(&g.op),
        g.step
    )
}

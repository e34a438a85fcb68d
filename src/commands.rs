//! The subcommands: turn parsed arguments into core calls, print what comes
//! back, and choose the exit code.

use crate::analysis::analyse_run;
use crate::capture::env::CacheMode;
use crate::capture::layout::{RUN_FILE, default_run_dir, safe_component};
use crate::capture::meta::{META_SCHEMA, RunMeta, VariantSpec};
use crate::capture::matrix::{MatrixPlan, run_matrix};
use crate::capture::{CaptureError, default_host_tag};
use crate::prewarm::variants::{self, VariantError};
use crate::report::seconds;
use crate::cli::{CacheArg, CheckArgs, Command, DumpArgs, FormatArg, ReportArgs, RunArgs};
use crate::load::load_run;
use crate::probe::{cache_root, extract_assets, find_cupti, run_check, selftest_child};
use crate::report::terminal::render_attempt;
use std::path::{Path, PathBuf};

/// Exit codes of the doctor's own (not the child's) outcomes.
pub mod exit {
    /// The doctor could not start the command (bad arguments, unwritable run folder).
    pub const DOCTOR_FAILED: i32 = 125;
    /// The command was not found or not executable.
    pub const COMMAND_NOT_FOUND: i32 = 127;
    /// `report`: the input is not a usable run directory.
    pub const BAD_INPUT: i32 = 3;
    /// `report`: the run has damaged files (the report was still produced).
    pub const DAMAGED_INPUT: i32 = 4;
}

/// Runs one subcommand and returns the process exit code.
pub fn dispatch(command: Command) -> i32 {
    match command {
        Command::Run(args) => run(args),
        Command::Report(args) => report(args),
        Command::Check(args) => check(args),
        Command::Dump(args) => dump(args),
        Command::InjectionSelftest => selftest_child(),
    }
}

fn cache_mode(c: CacheArg) -> CacheMode {
    match c {
        CacheArg::Cold => CacheMode::Cold,
        CacheArg::Warm => CacheMode::Warm,
        CacheArg::User => CacheMode::User,
        CacheArg::Shared => CacheMode::Shared,
    }
}

/// The name a run gets by default: the script (for python/torchrun) or program.
pub fn default_name(command: &[String]) -> String {
    let script = command.iter().find(|a| a.ends_with(".py")).or_else(|| command.first());
    script
        .map(|s| Path::new(s).file_stem().map(|f| f.to_string_lossy().into_owned()).unwrap_or_else(|| s.clone()))
        .unwrap_or_else(|| "run".into())
}

/// Exit code of a matrix run in which some attempt's command failed.
pub const MATRIX_RUN_FAILED: i32 = 10;

fn declared_variants(args: &RunArgs) -> Result<(Vec<VariantSpec>, String), VariantError> {
    let mut variants = Vec::new();
    let mut baseline = args.baseline.clone();
    if let Some(p) = &args.preset {
        variants.extend(variants::preset(p)?);
    }
    if let Some(f) = &args.variants_file {
        let (vs, b) = variants::from_file(f)?;
        variants.extend(vs);
        baseline = baseline.or(b);
    }
    for spec in &args.variants {
        variants.push(variants::parse_variant(spec)?);
    }
    if variants.is_empty() {
        variants.push(VariantSpec { name: "default".into(), args: vec![], env: vec![], prewarms: vec![] });
    }
    for spec in &args.variant_env {
        variants::apply_env(&mut variants, spec)?;
    }
    let base = variants::finish(&mut variants, baseline.as_deref())?;
    Ok((variants, base))
}

fn run(args: RunArgs) -> i32 {
    let (variants, baseline) = match declared_variants(&args) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("prewarm-doctor: {e}");
            return exit::DOCTOR_FAILED;
        }
    };
    let name = args.name.clone().unwrap_or_else(|| default_name(&args.command));
    let out = args.out.clone().unwrap_or_else(|| default_run_dir(Path::new("prewarm-runs"), &name));
    if let Err(e) = std::fs::create_dir_all(&out) {
        eprintln!("prewarm-doctor: cannot create the run folder {}: {e}", out.display());
        return exit::DOCTOR_FAILED;
    }
    // Absolute, so children that change directory still find it.
    let out = std::fs::canonicalize(&out).unwrap_or(out);
    let cache = cache_mode(args.cache);
    let single = variants.len() == 1 && args.repeat == 1 && cache != CacheMode::Warm;
    let meta = RunMeta {
        schema: META_SCHEMA,
        doctor_version: env!("CARGO_PKG_VERSION").into(),
        name: name.clone(),
        command: crate::capture::env::redact_args(&args.command),
        created: chrono::Local::now().to_rfc3339(),
        variants: variants.clone(),
        repeat: args.repeat,
        cache,
        kernel_steps: args.kernel_steps,
        step_marker: args.step_marker.clone(),
        baseline: Some(baseline),
        label: None,
    };
    if let Err(e) = std::fs::write(out.join(RUN_FILE), serde_json::to_string_pretty(&meta).expect("serialises")) {
        eprintln!("prewarm-doctor: cannot write {}: {e}", out.join(RUN_FILE).display());
        return exit::DOCTOR_FAILED;
    }
    let assets = if args.no_probe {
        None
    } else {
        match extract_assets(&cache_root()) {
            Ok(a) => Some(a),
            Err(e) => {
                eprintln!("prewarm-doctor: {e}; running the command without the probe");
                None
            }
        }
    };
    let (cupti, _) = find_cupti();
    let plan = MatrixPlan {
        run: out.clone(),
        host: safe_component(&args.host_tag.clone().unwrap_or_else(default_host_tag)),
        command: args.command.clone(),
        variants,
        repeat: args.repeat,
        cache,
        keep_caches: args.keep_caches,
        assets: assets.as_ref(),
        cupti,
        kernel_steps: args.kernel_steps,
        step_marker: args.step_marker.clone(),
    };
    let results = run_matrix(&plan, |p| {
        if !single {
            let eta = p.eta.map(|d| format!(", about {} left", seconds(d.as_secs_f64()))).unwrap_or_default();
            eprintln!(
                "[prewarm-doctor] {}/{}: variant '{}' {}{}",
                p.index,
                p.total,
                p.variant,
                if p.warmup { "cache warm-up (untimed)".to_string() } else { format!("repeat {}", p.attempt) },
                eta
            );
        }
    });
    let mut worst = 0;
    let mut first_code = None;
    for (planned, outcome) in &results {
        match outcome {
            Ok(o) => {
                first_code.get_or_insert(o.exit.code);
                if o.exit.code != 0 {
                    worst = MATRIX_RUN_FAILED;
                }
            }
            Err(CaptureError::Child(e)) => {
                eprintln!("prewarm-doctor: variant '{}' attempt {}: {e}", plan.variants[planned.variant].name, planned.attempt);
                let code = match e {
                    crate::capture::child::ChildError::Spawn { .. } => exit::COMMAND_NOT_FOUND,
                    _ => exit::DOCTOR_FAILED,
                };
                first_code.get_or_insert(code);
                worst = MATRIX_RUN_FAILED;
            }
            Err(e) => {
                eprintln!("prewarm-doctor: {e}");
                return exit::DOCTOR_FAILED;
            }
        }
    }
    summarise(&out);
    if single { first_code.unwrap_or(exit::DOCTOR_FAILED) } else { worst }
}

/// Prints the end-of-run summary to stderr; never changes the exit code.
fn summarise(out: &PathBuf) {
    match load_run(out) {
        Ok(run) => {
            for a in analyse_run(&run) {
                eprint!("{}", render_attempt(&a));
            }
            eprintln!("   run folder: {}", out.display());
        }
        Err(e) => eprintln!("prewarm-doctor: no summary: {e}"),
    }
}

fn report(args: ReportArgs) -> i32 {
    let run = match load_run(&args.run) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("prewarm-doctor: {e}");
            return exit::BAD_INPUT;
        }
    };
    let attempts = analyse_run(&run);
    let text = match args.format {
        FormatArg::Text => attempts.iter().map(render_attempt).collect::<Vec<_>>().join("\n"),
        FormatArg::Json => serde_json::to_string_pretty(&attempts).expect("serialises") + "\n",
    };
    match &args.output {
        Some(path) => {
            if let Err(e) = std::fs::write(path, text) {
                eprintln!("prewarm-doctor: cannot write {}: {e}", path.display());
                return exit::DOCTOR_FAILED;
            }
        }
        None => print!("{text}"),
    }
    let damaged = attempts.iter().any(|a| a.problems.iter().any(|p| p.damaged) || a.processes.iter().any(|p| p.problems.iter().any(|q| q.damaged)));
    if damaged { exit::DAMAGED_INPUT } else { 0 }
}

fn check(args: CheckArgs) -> i32 {
    let assets = match extract_assets(&cache_root()) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("prewarm-doctor: {e}");
            return exit::DOCTOR_FAILED;
        }
    };
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("prewarm-doctor"));
    let report = run_check(&exe, &assets);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report).expect("serialises"));
    } else {
        for item in &report.items {
            println!("{} {:<12} {}", if item.ok { "ok  " } else { "FAIL" }, item.name, item.detail);
        }
        println!("probe: {}", assets.probe.display());
    }
    if report.all_ok() { 0 } else { 1 }
}

fn dump(args: DumpArgs) -> i32 {
    let file = match std::fs::File::open(&args.file) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("prewarm-doctor: cannot open {}: {e}", args.file.display());
            return exit::BAD_INPUT;
        }
    };
    let outcome = crate::load::stream_records(std::io::BufReader::new(file), |r| println!("{r:?}"));
    if let Some(h) = &outcome.header {
        for (k, v) in &h.fields {
            println!("# {k} = {v}");
        }
    }
    match outcome.problem(Path::new(""), &args.file) {
        Some(p) => {
            eprintln!("prewarm-doctor: {}: {}", p.file, p.what);
            if p.damaged { exit::DAMAGED_INPUT } else { 0 }
        }
        None => 0,
    }
}

//! The subcommands: turn parsed arguments into core calls, print what comes
//! back, and choose the exit code.

use crate::analysis::gate::{Gate, GateResult, Runs, evaluate};
use crate::analysis::matrix::{MatrixAccount, compare, summaries};
use crate::analysis::{AttemptAccount, analyse_run};
use crate::capture::env::CacheMode;
use crate::capture::layout::{RUN_FILE, default_run_dir, safe_component};
use crate::capture::matrix::{MatrixPlan, run_matrix};
use crate::capture::meta::{META_SCHEMA, RunMeta, VariantSpec};
use crate::capture::{CaptureError, default_host_tag};
use crate::cli::{
    CacheArg, CheckArgs, Command, DiffArgs, DumpArgs, FormatArg, ReportArgs, RunArgs, TuiArgs,
};
use crate::load::load_run;
use crate::prewarm::variants::{self, VariantError};
use crate::probe::{cache_root, extract_assets, find_cupti, run_check, selftest_child};
use crate::report::matrix::render_matrix;
use crate::report::seconds;
use crate::report::terminal::render_attempt;
use std::io::Write;
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
    /// A `--fail-if` expression is malformed.
    pub const BAD_GATE: i32 = 2;
    /// A `--fail-if` threshold was crossed.
    pub const GATE_FAILED: i32 = 11;
}

/// Runs one subcommand and returns the process exit code.
pub fn dispatch(command: Command) -> i32 {
    match command {
        Command::Run(args) => run(args),
        Command::Report(args) => report(args),
        Command::Diff(args) => diff(args),
        Command::Check(args) => check(args),
        Command::Dump(args) => dump(args),
        Command::Tui(args) => tui(args),
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
    let script = command
        .iter()
        .find(|a| a.ends_with(".py"))
        .or_else(|| command.first());
    script
        .map(|s| {
            Path::new(s)
                .file_stem()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_else(|| s.clone())
        })
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
        variants.push(VariantSpec {
            name: "default".into(),
            args: vec![],
            env: vec![],
            prewarms: vec![],
        });
    }
    for spec in &args.variant_env {
        variants::apply_env(&mut variants, spec)?;
    }
    let base = variants::finish(&mut variants, baseline.as_deref())?;
    Ok((variants, base))
}

fn run(args: RunArgs) -> i32 {
    if args.tui
        && let Err(e) = crate::tui::require_terminal(
            "run --tui",
            "drop --tui (the run prints its summary at the end, and `prewarm-doctor tui RUN` replays it later)",
        )
    {
        eprintln!("prewarm-doctor: {e}");
        return exit::DOCTOR_FAILED;
    }
    if let Some(m) = &args.step_marker
        && let Err(e) = regex::Regex::new(m)
    {
        eprintln!("prewarm-doctor: --step-marker '{m}' is not a valid regular expression: {e}");
        return exit::DOCTOR_FAILED;
    }
    let (variants, baseline) = match declared_variants(&args) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("prewarm-doctor: {e}");
            return exit::DOCTOR_FAILED;
        }
    };
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| default_name(&args.command));
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| default_run_dir(Path::new("prewarm-runs"), &name));
    if let Err(e) = std::fs::create_dir_all(&out) {
        eprintln!(
            "prewarm-doctor: cannot create the run folder {}: {e}",
            out.display()
        );
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
    // Every node of a multi-node job writes the same description into the
    // shared folder: write-then-rename, so a reader never sees half a file.
    let staged = out.join(format!(".{RUN_FILE}.{}", std::process::id()));
    if let Err(e) = std::fs::write(
        &staged,
        serde_json::to_string_pretty(&meta).expect("serialises"),
    )
    .and_then(|()| std::fs::rename(&staged, out.join(RUN_FILE)))
    {
        eprintln!(
            "prewarm-doctor: cannot write {}: {e}",
            out.join(RUN_FILE).display()
        );
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
    let live = args.tui.then(crate::tui::live::LiveRun::new);
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
        output: live.as_ref().map(|l| l.sink()),
        stop: live.as_ref().map(|l| l.stop_flag()),
    };
    let print_progress = |p: &crate::capture::matrix::Progress| {
        if !single {
            let eta = p
                .eta
                .map(|d| format!(", about {} left", seconds(d.as_secs_f64())))
                .unwrap_or_default();
            let elapsed = if p.index > 1 {
                format!(" after {}", seconds(p.elapsed.as_secs_f64()))
            } else {
                String::new()
            };
            eprintln!(
                "[prewarm-doctor] {}/{}: variant '{}' {}{}{}",
                p.index,
                p.total,
                p.variant,
                if p.warmup {
                    "cache warm-up (untimed)".to_string()
                } else {
                    format!("repeat {}", p.attempt)
                },
                elapsed,
                eta
            );
        }
    };
    let results = match live {
        Some(live) => {
            let log = live.log();
            live.show(
                &out,
                || {
                    run_matrix(&plan, |p| {
                        log.attempt_started(&p.variant, &p.attempt, p.index, p.total)
                    })
                },
                |r| run_exit_code(r, single),
            )
        }
        None => run_matrix(&plan, print_progress),
    };
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
                eprintln!(
                    "prewarm-doctor: variant '{}' attempt {}: {e}",
                    plan.variants[planned.variant].name, planned.attempt
                );
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
    if single {
        first_code.unwrap_or(exit::DOCTOR_FAILED)
    } else {
        worst
    }
}

/// The code `run` exits with: the command's for a single run, else 0 or
/// MATRIX_RUN_FAILED.
fn run_exit_code(results: &[crate::capture::matrix::AttemptResult], single: bool) -> i32 {
    let code = |o: &Result<crate::capture::AttemptOutcome, CaptureError>| match o {
        Ok(o) => o.exit.code,
        Err(CaptureError::Child(crate::capture::child::ChildError::Spawn { .. })) => {
            exit::COMMAND_NOT_FOUND
        }
        Err(_) => exit::DOCTOR_FAILED,
    };
    if single {
        results
            .first()
            .map_or(exit::DOCTOR_FAILED, |(_, o)| code(o))
    } else if results.iter().any(|(_, o)| code(o) != 0) {
        MATRIX_RUN_FAILED
    } else {
        0
    }
}

/// Which attempts get their full story in the text output.
pub enum Selection<'a> {
    /// Single runs: every attempt; matrices: the baseline's first attempt.
    Default,
    All,
    One(&'a str),
}

/// The attempts whose full story is shown.
pub fn select_attempts<'a>(
    attempts: &'a [AttemptAccount],
    matrix: Option<&MatrixAccount>,
    selection: &Selection,
) -> Result<Vec<&'a AttemptAccount>, String> {
    Ok(match (selection, matrix) {
        (Selection::All, _) | (Selection::Default, None) => attempts.iter().collect(),
        (Selection::One(spec), _) => {
            let (variant, attempt) = match spec.split_once('/') {
                Some((v, a)) => (v, Some(a)),
                None => (*spec, None),
            };
            let found: Vec<&AttemptAccount> = attempts
                .iter()
                .filter(|a| a.variant == variant && attempt.is_none_or(|n| a.attempt == n))
                .take(if attempt.is_some() { 1 } else { usize::MAX })
                .collect();
            if found.is_empty() {
                let known: Vec<String> = attempts
                    .iter()
                    .map(|a| format!("{}/{}", a.variant, a.attempt))
                    .collect();
                return Err(format!(
                    "--attempt {spec}: no such attempt in this run (it has: {})",
                    known.join(", ")
                ));
            }
            found
        }
        (Selection::Default, Some(m)) => attempts
            .iter()
            .filter(|a| a.variant == m.baseline && !a.warmup)
            .take(1)
            .collect(),
    })
}

/// The text output: the comparison (for matrices) and the selected stories.
pub fn render_text(
    attempts: &[AttemptAccount],
    matrix: Option<&MatrixAccount>,
    selection: Selection,
) -> Result<String, String> {
    let mut out = String::new();
    let chosen = select_attempts(attempts, matrix, &selection)?;
    if let Some(m) = matrix {
        out.push_str(&render_matrix(m));
        if matches!(selection, Selection::Default) {
            out.push_str("   (the baseline's first attempt follows; `report RUN --attempt VARIANT[/N]` or `--all` shows others)\n");
        }
    }
    for a in chosen {
        out.push_str(&render_attempt(a));
    }
    Ok(out)
}

/// GitHub Actions shows Markdown appended to $GITHUB_STEP_SUMMARY on the job page.
fn append_step_summary(md: &str) {
    if let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|v| !v.is_empty()) {
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(md.as_bytes()));
        if let Err(e) = written {
            eprintln!(
                "prewarm-doctor: cannot append to $GITHUB_STEP_SUMMARY ({}): {e}",
                path.to_string_lossy()
            );
        }
    }
}

/// Prints the end-of-run summary to stderr; never changes the exit code.
fn summarise(out: &Path) {
    match load_run(out) {
        Ok(run) => {
            let attempts = analyse_run(&run);
            let matrix = compare(run.meta.as_ref(), &attempts);
            if let Ok(text) = render_text(&attempts, matrix.as_ref(), Selection::Default) {
                eprint!("{text}");
            }
            eprintln!("   run folder: {}", out.display());
        }
        Err(e) => eprintln!("prewarm-doctor: no summary: {e}"),
    }
}

fn parse_gates(exprs: &[String]) -> Result<Vec<Gate>, i32> {
    exprs
        .iter()
        .map(|e| Gate::parse(e))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            eprintln!("prewarm-doctor: {e}");
            exit::BAD_GATE
        })
}

/// Prints gate results to stderr and returns whether any failed.
fn report_gates(results: &[GateResult]) -> bool {
    for r in results {
        eprintln!("{}", crate::report::gates::gate_line(r));
    }
    results.iter().any(|r| r.failed)
}

fn report(args: ReportArgs) -> i32 {
    let gates = match parse_gates(&args.fail_if) {
        Ok(g) => g,
        Err(code) => return code,
    };
    let run = match load_run(&args.run) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("prewarm-doctor: {e}");
            return exit::BAD_INPUT;
        }
    };
    let attempts = analyse_run(&run);
    let matrix = compare(run.meta.as_ref(), &attempts);
    let visual = match args.format {
        FormatArg::Html => Some(crate::report::render::Visual::Html),
        FormatArg::Png => Some(crate::report::render::Visual::Png),
        FormatArg::Perfetto => Some(crate::report::render::Visual::Perfetto),
        _ => None,
    };
    let bytes = match args.format {
        FormatArg::Text => {
            let selection = match (&args.attempt, args.all) {
                (Some(a), _) => Selection::One(a),
                (None, true) => Selection::All,
                (None, false) => Selection::Default,
            };
            match render_text(&attempts, matrix.as_ref(), selection) {
                Ok(t) => t.into_bytes(),
                Err(e) => {
                    eprintln!("prewarm-doctor: {e}");
                    return exit::BAD_INPUT;
                }
            }
        }
        FormatArg::Json => crate::report::json::render(
            &args.run.display().to_string(),
            run.meta.as_ref(),
            matrix.as_ref(),
            &attempts,
        ),
        FormatArg::Csv => crate::report::csv_out::render(&attempts),
        FormatArg::Html | FormatArg::Png | FormatArg::Perfetto => Vec::new(),
        FormatArg::Md => {
            let selection = match (&args.attempt, args.all) {
                (Some(a), _) => Selection::One(a),
                (None, true) => Selection::All,
                (None, false) => Selection::Default,
            };
            match select_attempts(&attempts, matrix.as_ref(), &selection) {
                Ok(chosen) => {
                    let md = crate::report::markdown::render(&chosen, matrix.as_ref());
                    append_step_summary(&md);
                    md.into_bytes()
                }
                Err(e) => {
                    eprintln!("prewarm-doctor: {e}");
                    return exit::BAD_INPUT;
                }
            }
        }
    };
    let written = match (visual, &args.output) {
        (Some(v), out) => crate::report::render::write_visual(
            v,
            &args.run,
            &run,
            &attempts,
            matrix.as_ref(),
            out.as_deref(),
        )
        .map(|paths| {
            paths
                .iter()
                .for_each(|p| eprintln!("wrote {}", p.display()))
        })
        .map_err(|e| e.to_string()),
        (None, Some(path)) => std::fs::write(path, &bytes)
            .map_err(|e| format!("cannot write {}: {e}", path.display())),
        (None, None) => std::io::Write::write_all(&mut std::io::stdout().lock(), &bytes)
            .map_err(|e| format!("cannot write to standard output: {e}")),
    };
    if let Err(e) = written {
        eprintln!("prewarm-doctor: {e}");
        return exit::DOCTOR_FAILED;
    }
    if !gates.is_empty() {
        let summaries = summaries(run.meta.as_ref(), &attempts);
        let runs = Runs {
            new: &summaries,
            new_matrix: matrix.as_ref(),
            old: None,
            allow_missing: false,
        };
        match evaluate(&gates, &runs) {
            Ok(results) => {
                if report_gates(&results) {
                    return exit::GATE_FAILED;
                }
            }
            Err(e) => {
                eprintln!("prewarm-doctor: {e}");
                return exit::BAD_GATE;
            }
        }
    }
    let damaged = attempts.iter().any(|a| {
        a.problems.iter().any(|p| p.damaged)
            || a.processes
                .iter()
                .any(|p| p.problems.iter().any(|q| q.damaged))
    });
    if damaged { exit::DAMAGED_INPUT } else { 0 }
}

fn diff(args: DiffArgs) -> i32 {
    let gates = match parse_gates(&args.fail_if) {
        Ok(g) => g,
        Err(code) => return code,
    };
    let load = |p: &Path| match load_run(p) {
        Ok(r) => Ok(r),
        Err(e) => {
            eprintln!("prewarm-doctor: {e}");
            Err(exit::BAD_INPUT)
        }
    };
    let (old, new) = match (load(&args.old), load(&args.new)) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(c), _) | (_, Err(c)) => return c,
    };
    let (old_attempts, new_attempts) = (analyse_run(&old), analyse_run(&new));
    let (old_sum, new_sum) = (
        summaries(old.meta.as_ref(), &old_attempts),
        summaries(new.meta.as_ref(), &new_attempts),
    );
    let (old_m, new_m) = (
        compare(old.meta.as_ref(), &old_attempts),
        compare(new.meta.as_ref(), &new_attempts),
    );
    let bytes = match args.format {
        FormatArg::Text => {
            crate::report::diff::render_text(&old_sum, &new_sum, old_m.as_ref(), new_m.as_ref())
                .into_bytes()
        }
        FormatArg::Json => crate::report::diff::render_json(
            &args.old.display().to_string(),
            &args.new.display().to_string(),
            &old_sum,
            &new_sum,
            old_m.as_ref(),
            new_m.as_ref(),
        ),
        FormatArg::Csv | FormatArg::Html | FormatArg::Png | FormatArg::Perfetto => {
            let f = format!("{:?}", args.format).to_lowercase();
            eprintln!(
                "prewarm-doctor: diff has no {} form; use --format json (or report --format {f} on each run)",
                f.to_uppercase()
            );
            return exit::BAD_GATE;
        }
        FormatArg::Md => {
            let text = crate::report::diff::render_text(
                &old_sum,
                &new_sum,
                old_m.as_ref(),
                new_m.as_ref(),
            );
            let md = format!("## prewarm-doctor diff\n\n```text\n{text}```\n");
            append_step_summary(&md);
            md.into_bytes()
        }
    };
    if let Err(e) = std::io::stdout().lock().write_all(&bytes) {
        eprintln!("prewarm-doctor: cannot write to standard output: {e}");
        return exit::DOCTOR_FAILED;
    }
    let runs = Runs {
        new: &new_sum,
        new_matrix: new_m.as_ref(),
        old: Some(&old_sum),
        allow_missing: args.allow_missing,
    };
    match evaluate(&gates, &runs) {
        Ok(results) if report_gates(&results) => exit::GATE_FAILED,
        Ok(_) => 0,
        Err(e) => {
            eprintln!("prewarm-doctor: {e}");
            exit::BAD_GATE
        }
    }
}

fn tui(args: TuiArgs) -> i32 {
    match crate::tui::replay(&args.run) {
        Ok(code) => code,
        Err(e @ crate::tui::TuiError::Load(_)) => {
            eprintln!("prewarm-doctor: {e}");
            exit::BAD_INPUT
        }
        Err(e) => {
            eprintln!("prewarm-doctor: {e}");
            exit::DOCTOR_FAILED
        }
    }
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
        println!(
            "{}",
            serde_json::to_string_pretty(&report).expect("serialises")
        );
    } else {
        for item in &report.items {
            println!(
                "{} {:<12} {}",
                if item.ok { "ok  " } else { "FAIL" },
                item.name,
                item.detail
            );
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
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut broken = false;
    let outcome = crate::load::stream_records(std::io::BufReader::new(file), |r| {
        if !broken {
            broken = writeln!(out, "{r:?}").is_err();
        }
    });
    if let Some(h) = &outcome.header {
        for (k, v) in &h.fields {
            if !broken {
                broken = writeln!(out, "# {k} = {v}").is_err();
            }
        }
    }
    let _ = out.flush();
    match outcome.problem(Path::new(""), &args.file) {
        Some(p) => {
            eprintln!("prewarm-doctor: {}: {}", p.file, p.what);
            if p.damaged { exit::DAMAGED_INPUT } else { 0 }
        }
        None => 0,
    }
}

//! The subcommands, dispatch only: parsed arguments in, a call into the
//! core, what comes back said through [`crate::output`], and the exit code
//! from [`exit`] — the one mapping of every verb's [`Outcome`] and
//! [`DoctorError`] to the README's "Exit codes". `output` decides where bytes
//! go (stdout, `-o` files and folders, the job summary, stderr): a closed
//! stdout or stderr never panics and never changes the code.

mod exit;

pub use exit::{DoctorError, Outcome};

use crate::analysis::gate::{Gate, GateResult, Runs, evaluate};
use crate::capture::matrix::{AttemptResult, Progress};
use crate::capture::run::{PreparedRun, RunNotice, RunRequest, VariantFlags, prepare};
use crate::cli::{
    CacheArg, CheckArgs, Command, DiffArgs, DumpArgs, PrescribeArgs, ReportArgs, RunArgs, TuiArgs,
};
use crate::injection::{cache_root, extract_assets, run_check, selftest_child};
use crate::output::{self, OutputError, write_diff, write_report};
use crate::pipeline::{Analysed, DiffInputs, end_of_run_summary};
use crate::report::escape::{terminal, terminal_block};
use crate::report::seconds;
use crate::report::select::Selection;
use crate::run_folder::meta::CacheMode;
use crate::tui::live::LiveRun;
use std::path::{Path, PathBuf};

/// Runs one subcommand and returns the process exit code: the one place a
/// verb's error is said (on stderr) and any verb's end becomes a code.
pub fn dispatch(command: Command) -> i32 {
    let ended = match command {
        Command::Run(args) => run(args),
        Command::Report(args) => report(args),
        Command::Diff(args) => diff(args),
        Command::Check(args) => check(args),
        Command::Dump(args) => dump(args),
        Command::Tui(args) => tui(args),
        Command::Prescribe(args) => prescribe(args),
        // The child `check` starts: its code is what `check` reads.
        Command::InjectionSelftest => return selftest_child(),
    };
    match ended {
        Ok(outcome) => outcome.exit_code(),
        Err(e) => {
            output::error(&e);
            e.exit_code()
        }
    }
}

/// `run`'s flags as the core's request.
fn run_request(args: RunArgs) -> RunRequest {
    RunRequest {
        command: args.command,
        name: args.name,
        variants: VariantFlags {
            preset: args.preset,
            file: args.variants_file,
            variants: args.variants,
            env: args.variant_env,
            baseline: args.baseline,
            prescribe: args.prescribe,
        },
        repeat: args.repeat,
        cache: match args.cache {
            CacheArg::Cold => CacheMode::Cold,
            CacheArg::Warm => CacheMode::Warm,
            CacheArg::User => CacheMode::User,
            CacheArg::Shared => CacheMode::Shared,
        },
        out: args.out,
        force: args.force,
        host_tag: args.host_tag,
        kernel_steps: args.kernel_steps,
        step_marker: args.step_marker,
        keep_caches: args.keep_caches,
        probe: !args.no_probe,
    }
}

/// What `run` says on its way, on stderr.
fn say(notice: RunNotice<'_>) {
    output::error(notice);
}

/// What `run` says while preparing (a folder continued or forced, the probe
/// missing), held back until the training has ended and said after the
/// summary: the command's stderr is its own from its first byte, and
/// everything of the doctor's follows its first `== prewarm-doctor` line.
#[derive(Default)]
struct HeldNotices(Vec<String>);

impl HeldNotices {
    fn hold(&mut self, notice: RunNotice<'_>) {
        self.0.push(notice.to_string());
    }

    fn say(self) {
        for line in self.0 {
            output::error(line);
        }
    }
}

/// `run`: the run prepared and its attempts made by `capture::run`, in the
/// live dashboard with `--tui`; then the summary and what preparing said on
/// stderr.
fn run(args: RunArgs) -> Result<Outcome, DoctorError> {
    let live = if args.tui {
        crate::tui::require_terminal(
            "run --tui",
            "drop --tui (the run prints its summary at the end, and `prewarm-doctor tui RUN` replays it later)",
        )?;
        Some(LiveRun::new())
    } else {
        None
    };
    let mut held = HeldNotices::default();
    let prepared = match prepare(run_request(args), &mut |n| held.hold(n)) {
        Ok(prepared) => prepared,
        Err(e) => {
            held.say();
            return Err(e.into());
        }
    };
    let results = attempt_results(&prepared, live);
    let outcome = match prepared.conclude(results, &mut say) {
        Ok(outcome) => outcome,
        Err(e) => {
            held.say();
            return Err(e.into());
        }
    };
    summarise(prepared.folder());
    held.say();
    Ok(Outcome::Run(outcome))
}

/// Every attempt of the prepared run, with the live dashboard when asked.
fn attempt_results(prepared: &PreparedRun, live: Option<LiveRun>) -> Vec<AttemptResult> {
    match live {
        Some(live) => {
            let log = live.log();
            let (sink, stop) = (live.sink(), live.stop_flag());
            live.show(
                prepared.folder(),
                || {
                    prepared.run_attempts(Some(sink), Some(stop), |p| {
                        if log.dashboard_open() {
                            log.attempt_started(&p.variant, &p.attempt, p.index, p.total)
                        } else {
                            progress(prepared, p)
                        }
                    })
                },
                |r| Outcome::Run(prepared.outcome(r)).exit_code(),
            )
        }
        None => prepared.run_attempts(None, None, |p| progress(prepared, p)),
    }
}

/// The progress line before each attempt of a matrix (none for a single
/// run, whose output is the training's alone). The attempts that start after
/// the dashboard was closed with the run going on print theirs as a run
/// without the dashboard does.
fn progress(run: &PreparedRun, p: &Progress) {
    if run.is_single() {
        return;
    }
    let eta = p
        .eta
        .map(|d| format!(", about {} left", seconds(d.as_secs_f64())))
        .unwrap_or_default();
    let elapsed = if p.index > 1 {
        format!(" after {}", seconds(p.elapsed.as_secs_f64()))
    } else {
        String::new()
    };
    let what = if p.warmup {
        "cache warm-up (untimed)".to_string()
    } else {
        format!("repeat {}", p.attempt)
    };
    output::stderr_text(&format!(
        "[prewarm-doctor] {}/{}: variant '{}' {what}{elapsed}{eta}\n",
        p.index, p.total, p.variant
    ));
}

/// Prints the end-of-run summary to stderr; never changes the exit code.
fn summarise(out: &Path) {
    match end_of_run_summary(out) {
        Ok(text) => output::stderr_text(&text),
        Err(e) => output::error(format_args!("no summary: {e}")),
    }
}

/// `prescribe`: the prescription module to a file or standard output, and
/// what it holds to standard error.
fn prescribe(args: PrescribeArgs) -> Result<Outcome, DoctorError> {
    let p = crate::prescribe::prescribe(&args.run, args.attempt.as_deref())?;
    output::write_text(
        args.output.as_deref(),
        p.text.as_bytes(),
        "the prescription",
    )?;
    output::stderr_text(&format!(
        "prescription for {}: {} cuBLAS dtype(s), {} process group(s), {} Triton autotune key(s); {} item(s) not replayed (listed in the file)\n",
        terminal(&p.attempt),
        p.plan.cublas.len(),
        p.plan.groups.len(),
        p.plan.triton.len(),
        p.plan.not_replayed.len()
    ));
    Ok(Outcome::Done)
}

fn parse_gates(exprs: &[String]) -> Result<Vec<Gate>, DoctorError> {
    Ok(exprs
        .iter()
        .map(|e| Gate::parse(e))
        .collect::<Result<_, _>>()?)
}

/// Prints gate results to stderr and returns whether any failed.
fn report_gates(results: &[GateResult]) -> bool {
    for r in results {
        output::stderr_text(&format!("{}\n", crate::report::gate_text::gate_line(r)));
    }
    results.iter().any(|r| r.failed)
}

/// Prints each damaged file of a run on stderr; returns whether there were any.
fn report_damage(lines: &[String]) -> bool {
    for line in lines {
        output::error(line);
    }
    !lines.is_empty()
}

/// Refuses the flags of `report` that its format cannot honour.
fn refuse_report_flags(args: &ReportArgs) -> Result<(), DoctorError> {
    if !args.format.tells_a_selection() && (args.attempt.is_some() || args.all) {
        return Err(DoctorError::SelectionFlag {
            flag: if args.all { "--all" } else { "--attempt" },
            format: args.format.name(),
        });
    }
    match output::refuse_destination(args.format, args.output.as_deref()) {
        Some(why) => Err(OutputError::Usage(why).into()),
        None => Ok(()),
    }
}

fn report(args: ReportArgs) -> Result<Outcome, DoctorError> {
    refuse_report_flags(&args)?;
    let gates = parse_gates(&args.fail_if)?;
    let run = Analysed::load(&args.run)?;
    let selection = Selection::from_flags(args.attempt.as_deref(), args.all);
    let damage = run.damage_lines();
    let summaries = run.summaries();
    let model = run.into_model();
    write_report(args.format, &model, selection, args.output.as_deref())?;
    let damaged = report_damage(&damage);
    if !gates.is_empty() {
        let runs = Runs {
            new: &summaries,
            new_matrix: model.matrix_account.as_ref(),
            old: None,
            allow_missing: false,
        };
        if report_gates(&evaluate(&gates, &runs)?) {
            return Ok(Outcome::GateFailed);
        }
    }
    Ok(if damaged {
        Outcome::Damaged
    } else {
        Outcome::Done
    })
}

fn diff(args: DiffArgs) -> Result<Outcome, DoctorError> {
    let gates = parse_gates(&args.fail_if)?;
    let inputs = DiffInputs::load(&args.old, &args.new)?;
    write_diff(args.format, &inputs.diff())?;
    let damaged_old = report_damage(&inputs.old.damage_lines());
    let damaged_new = report_damage(&inputs.new.damage_lines());
    let runs = Runs {
        new: &inputs.new_summaries,
        new_matrix: inputs.new.matrix.as_ref(),
        old: Some(&inputs.old_summaries),
        allow_missing: args.allow_missing,
    };
    Ok(if report_gates(&evaluate(&gates, &runs)?) {
        Outcome::GateFailed
    } else if damaged_old || damaged_new {
        Outcome::Damaged
    } else {
        Outcome::Done
    })
}

fn tui(args: TuiArgs) -> Result<Outcome, DoctorError> {
    Ok(Outcome::Dashboard(crate::tui::replay(&args.run)?))
}

fn check(args: CheckArgs) -> Result<Outcome, DoctorError> {
    let assets = extract_assets(&cache_root())?;
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("prewarm-doctor"));
    let report = run_check(&exe, &assets);
    let text = if args.json {
        format!(
            "{}\n",
            serde_json::to_string_pretty(&report).expect("the check report serialises")
        )
    } else {
        let mut t = String::new();
        for item in &report.items {
            t.push_str(&format!(
                "{} {:<12} {}\n",
                if item.ok { "ok  " } else { "FAIL" },
                item.name,
                item.detail
            ));
        }
        t.push_str(&format!("probe: {}\n", assets.probe.display()));
        t
    };
    output::print_stdout(terminal_block(&text).as_bytes()).map_err(OutputError::Destination)?;
    Ok(if report.all_ok() {
        Outcome::Done
    } else {
        Outcome::CannotCapture
    })
}

fn dump(args: DumpArgs) -> Result<Outcome, DoctorError> {
    let file = std::fs::File::open(&args.file).map_err(|source| DoctorError::Open {
        path: args.file.clone(),
        source,
    })?;
    let mut sink = output::StdoutLines::new();
    let outcome = crate::load::stream_records(std::io::BufReader::new(file), |r| {
        sink.line(format_args!("{}", terminal(&format!("{r:?}"))))
    });
    if let Some(h) = &outcome.header {
        for (k, v) in &h.fields {
            sink.line(format_args!("# {} = {}", terminal(k), terminal(v)));
        }
    }
    sink.finish().map_err(OutputError::Destination)?;
    let problems = outcome.problems(Path::new(""), &args.file);
    for p in &problems {
        output::error(p);
    }
    Ok(if problems.iter().any(|p| p.damaged) {
        Outcome::Damaged
    } else {
        Outcome::Done
    })
}

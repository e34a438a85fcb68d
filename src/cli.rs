//! Command-line parsing. clap turns arguments into these structs; `main`
//! converts them into plain configuration for the core, which never prints.

use crate::report::format::Format;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::ffi::OsString;
use std::path::PathBuf;

/// Exit code of a usage error (unknown flag, missing argument) of `run`: the
/// code `env`, `timeout` and `nohup` use for "the wrapper itself failed", so it
/// is not mistaken for the training command's own code (which is often 1 or 2).
pub const RUN_USAGE_ERROR: i32 = 125;
/// Exit code of a usage error of every other verb (clap's and most tools').
pub const USAGE_ERROR: i32 = 2;

/// Parses the command line. `Err` holds the exit code after help, the version
/// or a usage error was printed (a closed stdout/stderr is ignored, never a panic).
pub fn parse<I, T>(args: I) -> Result<Cli, i32>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    match Cli::try_parse_from(&args).and_then(check_command) {
        Ok(cli) => Ok(cli),
        Err(e) => {
            let _ = e.print();
            if !e.use_stderr() {
                return Err(0); // --help, --version
            }
            let verb = args
                .iter()
                .skip(1)
                .find(|a| !a.to_string_lossy().starts_with('-'));
            Err(if verb.is_some_and(|v| v == "run") {
                RUN_USAGE_ERROR
            } else {
                USAGE_ERROR
            })
        }
    }
}

/// `run`'s command takes every word after the doctor's own options, so a
/// misspelt option (`--reapeat 3`) would become the program to run: refuse a
/// command that starts with `-` as the unknown option it is.
fn check_command(cli: Cli) -> Result<Cli, clap::Error> {
    if let Command::Run(run) = &cli.command
        && let Some(first) = run.command.first().map(|c| c.to_string_lossy())
        && first.starts_with('-')
    {
        use clap::CommandFactory;
        let mut cli_command = Cli::command();
        cli_command.build();
        let run_command = cli_command
            .find_subcommand_mut("run")
            .expect("`run` is a subcommand");
        return Err(run_command.error(
            clap::error::ErrorKind::UnknownArgument,
            format!(
                "unexpected argument '{first}' for `run` (see `prewarm-doctor run --help`; the command goes after `--`)"
            ),
        ));
    }
    Ok(cli)
}

/// The end of `run --help`: the presets and every known prewarm, which a
/// variant names (verdicts judge a variant on what its prewarms target, and
/// a report's note about an unknown prewarm points here).
pub fn run_epilogue() -> String {
    use crate::prewarm::catalog::CATALOG;
    let mut t = String::from(
        "Presets (--preset):\n  nemo-automodel      a baseline, one variant per NeMo AutoModel prewarm,\n                      and 'all'\n  env:NAME[,NAME...]  a baseline and one variant per NAME, run with\n                      PREWARM_<NAME>=1\n\nKnown prewarms (a variant names them with `prewarms = [...]` in\n--variants-file, or they are recognised from its flag or environment variable):\n",
    );
    for p in CATALOG {
        let how = match (p.flag, p.env) {
            (Some(f), _) => format!(", {f} true"),
            (None, Some(e)) => format!(", {e}=1"),
            (None, None) => String::new(),
        };
        let targets: Vec<&str> = p.targets.iter().map(|c| c.label()).collect();
        t.push_str(&format!("  {} ({}{how})\n", p.name, p.framework.label()));
        let about = format!("{}; targets {}", p.description, targets.join(", "));
        // Wrapped here, indented: clap re-wraps long lines flush left.
        let mut line = String::new();
        for word in about.split(' ') {
            if !line.is_empty() && line.len() + 1 + word.len() > 70 {
                t.push_str(&format!("      {line}\n"));
                line.clear();
            }
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
        t.push_str(&format!("      {line}\n"));
    }
    t
}

/// Prove what each CUDA/Triton/NCCL prewarm moves out of training step 1.
#[derive(Debug, Parser)]
#[command(name = "prewarm-doctor", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a training command under capture (every rank), then print its step-1 story.
    #[command(after_long_help = run_epilogue())]
    Run(RunArgs),
    /// Print the summary of a saved run directory, or write it as JSON, Markdown, CSV, HTML, PNG charts or a Perfetto trace.
    Report(ReportArgs),
    /// Compare two saved runs (e.g. before/after a pull request) and gate on the change.
    Diff(DiffArgs),
    /// Check whether this machine can capture: driver, NVML, CUPTI, injection.
    Check(CheckArgs),
    /// Print the raw records of one event file (for debugging the probe).
    Dump(DumpArgs),
    /// Interactive dashboard over a run folder (finished, or still being written).
    Tui(TuiArgs),
    /// Write the Python prewarm a recorded run was missing (inject it with `run --prescribe`).
    Prescribe(PrescribeArgs),
    /// Internal: the child process `check` uses to test injection.
    #[command(name = "__injection-selftest", hide = true)]
    InjectionSelftest,
}

/// Cache handling for the command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CacheArg {
    /// Fresh empty Triton/inductor/CUDA-JIT caches per run (what a first run sees).
    Cold,
    /// Each variant's own cache, warmed by one untimed run first.
    Warm,
    /// Leave the user's caches alone (no isolation).
    User,
    /// One cache shared by all variants in run order (to show what isolation prevents).
    Shared,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Run directory to create (default: prewarm-runs/<name>-<timestamp>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Name for the run (default: the script or program name).
    #[arg(long)]
    pub name: Option<String>,
    /// Host tag for this node's folder (default: $PREWARM_DOCTOR_HOST or the hostname).
    #[arg(long)]
    pub host_tag: Option<String>,
    /// Cache isolation mode.
    #[arg(long, value_enum, default_value_t = CacheArg::Cold)]
    pub cache: CacheArg,
    /// Watch kernels' first launches for this many optimizer steps (a traced launch call costs time).
    #[arg(long, default_value_t = 3)]
    pub kernel_steps: u32,
    /// Regex: NVTX ranges (pushed through torch.cuda.nvtx) whose names match mark steps explicitly.
    #[arg(long)]
    pub step_marker: Option<String>,
    /// Do not inject the probe (baseline for overhead measurements).
    #[arg(long)]
    pub no_probe: bool,
    /// A variant: NAME (runs the command as is) or NAME:'EXTRA ARGS' appended to it. Repeatable.
    #[arg(long = "variant", value_name = "NAME[:ARGS]")]
    pub variants: Vec<String>,
    /// Extra environment for one variant: NAME:KEY=VALUE. Repeatable.
    #[arg(long = "variant-env", value_name = "NAME:KEY=VALUE")]
    pub variant_env: Vec<String>,
    /// A TOML file declaring the variants (docs/variants.md).
    #[arg(long = "variants-file", value_name = "FILE")]
    pub variants_file: Option<PathBuf>,
    /// A preset matrix: `nemo-automodel` (its documented `prewarm:` keys),
    /// `nemo-automodel:KEY[,KEY...]`, or `env:NAME[,NAME...]` (PREWARM_<NAME>=1 per variant).
    #[arg(long)]
    pub preset: Option<String>,
    /// Which variant the others are compared with (default: the one with no extra args/env).
    #[arg(long)]
    pub baseline: Option<String>,
    /// Run every variant this many times (medians and spread are reported).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeat: u32,
    /// Keep the per-attempt caches instead of deleting them after each run.
    #[arg(long)]
    pub keep_caches: bool,
    /// Show the interactive dashboard while it runs (the command's output goes to its log pane and output.log).
    #[arg(long)]
    pub tui: bool,
    /// Write into an --out folder that holds a run of a different command or
    /// matrix, or a folder that is not a run at all (refused without it); with
    /// --prescribe, also run the prescription on a model or world size it was not made for.
    #[arg(long)]
    pub force: bool,
    /// Inject this prescription (`prewarm-doctor prescribe`) into every variant through the shim.
    #[arg(long, value_name = "FILE")]
    pub prescribe: Option<PathBuf>,
    /// The command to run, after `--` (its arguments reach it byte for byte, UTF-8 or not).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true, num_args = 1..)]
    pub command: Vec<OsString>,
}

/// `diff`'s formats: the ones a comparison has (`Format::diffable`).
fn diff_format() -> impl clap::builder::TypedValueParser<Value = Format> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(
        Format::ALL
            .into_iter()
            .filter(|f| f.diffable())
            .filter_map(|f| f.to_possible_value()),
    )
    .map(|name: String| Format::from_str(&name, false).expect("a possible value names a format"))
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A run directory written by `prewarm-doctor run`.
    pub run: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Write to this file instead of standard output (`-`: standard output; the folder must
    /// exist); for png: the folder for the charts.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// Text and Markdown: tell only this attempt (VARIANT or VARIANT/ATTEMPT).
    #[arg(long, value_name = "VARIANT[/N]")]
    pub attempt: Option<String>,
    /// Text: tell every attempt, not just the baseline's first (Markdown folds every attempt by default).
    #[arg(long, conflicts_with = "attempt")]
    pub all: bool,
    /// Exit with code 11 when this holds, e.g. 'step1_oop>0' or 'cublas:verdict!=works' (docs/gating.md). Repeatable.
    #[arg(long = "fail-if", value_name = "EXPR")]
    pub fail_if: Vec<String>,
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The earlier run directory (the reference).
    pub old: PathBuf,
    /// The later run directory.
    pub new: PathBuf,
    /// Output format (for CSV, HTML, PNG or a Perfetto trace, run `report --format F` on each run).
    #[arg(long, value_parser = diff_format(), default_value = "text")]
    pub format: Format,
    /// Exit with code 11 when this holds for the new run relative to the old, e.g. 'step1_peak>+5%'. Repeatable.
    #[arg(long = "fail-if", value_name = "EXPR")]
    pub fail_if: Vec<String>,
    /// Let a variant that is in only one of the two runs pass the gates (by default it fails them).
    #[arg(long)]
    pub allow_missing: bool,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DumpArgs {
    /// An `.events` file from a run directory.
    pub file: PathBuf,
}

#[derive(Debug, Args)]
pub struct PrescribeArgs {
    /// A run directory written by `prewarm-doctor run`.
    pub run: PathBuf,
    /// The attempt to prescribe for (VARIANT or VARIANT/N; default: the baseline's first).
    #[arg(long, value_name = "VARIANT[/N]")]
    pub attempt: Option<String>,
    /// Write the prescription to this file instead of standard output.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct TuiArgs {
    /// A run directory written by `prewarm-doctor run`.
    pub run: PathBuf,
}

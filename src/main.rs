//! prewarm-doctor: wraps a GPU training run, captures the lazy CUDA
//! initialisation that lands in step 1, and shows what each prewarm moves out.

use clap::Parser;

fn main() {
    let cli = prewarm_doctor::cli::Cli::parse();
    let code = prewarm_doctor::commands::dispatch(cli.command);
    std::process::exit(code);
}

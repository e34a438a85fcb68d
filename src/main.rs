//! prewarm-doctor: wraps a GPU training run, captures the lazy CUDA
//! initialisation that lands in step 1, and shows what each prewarm moves out.

mod analysis;
mod capture;
mod cli;
mod commands;
mod load;
mod prewarm;
mod probe;
mod report;

use clap::Parser;

fn main() {
    let cli = cli::Cli::parse();
    let code = commands::dispatch(cli.command);
    std::process::exit(code);
}

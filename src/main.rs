//! prewarm-doctor: wraps a GPU training run, captures the lazy CUDA
//! initialisation that lands in step 1, and shows what each prewarm moves out.

/// Runs before `main` and before the Rust runtime sets SIGPIPE to ignored, so
/// the training command gets the SIGPIPE disposition the doctor was given.
#[used]
#[unsafe(link_section = ".init_array")]
static RECORD_SIGPIPE: extern "C" fn() = {
    extern "C" fn record() {
        prewarm_doctor::capture::child::record_inherited_sigpipe();
    }
    record
};

fn main() {
    let code = match prewarm_doctor::cli::parse(std::env::args_os()) {
        Ok(cli) => prewarm_doctor::commands::dispatch(cli.command),
        Err(code) => code,
    };
    std::process::exit(code);
}

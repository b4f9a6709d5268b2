//! The `leaseq` command-line tool: `leaseq demo`, and admin commands
//! against any backend URL. Run `leaseq --help`.

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    end_quietly_when_stdout_closes();
    let args = cli::Cli::parse();
    let default_filter = args.default_log_filter();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();

    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(cli::run(args));
    // A command stopped by a signal may leave a read of the terminal
    // (purge's confirmation) in a blocking thread: do not wait for it.
    runtime.shutdown_background();
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            e.exit_code()
        }
    }
}

/// `leaseq history q | head -5` closes stdout early. Rust ignores SIGPIPE,
/// so the next `println!` fails with EPIPE and panics ("failed printing to
/// stdout"). The tool then ends as a pipeline expects, silently and with
/// status 141, what SIGPIPE would have given; SIGPIPE itself stays ignored,
/// so a connection a server closed is still an error, not a dead process.
fn end_quietly_when_stdout_closes() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let text = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if text.starts_with("failed printing to stdout") && text.contains("(os error 32)") {
            std::process::exit(141);
        }
        default(info);
    }));
}

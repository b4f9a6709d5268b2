//! The command line: arguments (clap) and dispatch.

mod admin;
mod demo;
mod error;

use clap::{Args, Parser, Subcommand};

pub(crate) use error::CliError;

/// leaseq: a job queue with fenced leases. Start with `leaseq demo`.
#[derive(Debug, Parser)]
#[command(name = "leaseq", version, about, long_about = None)]
pub(crate) struct Cli {
    /// The backend: memory://, redis://HOST:PORT or postgres://USER@HOST/DB.
    #[arg(
        long,
        short,
        global = true,
        env = "LEASEQ_BACKEND",
        default_value = "memory://"
    )]
    backend: String,

    #[command(subcommand)]
    command: Command,
}

impl Cli {
    pub(crate) fn is_demo(&self) -> bool {
        matches!(self.command, Command::Demo(_))
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Producers, workers (some crashing), reapers at once; prints the verdict.
    Demo(demo::DemoArgs),
    /// Items per state in a queue, as a table.
    Stats(QueueArgs),
    /// Adds items to a queue; prints their ids.
    Enqueue(admin::EnqueueArgs),
    /// Shows items in one state.
    Peek(admin::PeekArgs),
    /// Dead items: list them or send them back to Ready.
    #[command(subcommand)]
    Dead(DeadCommand),
    /// Recovers expired leases now.
    Reap(QueueArgs),
    /// Deletes every item of a queue (asks first unless --yes).
    Purge(admin::PurgeArgs),
}

#[derive(Debug, Subcommand)]
enum DeadCommand {
    /// Lists Dead items, oldest death first, with their last error.
    List(admin::ListArgs),
    /// Moves Dead items back to Ready with their attempts reset.
    Redrive(admin::ListArgs),
}

/// A queue name, and whether an empty queue is acceptable.
#[derive(Debug, Args)]
pub(crate) struct QueueArgs {
    /// The queue's name.
    queue: String,
    /// Accept a queue that holds no items instead of reporting it unknown.
    #[arg(long)]
    allow_empty: bool,
}

pub(crate) async fn run(cli: Cli) -> Result<(), CliError> {
    let url = cli.backend;
    match cli.command {
        Command::Demo(args) => demo::run(&url, args).await,
        Command::Stats(q) => admin::stats(&url, q).await,
        Command::Enqueue(args) => admin::enqueue(&url, args).await,
        Command::Peek(args) => admin::peek(&url, args).await,
        Command::Dead(DeadCommand::List(args)) => admin::dead_list(&url, args).await,
        Command::Dead(DeadCommand::Redrive(args)) => admin::dead_redrive(&url, args).await,
        Command::Reap(q) => admin::reap(&url, q).await,
        Command::Purge(args) => admin::purge(&url, args).await,
    }
}

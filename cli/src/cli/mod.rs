//! The command line: arguments (clap) and dispatch.

mod admin;
mod control;
mod dashboard;
mod demo;
mod error;
mod events;
mod history;
mod limits;
mod schedules;
mod show;
mod signals;
mod workers;

use clap::{Args, Parser, Subcommand};

pub(crate) use error::CliError;

/// leaseq: a job queue with fenced leases. Start with `leaseq demo`.
#[derive(Debug, Parser)]
#[command(name = "leaseq", version, about, long_about = None)]
pub(crate) struct Cli {
    /// The backend: memory://, redis://HOST:PORT, postgres://USER@HOST/DB or
    /// sqlite://PATH/TO/FILE.db.
    // The value is hidden in `--help`: a URL from the environment may hold
    // a password.
    #[arg(
        long,
        short,
        global = true,
        env = "LEASEQ_BACKEND",
        hide_env_values = true,
        default_value = "memory://"
    )]
    backend: String,

    /// The PostgreSQL schema to use (default `leaseq`); also `?schema=` in
    /// the URL.
    #[arg(long, global = true, env = "LEASEQ_SCHEMA")]
    schema: Option<String>,

    /// The Redis key prefix to use (default `leaseq`); also `?prefix=` in
    /// the URL.
    #[arg(long, global = true, env = "LEASEQ_PREFIX")]
    prefix: Option<String>,

    #[command(subcommand)]
    command: Command,
}

impl Cli {
    /// The log filter when `RUST_LOG` is unset.
    pub(crate) fn default_log_filter(&self) -> &'static str {
        match &self.command {
            // The demo kills workers mid-job on purpose: the errors those
            // simulated crashes make a worker log are expected, and not
            // shown unless asked for (the verdict says whether anything
            // went wrong).
            Command::Demo(_) => "error,leaseq_core::worker=off",
            // A scheduler reports each tick it fires.
            Command::Schedules(schedules::SchedulesCommand::Run(_)) => {
                "warn,leaseq_core::schedule=info"
            }
            _ => "warn",
        }
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Producers, workers (some crashing), reapers at once; prints the verdict.
    Demo(demo::DemoArgs),
    /// Items per state in a queue, as a table, and whether it is paused;
    /// without a queue, one line per queue that holds items.
    Stats(admin::StatsArgs),
    /// Adds items to a queue; prints their ids.
    Enqueue(admin::EnqueueArgs),
    /// Shows items in one state.
    Peek(admin::PeekArgs),
    /// Shows one item whole: every field, times, the whole payload, and for
    /// a running job its progress and any cancel request (exit code 3 when
    /// the queue holds no such item).
    Item(admin::ItemArgs),
    /// Dead items: list them or send them back to Ready.
    #[command(subcommand)]
    Dead(DeadCommand),
    /// Recovers expired leases now.
    Reap(QueueArgs),
    /// Removes one item from its queue, whatever its state; a lease held
    /// on it is lost (exit code 3 when the queue holds no such item).
    Remove(admin::RemoveArgs),
    /// Deletes every item of a queue (asks first unless --yes).
    Purge(admin::PurgeArgs),
    /// Cancels one item: a waiting or dead one ends at once; a leased one's
    /// worker is asked to stop it, and it ends when its lease ends (exit
    /// code 3 when the queue holds no such item).
    Cancel(control::CancelArgs),
    /// Pauses a queue: claims get nothing until `leaseq resume`; enqueues go
    /// on and jobs already running finish.
    Pause(control::PauseArgs),
    /// Resumes a paused queue.
    Resume(control::PauseArgs),
    /// Moves Scheduled items (delayed, or retries waiting out their backoff)
    /// to Ready now: the one --id names, or --all (exit code 3 when the
    /// queue holds no such item, 4 when it is not Scheduled).
    RunNow(control::RunNowArgs),
    /// The live workers: host, pid, queue, concurrency and the jobs each is
    /// running.
    Workers(workers::WorkersArgs),
    /// The finished items a queue keeps, newest first, with their results
    /// (see `leaseq retention`).
    History(history::HistoryArgs),
    /// What a queue keeps of its finished items: shows the policy, or sets
    /// it (--completed-secs, --completed-count, --cancelled-secs,
    /// --cancelled-count; --off keeps nothing).
    Retention(history::RetentionArgs),
    /// A queue's job events as they happen (enqueued, started, progress,
    /// completed, failed, released, dead, cancelled), until interrupted or
    /// --count events; at most once, on backends with the Events group.
    Events(events::EventsArgs),
    /// Creates or upgrades the PostgreSQL or SQLite schema, or converts
    /// the Redis queues still in key layout 1 (the only command that does;
    /// admin commands never do).
    Migrate,
    /// A queue's global limits (concurrency, rate), obeyed by every worker.
    #[command(subcommand)]
    Limits(limits::LimitsCommand),
    /// Periodic jobs: list, add or remove schedules, or run a scheduler.
    #[command(subcommand)]
    Schedules(schedules::SchedulesCommand),
    /// A web dashboard: queues, items by state, dead letters with redrive
    /// and purge, pause/resume, cancel, run now and the live workers
    /// (loopback only unless --token is set).
    Dashboard(dashboard::DashboardArgs),
}

#[derive(Debug, Subcommand)]
enum DeadCommand {
    /// Lists Dead items, oldest death first, with their last error.
    List(admin::ListArgs),
    /// Moves Dead items back to Ready with their attempts reset: every
    /// item Dead when it starts (in batches), or the oldest deaths up to
    /// --limit, or the one item --id names
    /// (exit code 3 when the queue holds no such item, 4 when it is not
    /// Dead).
    Redrive(admin::RedriveArgs),
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

/// Where and how a command connects.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    url: String,
    namespace: Option<String>,
    /// Cancelled by SIGINT or SIGTERM: a connection still being made is
    /// given up.
    shutdown: leaseq::CancellationToken,
}

impl Target {
    /// Connects; `migrate` lets it create or upgrade the schema.
    pub(crate) async fn connect(
        &self,
        migrate: bool,
    ) -> Result<std::sync::Arc<dyn leaseq::Backend>, CliError> {
        let options = self.options(migrate);
        interruptible(&self.shutdown, async {
            Ok(leaseq::connect_with(&self.url, &options).await?)
        })
        .await
    }

    /// How [`Self::connect`] connects: the namespace given, if any.
    fn options(&self, migrate: bool) -> leaseq::ConnectOptions {
        let options = leaseq::ConnectOptions::new().migrate(migrate);
        match &self.namespace {
            Some(ns) => options.namespace(ns.clone()),
            None => options,
        }
    }

    /// The URL as given, password included: for connecting only.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// The URL to print: its password masked, and the schema (PostgreSQL)
    /// or key prefix (Redis) in use, which the URL alone may not say (a
    /// flag or `LEASEQ_SCHEMA` may set it).
    pub(crate) fn shown_url(&self) -> String {
        let url = leaseq::redact_url(&self.url);
        match self.options(false).namespace_in(&self.url) {
            Some((kind, name)) => format!("{url} ({kind} {name})"),
            None => url,
        }
    }

    /// The schema or key prefix given, if any.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// Refuses `memory://` for a one-shot command: its queues live in this
    /// process only, so the command would act on an empty queue that
    /// vanishes when it exits.
    pub(crate) fn shared_only(&self) -> Result<(), CliError> {
        let in_process = match leaseq::BackendUrl::parse(&self.url) {
            Ok(leaseq::BackendUrl::Memory) => true,
            Ok(leaseq::BackendUrl::Sqlite(url)) => url.contains(":memory:"),
            _ => false,
        };
        if in_process {
            return Err(CliError::Usage(
                "memory:// lives inside one process: an admin command would see an empty queue \
                 that vanishes when it exits; name a server with --backend or LEASEQ_BACKEND \
                 (redis://…, postgres://… or sqlite://FILE)"
                    .into(),
            ));
        }
        Ok(())
    }
}

pub(crate) async fn run(cli: Cli) -> Result<(), CliError> {
    if cli.schema.is_some() && cli.prefix.is_some() {
        return Err(CliError::Usage(
            "--schema is for PostgreSQL and --prefix for Redis: give one".into(),
        ));
    }
    let shutdown = signals::shutdown_token();
    let target = Target {
        url: cli.backend,
        namespace: cli.schema.or(cli.prefix),
        shutdown: shutdown.clone(),
    };
    let url = &target;
    // Commands that run until a signal handle it themselves; every other
    // one stops where it is.
    let one_shot = match cli.command {
        Command::Demo(args) => return demo::run(url, args, shutdown).await,
        Command::Schedules(cmd) => return schedules::run(url, cmd, shutdown).await,
        Command::Dashboard(args) => return dashboard::run(url, args, shutdown).await,
        Command::Events(args) => return events::events(url, args, shutdown).await,
        one_shot => one_shot,
    };
    interruptible(&shutdown, one_shot_command(url, one_shot)).await
}

/// `work`, or [`CliError::Interrupted`] (exit code 130) as soon as
/// `shutdown` is cancelled; a result ready at that moment wins.
pub(crate) async fn interruptible<T>(
    shutdown: &leaseq::CancellationToken,
    work: impl std::future::Future<Output = Result<T, CliError>>,
) -> Result<T, CliError> {
    tokio::select! {
        biased;
        done = work => done,
        () = shutdown.cancelled() => Err(CliError::Interrupted(
            "interrupted: the command stopped before it finished; \
             what it had already changed stays changed"
                .into(),
        )),
    }
}

async fn one_shot_command(url: &Target, command: Command) -> Result<(), CliError> {
    match command {
        Command::Stats(q) => admin::stats(url, q).await,
        Command::Enqueue(args) => admin::enqueue(url, args).await,
        Command::Peek(args) => admin::peek(url, args).await,
        Command::Item(args) => admin::item(url, args).await,
        Command::Dead(DeadCommand::List(args)) => admin::dead_list(url, args).await,
        Command::Dead(DeadCommand::Redrive(args)) => admin::dead_redrive(url, args).await,
        Command::Reap(q) => admin::reap(url, q).await,
        Command::Remove(args) => admin::remove(url, args).await,
        Command::Purge(args) => admin::purge(url, args).await,
        Command::Cancel(args) => control::cancel(url, args).await,
        Command::Pause(args) => control::pause(url, args).await,
        Command::Resume(args) => control::resume(url, args).await,
        Command::RunNow(args) => control::run_now(url, args).await,
        Command::Workers(args) => workers::workers(url, args).await,
        Command::History(args) => history::history(url, args).await,
        Command::Retention(args) => history::retention(url, args).await,
        Command::Migrate => admin::migrate(url).await,
        Command::Limits(command) => limits::run(url, command).await,
        Command::Demo(_) | Command::Schedules(_) | Command::Dashboard(_) | Command::Events(_) => {
            Err(CliError::Usage(
                "this command runs until interrupted, not once".into(),
            ))
        }
    }
}

//! What can end a command, and the exit code each maps to.

use std::fmt;
use std::process::ExitCode;

use leaseq::{ConnectError, ItemId, QueueName};

/// A command's failure.
#[derive(Debug)]
pub(crate) enum CliError {
    /// Bad input on the command line (a bad URL, queue name or value): 2.
    Usage(String),
    /// The queue holds no items in any state: 3.
    UnknownQueue(String),
    /// The queue holds no item of the id named: 3, like an unknown queue
    /// (the thing named does not exist).
    UnknownItem { queue: String, id: u64 },
    /// The item named is not in the state the command acts on (`wanted`:
    /// Dead for a redrive, Scheduled for run-now), so it changed nothing;
    /// its state, if known: 4.
    WrongState {
        queue: String,
        id: u64,
        wanted: &'static str,
        state: Option<String>,
    },
    /// The backend failed or could not be reached: 1.
    Backend(String),
    /// The demo's verdict failed: 1.
    Verdict(String),
    /// SIGINT or SIGTERM stopped the command: 130.
    Interrupted(String),
}

impl CliError {
    /// `e` from an action on the item `id`: `NotFound` means the queue holds
    /// no such item (exit code 3).
    pub(crate) fn about_item(e: leaseq::Error, queue: &QueueName, id: ItemId) -> Self {
        match e {
            leaseq::Error::NotFound { .. } => CliError::UnknownItem {
                queue: queue.to_string(),
                id: id.get(),
            },
            other => other.into(),
        }
    }

    pub(crate) fn exit_code(&self) -> ExitCode {
        match self {
            CliError::Usage(_) => ExitCode::from(2),
            CliError::UnknownQueue(_) | CliError::UnknownItem { .. } => ExitCode::from(3),
            CliError::WrongState { .. } => ExitCode::from(4),
            CliError::Backend(_) | CliError::Verdict(_) => ExitCode::FAILURE,
            CliError::Interrupted(_) => ExitCode::from(130),
        }
    }
}

/// Every message goes through [`leaseq::redact_secrets`], so no URL's
/// password is printed, whatever the message quotes.
impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = self.text();
        f.write_str(&leaseq::redact_secrets(&text))
    }
}

impl CliError {
    /// The message before redaction.
    fn text(&self) -> String {
        match self {
            CliError::Usage(m)
            | CliError::Backend(m)
            | CliError::Verdict(m)
            | CliError::Interrupted(m) => m.clone(),
            CliError::UnknownQueue(q) => format!(
                "queue {q:?} not found: it holds no items in any state and completed none \
                 (pass --allow-empty to accept an empty queue)"
            ),
            CliError::UnknownItem { queue, id } => format!(
                "item {id} not found in queue {queue:?} (acked, cancelled, removed, purged, or never enqueued there)"
            ),
            CliError::WrongState {
                queue,
                id,
                wanted,
                state,
            } => match state.as_deref() {
                // It got there between the refusal and the look at its state.
                Some(now) if now == *wanted => format!(
                    "item {id} of queue {queue:?} was not {wanted} when asked and is {wanted} now: \
                     nothing changed; run the command again"
                ),
                Some(state) => format!(
                    "item {id} of queue {queue:?} is {state}, not {wanted}: nothing changed{}",
                    state_hint(queue, wanted)
                ),
                None => format!("item {id} of queue {queue:?} is not {wanted}: nothing changed"),
            },
        }
    }
}

/// Where to see the items in the state a command wanted.
fn state_hint(queue: &str, wanted: &str) -> String {
    match wanted {
        "dead" => format!(" (`leaseq dead list {queue}` shows the dead items)"),
        _ => format!(" (`leaseq peek {queue} --state {wanted}` shows the {wanted} items)"),
    }
}

impl From<ConnectError> for CliError {
    fn from(e: ConnectError) -> Self {
        match e {
            ConnectError::BadUrl { .. } | ConnectError::NotCompiled { .. } => {
                CliError::Usage(e.to_string())
            }
            _ => CliError::Backend(e.to_string()),
        }
    }
}

impl From<leaseq::Error> for CliError {
    fn from(e: leaseq::Error) -> Self {
        match e {
            leaseq::Error::InvalidInput { what } => CliError::Usage(what),
            other => {
                let mut text = other.to_string();
                let mut cause = std::error::Error::source(&other);
                while let Some(c) = cause {
                    let next = c.to_string();
                    if !text.contains(&next) {
                        text.push_str(": ");
                        text.push_str(&next);
                    }
                    cause = c.source();
                }
                CliError::Backend(text)
            }
        }
    }
}

//! What can end a command, and the exit code each maps to.

use std::fmt;
use std::process::ExitCode;

use leaseq::ConnectError;

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
    /// The item named is not Dead (its state, if known), so a command for
    /// Dead items changed nothing: 4.
    NotDead {
        queue: String,
        id: u64,
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
    pub(crate) fn exit_code(&self) -> ExitCode {
        match self {
            CliError::Usage(_) => ExitCode::from(2),
            CliError::UnknownQueue(_) | CliError::UnknownItem { .. } => ExitCode::from(3),
            CliError::NotDead { .. } => ExitCode::from(4),
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
                "queue {q:?} not found: it holds no items in any state \
                 (pass --allow-empty to accept an empty queue)"
            ),
            CliError::UnknownItem { queue, id } => format!(
                "item {id} not found in queue {queue:?} (acked, purged, or never enqueued there)"
            ),
            CliError::NotDead { queue, id, state } => match state.as_deref() {
                // It died between the refusal and the look at its state.
                Some("dead") => format!(
                    "item {id} of queue {queue:?} was not dead when asked and is dead now: \
                     nothing changed; run the command again"
                ),
                Some(state) => format!(
                    "item {id} of queue {queue:?} is {state}, not dead: nothing changed \
                     (`leaseq dead list {queue}` shows the dead items)"
                ),
                None => format!("item {id} of queue {queue:?} is not dead: nothing changed"),
            },
        }
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

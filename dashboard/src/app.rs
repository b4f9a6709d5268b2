//! What every route shares: the backend and guard they run with, the
//! error answer a failed call becomes, and reading names and ids from the
//! path.

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use leaseq_core::{Backend, Error, ItemId, QueueName};

use crate::answer::error_body;
use crate::collector::Collector;
use crate::guard::Guard;

/// The routes' state.
#[derive(Clone)]
pub(crate) struct App {
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) guard: Arc<Guard>,
    pub(crate) collector: Arc<Collector>,
}

impl App {
    /// The backend offers the Control group: the page shows its buttons
    /// (pause, cancel, run now) only then.
    pub(crate) fn has_control(&self) -> bool {
        self.backend.groups().control.is_some()
    }

    /// The backend offers the History group: the page shows kept finished
    /// items and retention only then.
    pub(crate) fn has_history(&self) -> bool {
        self.backend.groups().history.is_some()
    }
}

/// A backend or input error, answered with the status its kind calls for.
#[derive(Debug)]
pub(crate) struct ApiError(Error);

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        ApiError(e)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, kind) = match &self.0 {
            Error::InvalidInput { .. } => (StatusCode::BAD_REQUEST, "invalid_input"),
            Error::NotFound { .. } => (StatusCode::NOT_FOUND, "not_found"),
            Error::Unsupported { .. } => (StatusCode::NOT_IMPLEMENTED, "unsupported"),
            Error::Rejected { .. } => (StatusCode::BAD_GATEWAY, "rejected"),
            Error::Unavailable { .. } | Error::Full { .. } => {
                (StatusCode::SERVICE_UNAVAILABLE, "unavailable")
            }
            _ => (StatusCode::BAD_GATEWAY, "backend"),
        };
        // A backend error may quote its URL: never with the password.
        let message = leaseq_core::redact_secrets(&self.0.to_string());
        tracing::warn!(error = %message, "dashboard request failed");
        error_body(status, kind, &message)
    }
}

/// What a route answers: JSON, or the error's JSON.
pub(crate) type ApiResult = Result<Response, ApiError>;

/// The queue a path names, or a 400.
pub(crate) fn queue_name(name: &str) -> Result<QueueName, ApiError> {
    Ok(QueueName::new(name)?)
}

/// The item id a path names, or a 400.
pub(crate) fn item_id(id: &str) -> Result<ItemId, ApiError> {
    Ok(id
        .parse()
        .map_err(|_| Error::invalid(format!("item id {id:?} is not a number")))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn error_answers_never_show_a_password() {
        let e = Error::unavailable(
            "connecting to redis://app:planted-pw@h:1",
            std::io::Error::other("refused"),
        );
        let answer = ApiError(e).into_response();
        assert_eq!(answer.status(), StatusCode::SERVICE_UNAVAILABLE);
        let body = axum::body::to_bytes(answer.into_body(), 1 << 16)
            .await
            .expect("the body");
        let text = String::from_utf8_lossy(&body);
        assert!(!text.contains("planted-pw"), "{text}");
        assert!(text.contains("redis://app:***@h:1"), "{text}");
    }
}

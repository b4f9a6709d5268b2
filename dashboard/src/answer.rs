//! The JSON error answer every handler and the guard give, in one shape.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

/// A JSON error: `{"error": message, "kind": kind}`.
pub(crate) fn error_body(status: StatusCode, kind: &str, message: &str) -> Response {
    (status, Json(json!({ "error": message, "kind": kind }))).into_response()
}

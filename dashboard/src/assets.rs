//! The page and its script and style, compiled into the binary.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

const INDEX: &str = include_str!("../assets/index.html");
const SCRIPT: &str = include_str!("../assets/app.js");
const CHART: &str = include_str!("../assets/chart.js");
const KEPT: &str = include_str!("../assets/kept.js");
const STYLE: &str = include_str!("../assets/app.css");

/// The page, with this process's CSRF token in a `<meta>` tag.
pub(crate) fn page(csrf: &str) -> Response {
    // The token is hex from a UUID: nothing in it needs escaping.
    let html = INDEX.replace("{{CSRF}}", csrf);
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response()
}

/// One asset by name, or 404.
pub(crate) fn file(name: &str) -> Response {
    let (body, kind) = match name {
        "app.js" => (SCRIPT, "text/javascript; charset=utf-8"),
        "chart.js" => (CHART, "text/javascript; charset=utf-8"),
        "kept.js" => (KEPT, "text/javascript; charset=utf-8"),
        "app.css" => (STYLE, "text/css; charset=utf-8"),
        _ => return (StatusCode::NOT_FOUND, "no such asset").into_response(),
    };
    ([(header::CONTENT_TYPE, kind)], body).into_response()
}

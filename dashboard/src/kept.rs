//! The routes for finished items a queue keeps and its retention policy
//! (the backend's History group). Setting the policy is a POST that
//! passes the same guard as redrive and purge.

use axum::extract::{Path, Query, State};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use leaseq_core::{BackendExt as _, Ending, Error, Finished, ItemId, Keep, QueueName, Retention};
use serde::Deserialize;
use serde_json::json;

use crate::app::{queue_name, ApiError, ApiResult, App};
use crate::kept_view::{FinishedView, KeepView, RetentionView};
use crate::paging::{Page, MAX_OFFSET};
use crate::view::{QueueView, LIST_PREVIEW};

pub(crate) fn routes() -> Router<App> {
    Router::new()
        .route("/api/queues/{queue}/finished", get(finished))
        .route(
            "/api/queues/{queue}/retention",
            get(retention).post(set_retention),
        )
}

/// The queue's policy, or `None` when the backend keeps no history.
pub(crate) async fn retention_of(
    app: &App,
    queue: &QueueName,
) -> Result<Option<RetentionView>, ApiError> {
    let Ok(history) = app.backend.history() else {
        return Ok(None);
    };
    Ok(Some(RetentionView::new(&history.retention(queue).await?)))
}

/// The kept item `id`; [`Error::NotFound`] when it is not kept or the
/// backend keeps no history.
pub(crate) async fn finished_item(
    app: &App,
    queue: &QueueName,
    id: ItemId,
) -> Result<Finished, ApiError> {
    let history = app.backend.history().map_err(|_| Error::NotFound { id })?;
    Ok(history.finished_item(queue, id).await?)
}

/// `?ending=completed&offset=100&limit=100`: a page of the kept items.
#[derive(Debug, Deserialize)]
struct FinishedQuery {
    ending: Option<String>,
    offset: Option<usize>,
    limit: Option<usize>,
}

/// A page of the kept items, newest first: `{"queue": counts, "history": bool,
/// "retention": …|null, "offset", "limit", "more", "max_offset",
/// "items": […]}`. A backend without history answers `"history": false`
/// and no items, so the page can say so.
async fn finished(
    State(app): State<App>,
    Path(queue): Path<String>,
    Query(q): Query<FinishedQuery>,
) -> ApiResult {
    let queue = queue_name(&queue)?;
    let ending = match q.ending.as_deref() {
        None | Some("" | "all") => None,
        Some(name) => Some(name.parse::<Ending>()?),
    };
    let page = Page::new(q.offset, q.limit, "kept items")?;
    let now = app.backend.now().await?;
    let stats = app.backend.stats(&queue).await?;
    let (retention, read) = match app.backend.history() {
        Ok(history) => (
            Some(RetentionView::new(&history.retention(&queue).await?)),
            history.finished(&queue, ending, page.want()).await?,
        ),
        Err(_) => (None, Vec::new()),
    };
    let (shown, more) = page.cut(&read);
    let items: Vec<_> = shown
        .iter()
        .map(|f| FinishedView::new(f, LIST_PREVIEW))
        .collect();
    Ok(Json(json!({
        "now_ms": now.as_millis(),
        "queue": QueueView::new(&queue, &stats),
        "history": retention.is_some(),
        "retention": retention,
        "ending": ending.map(Ending::as_str),
        "offset": page.offset,
        "limit": page.limit,
        "more": more,
        "max_offset": MAX_OFFSET,
        "items": items,
    }))
    .into_response())
}

/// `{"history": bool, "retention": …|null}`.
async fn retention(State(app): State<App>, Path(queue): Path<String>) -> ApiResult {
    let queue = queue_name(&queue)?;
    let retention = retention_of(&app, &queue).await?;
    Ok(Json(json!({ "history": retention.is_some(), "retention": retention })).into_response())
}

/// `{"completed": {"max_age_secs": 3600, "max_count": 10000},
/// "cancelled": null}`: an ending left out or `null` keeps nothing; both
/// bounds `null` keep every item of that ending.
#[derive(Debug, Deserialize)]
struct RetentionBody {
    completed: Option<KeepView>,
    cancelled: Option<KeepView>,
    /// Absent: dead letters stay until redriven or removed.
    dead: Option<KeepView>,
}

/// Stores the policy and answers it as stored.
async fn set_retention(
    State(app): State<App>,
    Path(queue): Path<String>,
    Json(body): Json<RetentionBody>,
) -> ApiResult {
    let queue = queue_name(&queue)?;
    let history = app.backend.history()?;
    let keep = |k: Option<KeepView>| k.map_or(Keep::NOTHING, KeepView::keep);
    let policy = Retention {
        completed: keep(body.completed),
        cancelled: keep(body.cancelled),
        dead: body.dead.map_or(Keep::FOREVER, KeepView::keep),
    };
    policy.check()?;
    history.set_retention(&queue, policy).await?;
    let stored = history.retention(&queue).await?;
    Ok(Json(json!({ "history": true, "retention": RetentionView::new(&stored) })).into_response())
}

//! The routes: the page and its assets, and the JSON API the page uses.

use leaseq_core::BackendExt as _;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use leaseq_core::{Backend, Error};
use serde::Deserialize;
use serde_json::json;

use crate::answer::error_body;
use crate::app::{item_id, queue_name, ApiResult, App};
use crate::guard::Guard;
use crate::view::{parse_state, state_name, ItemView, QueueView, ITEM_PREVIEW, LIST_PREVIEW};

/// Items listed per state when the page does not say.
const DEFAULT_LIST: usize = 50;
/// The most items one list request returns.
const MAX_LIST: usize = 500;

pub(crate) fn router(backend: Arc<dyn Backend>, guard: Arc<Guard>) -> Router {
    let app = App {
        backend,
        guard: guard.clone(),
    };
    Router::new()
        .route("/", get(page))
        .route("/assets/{file}", get(asset))
        .route("/api/overview", get(overview))
        .route("/api/queues/{queue}/items", get(items))
        .route("/api/queues/{queue}/items/{id}", get(item).delete(remove))
        .route("/api/queues/{queue}/redrive", post(redrive))
        .route("/api/queues/{queue}/purge", post(purge))
        .merge(crate::control::routes())
        .fallback(not_found)
        .with_state(app)
        .layer(axum::middleware::from_fn_with_state(
            guard,
            crate::guard::check,
        ))
}

async fn page(State(app): State<App>) -> Response {
    crate::assets::page(app.guard.csrf())
}

async fn asset(Path(file): Path<String>) -> Response {
    crate::assets::file(&file)
}

async fn not_found() -> Response {
    error_body(StatusCode::NOT_FOUND, "not_found", "no such page")
}

async fn overview(State(app): State<App>) -> ApiResult {
    let now = app.backend.now().await?;
    let names = app.backend.queues().await?;
    let stats = futures_util::future::join_all(names.iter().map(|q| app.backend.stats(q))).await;
    let mut queues = Vec::with_capacity(names.len());
    for (name, stats) in names.iter().zip(stats) {
        queues.push(QueueView::new(name, &stats?));
    }
    Ok(Json(json!({
        "now_ms": now.as_millis(),
        "control": app.has_control(),
        "queues": queues,
    }))
    .into_response())
}

#[derive(Debug, Deserialize)]
struct ListQuery {
    state: Option<String>,
    limit: Option<usize>,
}

async fn items(
    State(app): State<App>,
    Path(queue): Path<String>,
    Query(q): Query<ListQuery>,
) -> ApiResult {
    let queue = queue_name(&queue)?;
    let state_name = q.state.as_deref().unwrap_or("ready");
    let state = parse_state(state_name).ok_or_else(|| {
        Error::invalid(format!(
            "unknown state {state_name:?}: ready, scheduled, leased or dead"
        ))
    })?;
    let limit = q.limit.unwrap_or(DEFAULT_LIST).min(MAX_LIST);
    let now = app.backend.now().await?;
    let stats = app.backend.stats(&queue).await?;
    let items = app.backend.peek(&queue, state, limit).await?;
    let items: Vec<_> = items
        .iter()
        .map(|i| ItemView::new(i, LIST_PREVIEW))
        .collect();
    Ok(Json(json!({
        "now_ms": now.as_millis(),
        "control": app.has_control(),
        "queue": QueueView::new(&queue, &stats),
        "items": items,
    }))
    .into_response())
}

async fn item(State(app): State<App>, Path((queue, id)): Path<(String, String)>) -> ApiResult {
    let queue = queue_name(&queue)?;
    let id = item_id(&id)?;
    let now = app.backend.now().await?;
    let item = app.backend.item(&queue, id).await?;
    Ok(Json(json!({
        "now_ms": now.as_millis(),
        "control": app.has_control(),
        "item": ItemView::new(&item, ITEM_PREVIEW),
    }))
    .into_response())
}

/// Takes one item out of its queue, whatever its state, and answers the
/// state it was in: `{"removed": "leased"}`. A lease on it is lost.
async fn remove(State(app): State<App>, Path((queue, id)): Path<(String, String)>) -> ApiResult {
    let queue = queue_name(&queue)?;
    let id = item_id(&id)?;
    let was = app.backend.admin()?.remove_item(&queue, id).await?;
    Ok(Json(json!({ "removed": state_name(was) })).into_response())
}

/// `{"id": "42"}` redrives one Dead item, `{"all": true}` every Dead item
/// there was when the call started.
#[derive(Debug, Deserialize)]
struct RedriveBody {
    id: Option<String>,
    #[serde(default)]
    all: bool,
}

async fn redrive(
    State(app): State<App>,
    Path(queue): Path<String>,
    Json(body): Json<RedriveBody>,
) -> ApiResult {
    let queue = queue_name(&queue)?;
    let moved = match (body.id, body.all) {
        (Some(id), false) => {
            let id = item_id(&id)?;
            u64::from(app.backend.admin()?.redrive_item(&queue, id).await?)
        }
        (None, true) => {
            // Only the items Dead now: items dying meanwhile do not make
            // this loop forever.
            let dead = app.backend.stats(&queue).await?.dead;
            let dead = usize::try_from(dead).unwrap_or(usize::MAX);
            app.backend.admin()?.redrive(&queue, dead).await?
        }
        _ => return Err(Error::invalid("give either an item id or all: true").into()),
    };
    Ok(Json(json!({ "moved": moved })).into_response())
}

/// The queue's name typed again, so a stray request cannot purge.
#[derive(Debug, Deserialize)]
struct PurgeBody {
    confirm: String,
}

async fn purge(
    State(app): State<App>,
    Path(queue): Path<String>,
    Json(body): Json<PurgeBody>,
) -> ApiResult {
    let queue = queue_name(&queue)?;
    if body.confirm != queue.as_str() {
        return Err(Error::invalid("to purge, confirm with the queue's exact name").into());
    }
    let deleted = app.backend.admin()?.purge(&queue).await?;
    Ok(Json(json!({ "deleted": deleted })).into_response())
}

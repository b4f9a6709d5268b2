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
use crate::collector::Collector;
use crate::guard::Guard;
use crate::kept_view::FinishedView;
use crate::paging::{Page, MAX_OFFSET};
use crate::view::{parse_state, state_name, ItemView, QueueView, ITEM_PREVIEW, LIST_PREVIEW};

pub(crate) fn router(
    backend: Arc<dyn Backend>,
    guard: Arc<Guard>,
    collector: Arc<Collector>,
) -> Router {
    let app = App {
        backend,
        guard: guard.clone(),
        collector,
    };
    Router::new()
        .route("/", get(page))
        .route("/assets/{file}", get(asset))
        .route("/api/overview", get(overview))
        .route("/api/history", get(history))
        .route("/api/queues/{queue}/items", get(items))
        .route("/api/queues/{queue}/items/{id}", get(item).delete(remove))
        .route("/api/queues/{queue}/redrive", post(redrive))
        .route("/api/queues/{queue}/purge", post(purge))
        .merge(crate::control::routes())
        .merge(crate::kept::routes())
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

/// `?queue=emails` for one queue's samples (all queues together without
/// it), `&after_ms=T` for only those taken after `T`.
#[derive(Debug, Deserialize)]
struct HistoryQuery {
    queue: Option<String>,
    after_ms: Option<u64>,
}

/// The collector's samples, oldest first: `{"every_ms", "capacity",
/// "tracked", "samples": [{"t_ms", "ready", "scheduled", "leased",
/// "dead", "completed"}]}`. `tracked` is false for a queue with no
/// history kept; `completed` counts items completed since the previous
/// sample, `null` without a completion counter (retention off).
async fn history(State(app): State<App>, Query(q): Query<HistoryQuery>) -> ApiResult {
    app.collector.start(&app.backend);
    let queue = q.queue.as_deref().map(queue_name).transpose()?;
    let samples = app.collector.after(queue.as_ref(), q.after_ms);
    Ok(Json(json!({
        "every_ms": u64::try_from(app.collector.every().as_millis()).unwrap_or(u64::MAX),
        "capacity": app.collector.capacity(),
        "tracked": samples.is_some(),
        "samples": samples.unwrap_or_default(),
    }))
    .into_response())
}

/// `?state=dead&offset=100&limit=100`: a page of one state's items.
#[derive(Debug, Deserialize)]
struct ListQuery {
    state: Option<String>,
    offset: Option<usize>,
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
    let page = Page::new(q.offset, q.limit, "items of a state")?;
    let now = app.backend.now().await?;
    let stats = app.backend.stats(&queue).await?;
    let peeked = app.backend.peek(&queue, state, page.want()).await?;
    let (shown, more) = page.cut(&peeked);
    let items: Vec<_> = shown
        .iter()
        .map(|i| ItemView::new(i, LIST_PREVIEW))
        .collect();
    Ok(Json(json!({
        "now_ms": now.as_millis(),
        "control": app.has_control(),
        "queue": QueueView::new(&queue, &stats),
        "retention": crate::kept::retention_of(&app, &queue).await?,
        "offset": page.offset,
        "limit": page.limit,
        "more": more,
        // Paging stops here even when the state holds more.
        "max_offset": MAX_OFFSET,
        "items": items,
    }))
    .into_response())
}

async fn item(State(app): State<App>, Path((queue, id)): Path<(String, String)>) -> ApiResult {
    let queue = queue_name(&queue)?;
    let id = item_id(&id)?;
    let now = app.backend.now().await?;
    let (item, finished) = match app.backend.item(&queue, id).await {
        Ok(item) => (Some(ItemView::new(&item, ITEM_PREVIEW)), None),
        // Out of the queue: finished and kept, or a 404.
        Err(Error::NotFound { .. }) => {
            let kept = crate::kept::finished_item(&app, &queue, id).await?;
            (None, Some(FinishedView::new(&kept, ITEM_PREVIEW)))
        }
        Err(e) => return Err(e.into()),
    };
    Ok(Json(json!({
        "now_ms": now.as_millis(),
        "control": app.has_control(),
        "history": app.has_history(),
        "item": item,
        "finished": finished,
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

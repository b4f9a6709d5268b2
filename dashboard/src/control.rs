//! The routes for control of running work (the backend's Control group)
//! and the live workers (its WorkerRegistry group). Writes are POSTs that
//! pass the same guard as redrive and purge.

use axum::extract::{Path, State};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use leaseq_core::{BackendExt as _, Cancelled, Control, Error, QueueName};
use serde::Deserialize;
use serde_json::json;

use crate::app::{item_id, queue_name, ApiResult, App};
use crate::view::{state_name, WorkerView};

/// Items one `run_all_now` call moves.
const RUN_NOW_BATCH: usize = 1_000;

pub(crate) fn routes() -> Router<App> {
    Router::new()
        .route("/api/workers", get(workers))
        .route("/api/queues/{queue}/pause", post(pause))
        .route("/api/queues/{queue}/resume", post(resume))
        .route("/api/queues/{queue}/run-now", post(run_now))
        .route("/api/queues/{queue}/items/{id}/cancel", post(cancel))
}

/// The live workers, sorted by id: `{"now_ms": …, "workers": […]}`.
async fn workers(State(app): State<App>) -> ApiResult {
    let now = app.backend.now().await?;
    let workers = app.backend.registry()?.workers().await?;
    let workers: Vec<WorkerView> = workers.iter().map(WorkerView::new).collect();
    Ok(Json(json!({ "now_ms": now.as_millis(), "workers": workers })).into_response())
}

/// Pauses the queue; answers `{"paused": true}`.
async fn pause(State(app): State<App>, Path(queue): Path<String>) -> ApiResult {
    let queue = queue_name(&queue)?;
    app.backend.control()?.pause(&queue).await?;
    Ok(Json(json!({ "paused": true })).into_response())
}

/// Resumes the queue; answers `{"paused": false}`.
async fn resume(State(app): State<App>, Path(queue): Path<String>) -> ApiResult {
    let queue = queue_name(&queue)?;
    app.backend.control()?.resume(&queue).await?;
    Ok(Json(json!({ "paused": false })).into_response())
}

/// Cancels one item: `{"cancelled": "now", "was": "ready"}` when it ended
/// at once, `{"cancelled": "requested"}` when its worker is asked to stop.
async fn cancel(State(app): State<App>, Path((queue, id)): Path<(String, String)>) -> ApiResult {
    let queue = queue_name(&queue)?;
    let id = item_id(&id)?;
    let answer = match app.backend.control()?.cancel(&queue, id).await? {
        Cancelled::Now { was } => json!({ "cancelled": "now", "was": state_name(was) }),
        Cancelled::Requested => json!({ "cancelled": "requested" }),
        // A future kind of answer: the backend did cancel.
        _ => json!({ "cancelled": "now" }),
    };
    Ok(Json(answer).into_response())
}

/// `{"id": "42"}` moves one Scheduled item to Ready, `{"all": true}` every
/// item Scheduled when the call started.
#[derive(Debug, Deserialize)]
struct RunNowBody {
    id: Option<String>,
    #[serde(default)]
    all: bool,
}

/// Answers `{"moved": n}`.
async fn run_now(
    State(app): State<App>,
    Path(queue): Path<String>,
    Json(body): Json<RunNowBody>,
) -> ApiResult {
    let queue = queue_name(&queue)?;
    let control = app.backend.control()?;
    let moved = match (body.id, body.all) {
        (Some(id), false) => u64::from(control.run_now(&queue, item_id(&id)?).await?),
        (None, true) => {
            let scheduled = app.backend.stats(&queue).await?.scheduled;
            run_all_now(control, &queue, scheduled).await?
        }
        _ => return Err(Error::invalid("give either an item id or all: true").into()),
    };
    Ok(Json(json!({ "moved": moved })).into_response())
}

/// Batches until one moves nothing or as many moved as were Scheduled at
/// the start: retries a busy queue schedules meanwhile do not keep it
/// going.
async fn run_all_now(
    control: &dyn Control,
    queue: &QueueName,
    scheduled: u64,
) -> leaseq_core::Result<u64> {
    let mut moved = 0;
    while moved < scheduled {
        let n = control.run_all_now(queue, RUN_NOW_BATCH).await?;
        if n == 0 {
            break;
        }
        moved += n;
    }
    Ok(moved)
}

//! How items, counts and times are printed: tables for people, `--json`
//! for scripts, times as RFC 3339 (UTC) with a relative form.

use clap::Args;
use leaseq::{ItemInfo, ItemState, QueueStats, Timestamp};
use serde_json::{json, Value};

/// `--json`: one JSON document on stdout instead of the table.
#[derive(Debug, Args, Clone, Copy)]
pub(crate) struct Output {
    /// Print JSON instead of a table (times as RFC 3339 and epoch ms).
    #[arg(long)]
    pub(crate) json: bool,
}

/// Prints `value` as one line of JSON.
pub(crate) fn print_json(value: &Value) {
    println!("{value}");
}

/// `t` as RFC 3339 in UTC with milliseconds, e.g. `2026-12-06T00:31:47.120Z`.
pub(crate) fn rfc3339(t: Timestamp) -> String {
    let ms = t.as_millis();
    let secs = ms / 1000;
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        ms % 1000
    )
}

/// The proleptic Gregorian date of `days` after 1970-01-01 (Howard
/// Hinnant's `civil_from_days`, for days on or after the epoch).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

/// `t` relative to `now`: `in 3m 20s`, `5s ago`, `now`.
pub(crate) fn relative(t: Timestamp, now: Timestamp) -> String {
    let (ms, future) = if t >= now {
        (t.as_millis() - now.as_millis(), true)
    } else {
        (now.as_millis() - t.as_millis(), false)
    };
    if ms < 1000 {
        return "now".into();
    }
    let s = ms / 1000;
    let span = match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m {}s", s / 60, s % 60),
        3600..=86_399 => format!("{}h {}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d {}h", s / 86_400, s % 86_400 / 3600),
    };
    if future {
        format!("in {span}")
    } else {
        format!("{span} ago")
    }
}

/// `t` as RFC 3339 followed by its relative form.
pub(crate) fn when(t: Timestamp, now: Timestamp) -> String {
    format!("{} ({})", rfc3339(t), relative(t, now))
}

/// A time as JSON: RFC 3339 and epoch milliseconds side by side.
pub(crate) fn time_json(t: Option<Timestamp>) -> (Value, Value) {
    match t {
        Some(t) => (json!(rfc3339(t)), json!(t.as_millis())),
        None => (Value::Null, Value::Null),
    }
}

/// What `due_at` means in `state`.
fn due_label(state: ItemState) -> &'static str {
    match state {
        ItemState::Leased => "lease expires",
        _ => "due",
    }
}

/// One item as JSON: every field, the payload whole (as text, or as hex
/// when it is not UTF-8).
pub(crate) fn item_json(it: &ItemInfo) -> Value {
    let (enqueued, enqueued_ms) = time_json(Some(it.enqueued_at));
    let (due, due_ms) = time_json(it.due_at);
    let (payload, payload_hex) = text_or_hex(&it.payload);
    let (progress, progress_hex) = match &it.progress {
        Some(p) => text_or_hex(p),
        None => (Value::Null, Value::Null),
    };
    json!({
        "id": it.id.to_string(),
        "state": it.state.as_str(),
        "priority": it.priority,
        "attempts": it.attempts,
        "max_attempts": it.max_attempts,
        "dedup_key": it.dedup_key,
        "last_error": it.last_error,
        "enqueued_at": enqueued,
        "enqueued_at_ms": enqueued_ms,
        "due_at": due,
        "due_at_ms": due_ms,
        "payload": payload,
        "payload_hex": payload_hex,
        "progress": progress,
        "progress_hex": progress_hex,
        "cancel_requested": it.cancel_requested,
    })
}

/// Bytes as JSON: as text when UTF-8, else as hex (the other one null).
fn text_or_hex(bytes: &[u8]) -> (Value, Value) {
    match std::str::from_utf8(bytes) {
        Ok(text) => (json!(text), Value::Null),
        Err(_) => (Value::Null, json!(hex(bytes))),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// On stderr (so `--json` stays one document), when a list stopped at its
/// `--limit`: how many were shown of how many (`total`, when known), and
/// how to see the rest. Nothing when the list is whole.
pub(crate) fn note_if_cut(shown: usize, limit: usize, total: Option<u64>, what: &str) {
    if shown < limit || limit == 0 {
        return;
    }
    match total {
        Some(total) if total > shown as u64 => {
            eprintln!("(the first {shown} of {total} {what}; `--limit {total}` shows them all)")
        }
        Some(_) => {}
        None => eprintln!("({shown} {what} shown, the --limit; there may be more: raise --limit)"),
    }
}

/// Items as a table (payloads cut to 40 characters), or a JSON array.
pub(crate) fn items(items: &[ItemInfo], now: Timestamp, out: Output) {
    if out.json {
        print_json(&Value::Array(items.iter().map(item_json).collect()));
        return;
    }
    if items.is_empty() {
        println!("(no items)");
        return;
    }
    println!(
        "{:>10} {:<9} {:>8} {:>8} {:>12} {:>14}  {:<40} last error",
        "id", "state", "attempts", "priority", "enqueued", "due/expires", "payload"
    );
    for it in items {
        // A leased item an operator asked to cancel: marked, with a legend.
        let state = if it.cancel_requested {
            format!("{}!", it.state.as_str())
        } else {
            it.state.as_str().to_owned()
        };
        println!(
            "{:>10} {:<9} {:>8} {:>8} {:>12} {:>14}  {:<40} {}",
            it.id.to_string(),
            state,
            format!("{}/{}", it.attempts, it.max_attempts),
            it.priority,
            relative(it.enqueued_at, now),
            it.due_at
                .map_or_else(|| "-".to_owned(), |t| relative(t, now)),
            shorten(&String::from_utf8_lossy(&it.payload), 40),
            it.last_error.as_deref().unwrap_or("")
        );
    }
    if items.iter().any(|it| it.cancel_requested) {
        println!("! cancel requested: the item ends Cancelled when its lease ends");
    }
}

/// One item whole, a field per line.
pub(crate) fn item(queue: &str, it: &ItemInfo, now: Timestamp, out: Output) {
    if out.json {
        let mut v = item_json(it);
        v["queue"] = json!(queue);
        print_json(&v);
        return;
    }
    println!("{:<14} {queue}", "queue");
    println!("{:<14} {}", "id", it.id);
    println!("{:<14} {}", "state", it.state.as_str());
    println!("{:<14} {}/{}", "attempts", it.attempts, it.max_attempts);
    println!("{:<14} {}", "priority", it.priority);
    println!("{:<14} {}", "enqueued", when(it.enqueued_at, now));
    if let Some(due) = it.due_at {
        println!("{:<14} {}", due_label(it.state), when(due, now));
    }
    if let Some(key) = &it.dedup_key {
        println!("{:<14} {key}", "dedup key");
    }
    if let Some(e) = &it.last_error {
        println!("{:<14} {e}", "last error");
    }
    if let Some(p) = &it.progress {
        match std::str::from_utf8(p) {
            Ok(text) => println!("{:<14} {text}", "progress"),
            Err(_) => println!(
                "{:<14} ({} bytes, not UTF-8, as hex) {}",
                "progress",
                p.len(),
                hex(p)
            ),
        }
    }
    if it.cancel_requested {
        println!(
            "{:<14} requested: its worker stops the handler, and the item ends cancelled \
             when the lease ends",
            "cancel"
        );
    }
    match std::str::from_utf8(&it.payload) {
        Ok(text) => println!("{:<14} ({} bytes)\n{text}", "payload", it.payload.len()),
        Err(_) => println!(
            "{:<14} ({} bytes, not UTF-8, as hex)\n{}",
            "payload",
            it.payload.len(),
            hex(&it.payload)
        ),
    }
}

/// A queue's counts as JSON.
pub(crate) fn stats_json(queue: &str, stats: &QueueStats) -> Value {
    let mut v = json!({
        "queue": queue,
        "total": stats.total(),
        "paused": stats.paused,
        "completed": stats.completed,
    });
    for state in ItemState::ALL {
        v[state.as_str()] = json!(stats.get(state));
    }
    v
}

/// `s` on one line, cut to `max` characters.
pub(crate) fn shorten(s: &str, max: usize) -> String {
    let flat: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if flat.chars().count() <= max {
        return flat;
    }
    let cut: String = flat.chars().take(max.saturating_sub(1)).collect();
    format!("{cut}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_as_rfc_3339_in_utc() {
        assert_eq!(
            rfc3339(Timestamp::from_millis(0)),
            "1970-01-01T00:00:00.000Z"
        );
        // 2000-02-29 (a leap day in a year divisible by 400).
        assert_eq!(
            rfc3339(Timestamp::from_millis(951_782_400_000 + 3_723_004)),
            "2000-02-29T01:02:03.004Z"
        );
        assert_eq!(
            rfc3339(Timestamp::from_millis(1_764_979_907_120)),
            "2025-12-06T00:11:47.120Z"
        );
        assert_eq!(
            rfc3339(Timestamp::from_millis(4_107_542_399_999)),
            "2100-02-28T23:59:59.999Z"
        );
    }

    #[test]
    fn relative_times_say_ago_or_in() {
        let now = Timestamp::from_millis(1_000_000_000);
        let at = |delta: i64| Timestamp::from_millis((1_000_000_000 + delta) as u64);
        assert_eq!(relative(at(0), now), "now");
        assert_eq!(relative(at(-999), now), "now");
        assert_eq!(relative(at(-5_000), now), "5s ago");
        assert_eq!(relative(at(200_000), now), "in 3m 20s");
        assert_eq!(relative(at(-7_500_000), now), "2h 5m ago");
        assert_eq!(relative(at(90_000_000), now), "in 1d 1h");
    }
}

//! Reading the plans of the backend's own statements: the text it
//! prepared, and the nodes of `EXPLAIN (FORMAT JSON)` for it.

use leaseq_postgres::PgBackend;
use sqlx::{PgConnection, Row};

/// The partial index of each state.
pub const STATE_INDEXES: [&str; 4] = [
    "leaseq_items_ready",
    "leaseq_items_scheduled",
    "leaseq_items_leased",
    "leaseq_items_dead",
];

/// One node of an `EXPLAIN (FORMAT JSON)` plan: its type and the relation,
/// index and index condition it names.
#[derive(Debug, Default)]
pub struct Node {
    pub kind: String,
    pub relation: Option<String>,
    pub index: Option<String>,
    pub cond: Option<String>,
}

/// The JSON string after `"key": ` in `text`, unescaped.
fn field(text: &str, key: &str) -> Option<String> {
    let start = text.find(&format!("\"{key}\": \""))? + key.len() + 5;
    let mut out = String::new();
    let mut chars = text[start..].chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(out),
            '\\' => out.extend(chars.next()),
            c => out.push(c),
        }
    }
    None
}

/// Every node of the plan. A node's own fields come before its children
/// (`"Plans"`), so the text from one `"Node Type"` to the next is that
/// node's.
pub fn nodes(plan: &str) -> Vec<Node> {
    let marker = "\"Node Type\": ";
    let starts: Vec<usize> = plan.match_indices(marker).map(|(i, _)| i).collect();
    starts
        .iter()
        .enumerate()
        .map(|(k, &i)| {
            let chunk = &plan[i..starts.get(k + 1).copied().unwrap_or(plan.len())];
            Node {
                kind: field(chunk, "Node Type").unwrap_or_default(),
                relation: field(chunk, "Relation Name"),
                index: field(chunk, "Index Name"),
                cond: field(chunk, "Index Cond"),
            }
        })
        .collect()
}

/// A backend on a pool of one connection, so the statements it prepared
/// can be read back from that session's `pg_prepared_statements`.
pub struct OneConnection {
    pub backend: PgBackend,
    pub schema: String,
}

impl OneConnection {
    /// A backend on one connection in a fresh schema, dropped with it;
    /// `None` (after the skip line) when no server is reachable.
    pub async fn new(tag: &str) -> Option<Self> {
        if !super::server_or_skip().await {
            return None;
        }
        let schema = super::fresh_schema(tag);
        let backend = PgBackend::connect(&super::url(), super::options(&schema).max_connections(1))
            .await
            .expect("connect");
        Some(OneConnection { backend, schema })
    }
}

impl Drop for OneConnection {
    fn drop(&mut self) {
        super::drop_schema_blocking(self.schema.clone());
    }
}

/// The text of the statement the backend prepared that contains `marker`.
pub async fn prepared(b: &PgBackend, marker: &str) -> String {
    let rows =
        sqlx::query("SELECT statement FROM pg_prepared_statements WHERE strpos(statement, $1) > 0")
            .bind(marker)
            .fetch_all(b.pool())
            .await
            .expect("pg_prepared_statements");
    assert_eq!(rows.len(), 1, "statements containing {marker:?}");
    rows[0].get(0)
}

/// The plan of `sql` (prepared with `types`, executed with `args`) under
/// `mode` (`force_custom_plan` or `force_generic_plan`).
pub async fn plan(
    c: &mut PgConnection,
    sql: &str,
    types: &str,
    args: &str,
    mode: &str,
) -> Vec<Node> {
    sqlx::raw_sql(&format!(
        "SET plan_cache_mode = {mode}; PREPARE guard({types}) AS {sql}"
    ))
    .execute(&mut *c)
    .await
    .expect("prepare");
    let row = sqlx::raw_sql(&format!("EXPLAIN (FORMAT JSON) EXECUTE guard({args})"))
        .fetch_one(&mut *c)
        .await
        .expect("explain");
    let json: String = row.try_get_unchecked(0).expect("plan text");
    sqlx::raw_sql("DEALLOCATE guard")
        .execute(&mut *c)
        .await
        .expect("deallocate");
    let found = nodes(&json);
    assert!(!found.is_empty(), "no nodes in {json}");
    found
}

pub fn no_table_scan(found: &[Node], what: &str) {
    assert!(
        !found
            .iter()
            .any(|n| n.kind == "Seq Scan" && n.relation.as_deref() == Some("leaseq_items")),
        "{what} scans all of leaseq_items: {found:#?}"
    );
}

/// Fails unless `index` is walked exactly once, with a condition that
/// starts the walk where the last batch stopped (`from`).
pub fn walks_once_from(found: &[Node], index: &str, from: &str, what: &str) {
    let walks: Vec<&Node> = found
        .iter()
        .filter(|n| n.index.as_deref() == Some(index))
        .collect();
    assert!(
        walks.len() == 1 && walks[0].cond.as_deref().is_some_and(|c| c.contains(from)),
        "{what}: {index} is not walked once from the last batch's key ({from}): {found:#?}"
    );
}

pub fn uses(found: &[Node], index: &str, what: &str) {
    assert!(
        found.iter().any(|n| n.index.as_deref() == Some(index)),
        "{what} does not use {index}: {found:#?}"
    );
}

/// Fails unless the plan finds its rows through the primary key, with no
/// scan of the table and no walk of any index in `avoid`.
pub fn by_primary_key(found: &[Node], avoid: &[&str], what: &str) {
    no_table_scan(found, what);
    uses(found, "leaseq_items_pkey", what);
    for index in avoid {
        assert!(
            !found.iter().any(|n| n.index.as_deref() == Some(index)),
            "{what} walks {index}: {found:#?}"
        );
    }
}

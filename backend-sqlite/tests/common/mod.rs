//! Shared by the integration tests: a backend on a fresh file in a
//! temporary directory, and the conformance factory.
#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use leaseq_sqlite::{SqliteBackend, SqliteOptions};

/// Options for a test backend.
pub fn options() -> SqliteOptions {
    SqliteOptions::new()
        .test_hooks(true)
        .poll_interval(Duration::from_millis(100))
}

/// The URL of the file at `path`.
pub fn url(path: &Path) -> String {
    format!("sqlite://{}", path.display())
}

/// A backend on `path`.
pub async fn open(path: &Path) -> SqliteBackend {
    SqliteBackend::connect(&url(path), options())
        .await
        .expect("open the database file")
}

/// A fresh database file in its own temporary directory, removed on drop.
pub struct TestDb {
    pub backend: SqliteBackend,
    pub path: PathBuf,
    _dir: tempfile::TempDir,
}

impl TestDb {
    pub async fn new() -> TestDb {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("jobs.db");
        let backend = open(&path).await;
        TestDb {
            backend,
            path,
            _dir: dir,
        }
    }
}

/// A conformance factory: a fresh file per check (in-memory when
/// `memory`), optionally sharded. The directories go with the factory.
#[derive(Debug, Default)]
pub struct Factory {
    shards: Option<u16>,
    memory: bool,
    dirs: std::sync::Mutex<Vec<tempfile::TempDir>>,
}

impl Factory {
    /// Plain queues on a file.
    pub fn new() -> Self {
        Factory::default()
    }

    /// Plain queues on `sqlite::memory:`.
    pub fn memory() -> Self {
        Factory {
            memory: true,
            ..Factory::default()
        }
    }

    /// Each logical queue sharded over `k` physical queues, on a file.
    pub fn sharded(k: u16) -> Self {
        Factory {
            shards: Some(k),
            ..Factory::default()
        }
    }

    /// A plain backend on a fresh file (or in memory).
    pub async fn backend(&self) -> Result<SqliteBackend, String> {
        let url = if self.memory {
            "sqlite::memory:".to_owned()
        } else {
            let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
            let url = url(&dir.path().join("conf.db"));
            self.dirs
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(dir);
            url
        };
        SqliteBackend::connect(&url, options())
            .await
            .map_err(|e| format!("cannot open {url}: {e}"))
    }
}

#[async_trait::async_trait]
impl leaseq_conformance::BackendFactory for Factory {
    fn name(&self) -> &str {
        match (self.shards, self.memory) {
            (Some(_), _) => "sqlite sharded",
            (None, true) => "sqlite memory",
            (None, false) => "sqlite",
        }
    }

    async fn backend(
        &self,
    ) -> Result<leaseq_conformance::TestBackend, leaseq_conformance::Unavailable> {
        let backend = Factory::backend(self)
            .await
            .map_err(leaseq_conformance::Unavailable)?;
        let backend: Arc<dyn leaseq_core::Backend> = match self.shards {
            None => Arc::new(backend),
            Some(k) => Arc::new(
                leaseq_core::layer::shard::Sharded::new(backend, k)
                    .map_err(|e| leaseq_conformance::Unavailable(e.to_string()))?,
            ),
        };
        Ok(leaseq_conformance::TestBackend::real(backend))
    }
}

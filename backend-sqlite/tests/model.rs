//! The reference model against SQLite on its own clock, a fresh file per
//! sequence: 64 sequences in CI, `LEASEQ_MODEL_CASES` for more. Leases and
//! delays are long; the test hooks make them run out.

mod common;

use leaseq_conformance::model::{check_model, ModelConfig};
use leaseq_conformance::runner::conclude;
use leaseq_conformance::BackendFactory;

#[test]
fn sqlite_matches_the_model() {
    let factory = common::Factory::new();
    let config = ModelConfig::from_env(64)
        .max_steps(40)
        .sweep_every(4)
        .regressions("proptest-regressions/model_sqlite.txt");
    conclude("model", factory.name(), check_model(&factory, &config));
}

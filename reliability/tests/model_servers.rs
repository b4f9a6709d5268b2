//! The reference model against Redis (both clients) and PostgreSQL on their
//! own clocks: 64 sequences each in CI, `LEASEQ_MODEL_CASES` for more. Leases
//! and delays are long; the test hooks make them run out.

use leaseq_conformance::model::{check_model, ModelConfig};
use leaseq_conformance::runner::conclude;
use leaseq_conformance::BackendFactory;
use leaseq_reliability::factories::{PgFactory, RedisClient, RedisFactory};

fn config(regressions: &'static str) -> ModelConfig {
    ModelConfig::from_env(64)
        .max_steps(40)
        .sweep_every(4)
        .regressions(regressions)
}

fn run<F: BackendFactory>(factory: F, regressions: &'static str) {
    let name = factory.name().to_owned();
    conclude("model", &name, check_model(&factory, &config(regressions)));
}

#[test]
fn redis_rs_matches_the_model() {
    run(
        RedisFactory::new(RedisClient::RedisRs),
        "proptest-regressions/model_redis_rs.txt",
    );
}

#[test]
fn fred_matches_the_model() {
    run(
        RedisFactory::new(RedisClient::Fred),
        "proptest-regressions/model_fred.txt",
    );
}

#[test]
fn postgres_matches_the_model() {
    run(
        PgFactory::new("model"),
        "proptest-regressions/model_postgres.txt",
    );
}

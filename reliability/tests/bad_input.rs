//! Hostile input at every entry point, on every backend: a typed error or a
//! documented clamp, nothing written by a rejected call, no panic.

use leaseq_conformance::runner::{block_on, conclude};
use leaseq_conformance::BackendFactory;
use leaseq_reliability::factories::{MemoryFactory, PgFactory, RedisClient, RedisFactory};
use leaseq_reliability::hostile::{hostile_input, nul_text};

fn run<F: BackendFactory>(factory: F) {
    let name = factory.name().to_owned();
    conclude("hostile_input", &name, block_on(hostile_input(&factory)));
}

#[test]
fn memory_refuses_hostile_input() {
    run(MemoryFactory);
}

#[test]
fn redis_rs_refuses_hostile_input() {
    run(RedisFactory::new(RedisClient::RedisRs));
}

#[test]
fn fred_refuses_hostile_input() {
    run(RedisFactory::new(RedisClient::Fred));
}

#[test]
fn postgres_refuses_hostile_input() {
    run(PgFactory::new("hostile"));
}

#[test]
fn memory_stores_nul_text() {
    conclude("nul_text", "memory", block_on(nul_text(&MemoryFactory)));
}

#[test]
fn redis_stores_nul_text() {
    for client in RedisClient::ALL {
        let f = RedisFactory::new(client);
        conclude("nul_text", client.name(), block_on(nul_text(&f)));
    }
}

#[test]
fn postgres_stores_nul_text() {
    conclude(
        "nul_text",
        "postgres",
        block_on(nul_text(&PgFactory::new("nul"))),
    );
}

//! Sharding for Redis: the core's generic [`Sharded`] layer over the Redis
//! backend. Each shard's keys carry their own hash tag `{prefix:queue:i}`,
//! so on Redis Cluster shards land in different slots and, in general, on
//! different masters.

pub use leaseq_core::layer::shard::{
    sharded_id, split_id, ShardNamer, ShardParser, Sharded, MAX_SHARDS,
};

use crate::RedisBackend;

/// The generic sharding layer, under the name this crate has always used.
pub type ShardedBackend<B> = Sharded<B>;

/// A [`Sharded`] queue over the Redis backend.
pub type ShardedRedisBackend<C> = Sharded<RedisBackend<C>>;

//! Removal of a test's Redis keys. leaseq keys look like
//! `{prefix:queue}:…`, so a test that works under a prefix of its own
//! leaves nothing behind once every key matching `{prefix:*` is deleted.

/// Deletes every key under `prefix` on the server at `url` (best effort:
/// an unreachable server deletes nothing).
pub fn delete_prefix(url: &str, prefix: &str) {
    let Ok(client) = redis::Client::open(url) else {
        return;
    };
    let Ok(mut conn) = client.get_connection() else {
        return;
    };
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{{{prefix}:*"))
        .query(&mut conn)
        .unwrap_or_default();
    for chunk in keys.chunks(500) {
        let _: redis::RedisResult<i64> = redis::cmd("DEL").arg(chunk).query(&mut conn);
    }
}

/// Deletes the keys of `prefix` on the server at `url` when dropped.
#[derive(Debug)]
pub struct PrefixGuard {
    /// The server.
    pub url: String,
    /// The key prefix.
    pub prefix: String,
}

impl Drop for PrefixGuard {
    fn drop(&mut self) {
        delete_prefix(&self.url, &self.prefix);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redis_server::PrivateRedis;

    #[test]
    fn only_the_prefix_goes() {
        let s = match PrivateRedis::start_volatile() {
            Ok(s) => s,
            Err(e) => return crate::env::skip("a private redis-server", e),
        };
        for k in ["{mine:q}:a", "{mine:q}:b", "{other:q}:a"] {
            s.command(&["SET", k, "1"]).expect("set");
        }
        drop(PrefixGuard {
            url: s.url(),
            prefix: "mine".into(),
        });
        assert_eq!(
            s.command(&["DBSIZE"]).expect("dbsize"),
            redis::Value::Int(1)
        );
    }
}

//! `redis+cluster://` and `rediss+cluster://` URLs: a list of seed nodes
//! in one string (over TLS for the second).

/// The scheme of a cluster URL.
pub(crate) const SCHEME: &str = "redis+cluster://";

/// The scheme of a cluster URL whose nodes speak TLS.
pub(crate) const TLS_SCHEME: &str = "rediss+cluster://";

/// The scheme of `url` (before `://`), lowercased; empty when it has none.
fn scheme(url: &str) -> String {
    url.trim_start()
        .split_once("://")
        .map_or(String::new(), |(s, _)| s.to_ascii_lowercase())
}

/// True when `url` is a cluster URL (`redis+cluster://`,
/// `rediss+cluster://`), whether or not it names any node.
pub(crate) fn is_cluster_url(url: &str) -> bool {
    matches!(scheme(url).as_str(), "redis+cluster" | "rediss+cluster")
}

/// True when `url` asks for TLS: its scheme is `rediss` or any other that
/// a client reads as TLS (`rediss+cluster`, `rediss-cluster`, `valkeys`…).
/// Such a URL must never be dialled in plaintext.
pub(crate) fn wants_tls(url: &str) -> bool {
    let s = scheme(url);
    s.starts_with("rediss") || s.starts_with("valkeys")
}

/// The part of a cluster URL after its scheme, and the scheme of its seed
/// URLs (`redis://` or `rediss://`).
fn split_cluster(url: &str) -> Option<(&str, &'static str)> {
    let url = url.trim_start();
    let (scheme, rest) = url.split_once("://")?;
    match scheme.to_ascii_lowercase().as_str() {
        "redis+cluster" => Some((rest, "redis://")),
        "rediss+cluster" => Some((rest, "rediss://")),
        _ => None,
    }
}

/// The seed node URLs (`redis://[auth@]host:port`, or `rediss://…` for a
/// `rediss+cluster://` URL) a cluster URL names; empty when `url` is not a
/// cluster URL or names no node.
pub(crate) fn seeds_of(url: &str) -> Vec<String> {
    let Some((rest, seed_scheme)) = split_cluster(url) else {
        return Vec::new();
    };
    let rest = rest.trim_end_matches('/');
    let (auth, hosts) = match rest.rsplit_once('@') {
        Some((auth, hosts)) => (format!("{auth}@"), hosts),
        None => (String::new(), rest),
    };
    hosts
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(|h| format!("{seed_scheme}{auth}{h}"))
        .collect()
}

/// A cluster URL for seed node URLs (their schemes dropped):
/// `rediss+cluster://` when any seed asks for TLS, else `redis+cluster://`.
pub(crate) fn url_of(seeds: &[String]) -> String {
    let hosts: Vec<&str> = seeds
        .iter()
        .map(|s| {
            s.split_once("://")
                .map_or(s.as_str(), |(_, rest)| rest)
                .trim_end_matches('/')
        })
        .collect();
    let scheme = if seeds.iter().any(|s| wants_tls(s)) {
        TLS_SCHEME
    } else {
        SCHEME
    };
    format!("{scheme}{}", hosts.join(","))
}

/// `(host, port)` of a seed URL, for clients that take them apart.
#[cfg_attr(not(feature = "fred"), allow(dead_code))]
pub(crate) fn host_port(seed: &str) -> Option<(String, u16)> {
    let rest = seed.split_once("://").map_or(seed, |(_, r)| r);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
    let rest = rest.split('/').next().unwrap_or(rest);
    let (host, port) = rest.rsplit_once(':')?;
    Some((host.to_owned(), port.parse().ok()?))
}

/// `(user, password)` of a seed URL, if it carries any.
#[cfg_attr(not(feature = "fred"), allow(dead_code))]
pub(crate) fn credentials(seed: &str) -> (Option<String>, Option<String>) {
    let rest = seed.split_once("://").map_or(seed, |(_, r)| r);
    match rest.rsplit_once('@') {
        Some((auth, _)) => match auth.split_once(':') {
            Some(("", p)) => (None, Some(p.to_owned())),
            Some((u, p)) => (Some(u.to_owned()), Some(p.to_owned())),
            None => (Some(auth.to_owned()), None),
        },
        None => (None, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_urls_list_their_seeds() {
        assert_eq!(
            seeds_of("redis+cluster://a:1,b:2/"),
            ["redis://a:1", "redis://b:2"]
        );
        assert_eq!(seeds_of("redis+cluster://u:p@a:1"), ["redis://u:p@a:1"]);
        assert!(seeds_of("redis://a:1").is_empty());
        assert!(seeds_of("redis+cluster://").is_empty());
        let seeds = vec!["redis://a:1".to_owned(), "redis://b:2".to_owned()];
        assert_eq!(url_of(&seeds), "redis+cluster://a:1,b:2");
    }

    #[test]
    fn tls_cluster_urls_list_tls_seeds() {
        assert_eq!(
            seeds_of("rediss+cluster://u:p@a:1,b:2"),
            ["rediss://u:p@a:1", "rediss://u:p@b:2"]
        );
        assert_eq!(seeds_of("REDISS+CLUSTER://a:1"), ["rediss://a:1"]);
        let seeds = vec!["rediss://a:1".to_owned(), "rediss://b:2".to_owned()];
        assert_eq!(url_of(&seeds), "rediss+cluster://a:1,b:2");
        assert!(is_cluster_url("rediss+cluster://"));
        assert!(!is_cluster_url("rediss://a:1"));
    }

    #[test]
    fn tls_is_read_from_the_scheme() {
        for url in [
            "rediss://h:1",
            "REDISS://h:1",
            "rediss+cluster://h:1",
            "rediss-cluster://h:1",
            "valkeys://h:1",
        ] {
            assert!(wants_tls(url), "{url}");
        }
        for url in ["redis://h:1", "redis+cluster://h:1", "h:1", "unix:///s"] {
            assert!(!wants_tls(url), "{url}");
        }
    }

    #[test]
    fn seeds_split_into_host_port_and_credentials() {
        assert_eq!(host_port("redis://u:p@h:7000"), Some(("h".into(), 7000)));
        assert_eq!(host_port("redis://h"), None);
        assert_eq!(
            credentials("redis://u:p@h:1"),
            (Some("u".into()), Some("p".into()))
        );
        assert_eq!(credentials("redis://:p@h:1"), (None, Some("p".into())));
        assert_eq!(credentials("redis://h:1"), (None, None));
    }
}

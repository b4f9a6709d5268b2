//! `redis+cluster://` URLs: a list of seed nodes in one string.

/// The scheme of a cluster URL.
pub(crate) const SCHEME: &str = "redis+cluster://";

/// The seed node URLs (`redis://[auth@]host:port`) a cluster URL names;
/// empty when `url` is not a cluster URL or names no node.
pub(crate) fn seeds_of(url: &str) -> Vec<String> {
    let Some(rest) = url.strip_prefix(SCHEME) else {
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
        .map(|h| format!("redis://{auth}{h}"))
        .collect()
}

/// A cluster URL for seed node URLs (their `redis://` schemes dropped).
pub(crate) fn url_of(seeds: &[String]) -> String {
    let hosts: Vec<&str> = seeds
        .iter()
        .map(|s| {
            s.strip_prefix("redis://")
                .unwrap_or(s)
                .trim_end_matches('/')
        })
        .collect();
    format!("{SCHEME}{}", hosts.join(","))
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

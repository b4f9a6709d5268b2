//! Secrets out of printed text: the one place that hides the password of a
//! backend URL before the URL reaches an error, a log line, a banner or an
//! API answer.
//!
//! ```
//! use leaseq_core::redact::{redact_secrets, redact_url};
//! assert_eq!(redact_url("redis://app:s3cret@cache:6379/0"), "redis://app:***@cache:6379/0");
//! assert_eq!(
//!     redact_secrets("cannot reach postgres://app:s3cret@db/jobs: timed out"),
//!     "cannot reach postgres://app:***@db/jobs: timed out"
//! );
//! ```

/// What a hidden secret is shown as.
pub const MASK: &str = "***";

/// Query parameters whose value is a secret (`?password=…`).
const SECRET_PARAMS: &[&str] = &["password", "pass", "sslpassword", "token", "auth_token"];

/// `url` with its secrets replaced by [`MASK`]: the password of the
/// userinfo (`scheme://user:password@host`, also of each seed of a cluster
/// URL such as `redis+cluster://u:p@a:1,u:p@b:2`), and the value of a
/// `password`, `pass`, `sslpassword`, `token` or `auth_token` query
/// parameter. A user name alone is kept; a URL without secrets comes back
/// unchanged.
pub fn redact_url(url: &str) -> String {
    let Some(sep) = url.find("://") else {
        return url.to_string();
    };
    let (head, rest) = url.split_at(sep + 3);
    let query_at = rest.find(['?', '#']).unwrap_or(rest.len());
    let (before_query, query) = rest.split_at(query_at);
    let mut out = String::with_capacity(url.len());
    out.push_str(head);
    match before_query.rfind('@') {
        Some(at) => out.push_str(&redact_authority(before_query, at)),
        None => out.push_str(before_query),
    }
    out.push_str(&redact_query(query));
    out
}

/// Every URL found in `text` (a `scheme://` up to the next whitespace)
/// passed through [`redact_url`]; the rest of the text is kept. For error
/// messages that quote a URL, whoever wrote them.
pub fn redact_secrets(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut done = 0;
    let mut search = 0;
    while let Some(found) = text[search..].find("://") {
        let sep = search + found;
        let start = text[..sep]
            .char_indices()
            .rev()
            .take_while(|(_, c)| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
            .last()
            .map_or(sep, |(i, _)| i);
        let end = text[sep..]
            .find(char::is_whitespace)
            .map_or(text.len(), |i| sep + i);
        if start >= done {
            out.push_str(&text[done..start]);
            out.push_str(&redact_url(&text[start..end]));
            done = end;
        }
        search = end.max(sep + 3);
    }
    out.push_str(&text[done..]);
    out
}

/// `user:password@host…` (or a cluster's `u:p@a,u:p@b`) with the
/// passwords masked; `at` is the last `@` of `authority_and_path`.
fn redact_authority(authority_and_path: &str, at: usize) -> String {
    let host_end = authority_and_path[at..]
        .find('/')
        .map_or(authority_and_path.len(), |i| at + i);
    let (authority, path) = authority_and_path.split_at(host_end);
    let seeds: Vec<&str> = authority.split(',').collect();
    if seeds.len() > 1 && seeds.iter().all(|s| s.matches('@').count() == 1) {
        let masked: Vec<String> = seeds
            .iter()
            .map(|s| {
                let at = s.rfind('@').unwrap_or(0);
                mask_userinfo(&s[..at], &s[at..])
            })
            .collect();
        return format!("{}{path}", masked.join(","));
    }
    mask_userinfo(&authority_and_path[..at], &authority_and_path[at..])
}

/// `userinfo` + `tail` (which starts at the `@`), the password masked.
fn mask_userinfo(userinfo: &str, tail: &str) -> String {
    match userinfo.split_once(':') {
        Some((user, _password)) => format!("{user}:{MASK}{tail}"),
        None => format!("{userinfo}{tail}"),
    }
}

/// `?a=1&password=x#frag` with secret values masked.
fn redact_query(query: &str) -> String {
    let Some(params) = query.strip_prefix('?') else {
        return query.to_string();
    };
    let (params, fragment) = match params.find('#') {
        Some(i) => params.split_at(i),
        None => (params, ""),
    };
    let masked: Vec<String> = params
        .split('&')
        .map(|kv| match kv.split_once('=') {
            Some((k, _)) if SECRET_PARAMS.iter().any(|s| s.eq_ignore_ascii_case(k)) => {
                format!("{k}={MASK}")
            }
            _ => kv.to_string(),
        })
        .collect();
    format!("?{}{fragment}", masked.join("&"))
}

#[cfg(test)]
mod tests {
    use super::{redact_secrets, redact_url};

    #[test]
    fn the_password_of_the_userinfo_is_masked_and_the_user_kept() {
        for (url, shown) in [
            ("redis://user:pw@h:6379", "redis://user:***@h:6379"),
            ("redis://:pw@h:6379/2", "redis://:***@h:6379/2"),
            ("rediss://u:p%40ss@h", "rediss://u:***@h"),
            (
                "postgres://app:pw@db:5432/jobs?sslmode=require",
                "postgres://app:***@db:5432/jobs?sslmode=require",
            ),
            // Unencoded `@` and `/` in the password hide nothing of it.
            ("redis://u:p@w/d@h:1/0", "redis://u:***@h:1/0"),
        ] {
            assert_eq!(redact_url(url), shown, "{url}");
            assert!(!redact_url(url).contains("pw"), "{url}");
        }
    }

    #[test]
    fn urls_without_a_secret_are_unchanged() {
        for url in [
            "memory://",
            "redis://127.0.0.1:6379",
            "postgres://app@db/jobs",
            "sqlite:///var/lib/jobs.db",
            "sqlite::memory:",
            "not a url",
        ] {
            assert_eq!(redact_url(url), url);
        }
    }

    #[test]
    fn each_seed_of_a_cluster_url_is_masked() {
        assert_eq!(
            redact_url("redis+cluster://u:pw1@a:1,u:pw2@b:2"),
            "redis+cluster://u:***@a:1,u:***@b:2"
        );
        // Credentials on the first seed only.
        let shown = redact_url("redis+cluster://u:pw@a:1,b:2");
        assert_eq!(shown, "redis+cluster://u:***@a:1,b:2");
        // A comma in the password does not split it into seeds.
        let shown = redact_url("redis://u:p,w@h:1");
        assert_eq!(shown, "redis://u:***@h:1");
    }

    #[test]
    fn secret_query_parameters_are_masked() {
        assert_eq!(
            redact_url("postgres://db/jobs?user=app&password=pw&sslmode=require"),
            "postgres://db/jobs?user=app&password=***&sslmode=require"
        );
        assert_eq!(
            redact_url("postgres://db/x?PASSWORD=pw#f"),
            "postgres://db/x?PASSWORD=***#f"
        );
    }

    #[test]
    fn urls_inside_text_are_masked_wherever_they_stand() {
        let text = "bad url \"redis://u:pw@h:1\": connecting to rediss://:pw@h:2 failed; \
                    see https://example.com/docs (postgres://a:pw@db/x)";
        let shown = redact_secrets(text);
        assert!(!shown.contains("pw"), "{shown}");
        assert_eq!(
            shown,
            "bad url \"redis://u:***@h:1\": connecting to rediss://:***@h:2 failed; \
             see https://example.com/docs (postgres://a:***@db/x)"
        );
        assert_eq!(redact_secrets("no url here: a://"), "no url here: a://");
        assert_eq!(redact_secrets("://u:pw@h"), "://u:***@h");
        assert_eq!(redact_secrets("é redis://u:pw@h é"), "é redis://u:***@h é");
    }
}

//! Who may talk to the dashboard, and which requests may change the store:
//! the token, the loopback host rule, CSRF, and the security headers every
//! response carries.

use std::sync::Arc;

use axum::extract::{Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

/// The cookie that carries the token after `/?token=…`.
const COOKIE: &str = "leaseq_dashboard";
/// The header a state-changing request carries the page's CSRF token in.
pub(crate) const CSRF_HEADER: &str = "x-csrf-token";
/// Scripts and styles only from this origin, no inline script, no frames.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                   img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
                   form-action 'none'; frame-ancestors 'none'";

/// The token (if any) and this process's CSRF token.
#[derive(Debug)]
pub(crate) struct Guard {
    token: Option<String>,
    csrf: String,
}

#[derive(Debug, Deserialize)]
struct TokenQuery {
    token: Option<String>,
}

impl Guard {
    pub(crate) fn new(token: Option<String>) -> Self {
        Self {
            token,
            csrf: uuid::Uuid::new_v4().simple().to_string(),
        }
    }

    /// The token the page sends back with every POST.
    pub(crate) fn csrf(&self) -> &str {
        &self.csrf
    }

    /// Who is asking: `None` lets the request through.
    fn refuse(&self, req: &Request) -> Option<Response> {
        let headers = req.headers();
        match &self.token {
            Some(token) => {
                let presented = bearer(headers).or_else(|| cookie(headers, COOKIE));
                if !presented.is_some_and(|p| same(p.as_bytes(), token.as_bytes())) {
                    return Some(refusal(
                        req,
                        StatusCode::UNAUTHORIZED,
                        "this dashboard needs its token: open /?token=<token> once",
                    ));
                }
            }
            None => {
                let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
                if !host.is_some_and(is_loopback_host) {
                    return Some(refusal(
                        req,
                        StatusCode::FORBIDDEN,
                        "this dashboard answers only to a loopback host name \
                         (127.0.0.1, localhost, [::1]); set a token to serve others",
                    ));
                }
            }
        }
        if is_write(req.method()) {
            return self.refuse_write(req);
        }
        None
    }

    /// CSRF: a write must come from this dashboard's own page.
    fn refuse_write(&self, req: &Request) -> Option<Response> {
        let headers = req.headers();
        let json = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        let csrf_ok = headers
            .get(CSRF_HEADER)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| same(v.as_bytes(), self.csrf.as_bytes()));
        let site_ok = headers
            .get("sec-fetch-site")
            .and_then(|v| v.to_str().ok())
            .is_none_or(|v| v == "same-origin");
        let origin_ok = match headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
            None => true,
            Some(origin) => {
                let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
                let origin_host = origin
                    .strip_prefix("http://")
                    .or_else(|| origin.strip_prefix("https://"));
                host.is_some() && origin_host == host
            }
        };
        if json && csrf_ok && site_ok && origin_ok {
            None
        } else {
            Some(refusal(
                req,
                StatusCode::FORBIDDEN,
                "a change must come from the dashboard's own page (CSRF check failed)",
            ))
        }
    }
}

/// The middleware: the token or host rule, `/?token=` to set the cookie,
/// CSRF on writes, and the security headers on every answer.
pub(crate) async fn check(State(guard): State<Arc<Guard>>, req: Request, next: Next) -> Response {
    if let Some(login) = login(&guard, &req) {
        return with_headers(login);
    }
    if let Some(refused) = guard.refuse(&req) {
        return with_headers(refused);
    }
    with_headers(next.run(req).await)
}

/// `/?token=<token>`: the right token sets the cookie and drops the token
/// from the address bar; a wrong one is refused.
fn login(guard: &Guard, req: &Request) -> Option<Response> {
    let expected = guard.token.as_ref()?;
    if req.uri().path() != "/" {
        return None;
    }
    let Ok(Query(TokenQuery { token: Some(given) })) = Query::try_from_uri(req.uri()) else {
        return None;
    };
    if !same(given.as_bytes(), expected.as_bytes()) {
        return Some(refusal(
            req,
            StatusCode::UNAUTHORIZED,
            "wrong dashboard token",
        ));
    }
    // Behind a TLS proxy the cookie is kept to HTTPS. The header only
    // ever narrows where the cookie goes, so trusting it costs nothing.
    let secure = if forwarded_https(req.headers()) {
        "; Secure"
    } else {
        ""
    };
    let cookie = format!("{COOKIE}={given}; Path=/; HttpOnly; SameSite=Strict{secure}");
    let mut response = Redirect::to("/").into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    Some(response)
}

/// A proxy says the browser came over HTTPS (`X-Forwarded-Proto: https`).
fn forwarded_https(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"))
}

fn with_headers(mut response: Response) -> Response {
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// A refusal as JSON for the API, as text for a page.
fn refusal(req: &Request, status: StatusCode, message: &str) -> Response {
    if req.uri().path().starts_with("/api/") {
        crate::answer::error_body(status, "forbidden", message)
    } else {
        (status, message.to_owned()).into_response()
    }
}

fn is_write(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
}

fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find_map(|(k, v)| (k == name).then_some(v))
}

/// `host[:port]` names this machine.
fn is_loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        host.rsplit_once(':').map_or(host, |(name, _)| name)
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Equality whose time does not depend on where the inputs differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_are_recognised_and_others_are_not() {
        for ok in [
            "127.0.0.1:7373",
            "localhost:1",
            "LOCALHOST",
            "[::1]:80",
            "127.9.9.9",
        ] {
            assert!(is_loopback_host(ok), "{ok}");
        }
        for bad in [
            "evil.example:7373",
            "10.0.0.1:7373",
            "localhost.evil.example",
            "[::2]:1",
            "",
        ] {
            assert!(!is_loopback_host(bad), "{bad}");
        }
    }

    #[test]
    fn tokens_compare_by_content_and_length() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"abcd"));
    }
}

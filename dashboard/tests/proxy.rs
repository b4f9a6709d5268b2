//! The dashboard behind a TLS proxy in token mode, as docs/operations.md
//! configures it: the proxy passes the browser's Host and says the request
//! came over HTTPS. Writes from the page pass the origin check, the login
//! cookie is kept to HTTPS, and a proxy that rewrites Host breaks writes
//! (which is why the docs set it).

mod support;

use support::http::{csrf, send, start, with_items};

const TOKEN: &str = "a-token-long-enough-1234";

#[tokio::test]
async fn behind_an_https_proxy_the_cookie_is_secure_and_writes_pass() {
    let (backend, q) = with_items(1).await;
    let (addr, _stop) = start(backend.clone(), Some(TOKEN)).await;
    let host = "Host: queues.example.com";
    let https = "X-Forwarded-Proto: https";

    let login = send(addr, "GET", &format!("/?token={TOKEN}"), &[host, https], "").await;
    let cookie = login.header("set-cookie").expect("cookie");
    assert!(cookie.contains("; Secure"), "{cookie}");
    let plain = send(addr, "GET", &format!("/?token={TOKEN}"), &[host], "").await;
    let cookie = plain.header("set-cookie").expect("cookie");
    assert!(
        !cookie.contains("Secure"),
        "plain HTTP keeps it usable: {cookie}"
    );

    let bearer = format!("Authorization: Bearer {TOKEN}");
    let token = csrf(addr, &[host, &bearer]).await;
    let csrf_header = format!("x-csrf-token: {token}");
    let json = "Content-Type: application/json";
    let body = r#"{"confirm":"jobs"}"#;
    let origin = "Origin: https://queues.example.com";
    let purge = |forwarded: Vec<String>| {
        let mut headers = forwarded;
        headers.extend([
            bearer.clone(),
            json.into(),
            csrf_header.clone(),
            origin.into(),
        ]);
        async move {
            let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
            send(addr, "POST", "/api/queues/jobs/purge", &headers, body).await
        }
    };
    // A proxy that sends its upstream's address as Host: the browser's
    // Origin no longer matches, and the write is refused.
    let r = purge(vec![format!("Host: {addr}")]).await;
    assert_eq!(r.status, 403, "{}", r.body);
    assert_eq!(backend.stats(&q).await.expect("stats").total(), 1);
    // The browser's Host passed on: the same write goes through.
    let r = purge(vec![host.into(), https.into()]).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(backend.stats(&q).await.expect("stats").total(), 0);
}

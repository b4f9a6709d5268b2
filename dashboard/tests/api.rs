//! The JSON API and its guards, over plain HTTP: the token and loopback
//! rules, CSRF on writes, the purge confirmation, removing one item, and
//! backend errors as JSON with their kind.

mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use leaseq::layer::fault::{Fault, Faults, Op};
use leaseq::{Backend, ClaimSpec, Error, MemoryBackend, NewItem, QueueName};
use leaseq_dashboard::{BindError, Dashboard};
use support::http::{csrf, send, start, with_items};

const TOKEN: &str = "a-token-long-enough-1234";

#[tokio::test]
async fn a_non_loopback_address_needs_a_long_enough_token() {
    let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    let any: SocketAddr = "0.0.0.0:0".parse().expect("addr");
    let err = Dashboard::new(backend.clone())
        .bind(any)
        .await
        .expect_err("no token");
    assert!(matches!(err, BindError::TokenRequired { .. }), "{err}");
    let err = Dashboard::new(backend.clone())
        .token("short")
        .bind(any)
        .await
        .expect_err("weak token");
    assert!(matches!(err, BindError::WeakToken), "{err}");
    let bound = Dashboard::new(backend)
        .token(TOKEN)
        .bind(any)
        .await
        .expect("bind");
    assert!(!bound.local_addr().ip().is_loopback());
}

#[tokio::test]
async fn without_a_token_only_loopback_host_names_are_answered() {
    let (backend, _) = with_items(1).await;
    let (addr, _stop) = start(backend, None).await;
    let evil = send(
        addr,
        "GET",
        "/api/queues/jobs/items",
        &["Host: evil.example:7373"],
        "",
    )
    .await;
    assert_eq!(evil.status, 403, "{}", evil.body);
    assert_eq!(evil.json()["kind"], "forbidden");
    let local = send(
        addr,
        "GET",
        "/api/queues/jobs/items",
        &["Host: localhost:7373"],
        "",
    )
    .await;
    assert_eq!(local.status, 200, "{}", local.body);
}

#[tokio::test]
async fn a_write_needs_the_page_csrf_token_json_and_this_origin() {
    let (backend, q) = with_items(3).await;
    let (addr, _stop) = start(backend.clone(), None).await;
    let token = csrf(addr, &[]).await;
    let csrf_header = format!("x-csrf-token: {token}");
    let own_origin = format!("Origin: http://{addr}");
    let body = r#"{"confirm":"jobs"}"#;
    let json = "Content-Type: application/json";
    let refused: Vec<(&str, Vec<&str>)> = vec![
        ("no CSRF token", vec![json]),
        ("a wrong CSRF token", vec![json, "x-csrf-token: 0000"]),
        (
            "a form post",
            vec![
                "Content-Type: application/x-www-form-urlencoded",
                &csrf_header,
            ],
        ),
        (
            "another origin",
            vec![json, &csrf_header, "Origin: http://evil.example"],
        ),
        (
            "a cross-site fetch",
            vec![json, &csrf_header, "Sec-Fetch-Site: cross-site"],
        ),
    ];
    for (what, headers) in refused {
        let r = send(addr, "POST", "/api/queues/jobs/purge", &headers, body).await;
        assert_eq!(r.status, 403, "{what}: {}", r.body);
        assert_eq!(
            backend.stats(&q).await.expect("stats").total(),
            3,
            "{what} purged"
        );
    }
    let r = send(
        addr,
        "POST",
        "/api/queues/jobs/purge",
        &[
            json,
            &csrf_header,
            &own_origin,
            "Sec-Fetch-Site: same-origin",
        ],
        body,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["deleted"], 3);
    assert_eq!(backend.stats(&q).await.expect("stats").total(), 0);
}

#[tokio::test]
async fn purge_needs_the_queue_name_typed_again() {
    let (backend, q) = with_items(2).await;
    let (addr, _stop) = start(backend.clone(), None).await;
    let token = csrf(addr, &[]).await;
    let csrf_header = format!("x-csrf-token: {token}");
    let r = send(
        addr,
        "POST",
        "/api/queues/jobs/purge",
        &["Content-Type: application/json", &csrf_header],
        r#"{"confirm":"job"}"#,
    )
    .await;
    assert_eq!(
        (r.status, r.json()["kind"].as_str()),
        (400, Some("invalid_input"))
    );
    assert_eq!(backend.stats(&q).await.expect("stats").total(), 2);
}

#[tokio::test]
async fn remove_takes_one_item_out_and_its_lease_with_it() {
    let (backend, q) = with_items(3).await;
    let spec = ClaimSpec::new(1, Duration::from_secs(60)).expect("spec");
    let claimed = backend.claim(&q, spec).await.expect("claim");
    let lease = &claimed.leases[0];
    let (addr, _stop) = start(backend.clone(), None).await;
    let token = csrf(addr, &[]).await;
    let csrf_header = format!("x-csrf-token: {token}");
    let write = ["Content-Type: application/json", csrf_header.as_str()];
    let path = format!("/api/queues/jobs/items/{}", lease.id());

    // A write like any other: without the page's token nothing is removed.
    let r = send(
        addr,
        "DELETE",
        &path,
        &["Content-Type: application/json"],
        "{}",
    )
    .await;
    assert_eq!(r.status, 403, "{}", r.body);
    assert_eq!(backend.stats(&q).await.expect("stats").total(), 3);

    let r = send(addr, "DELETE", &path, &write, "{}").await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["removed"], "leased");
    let err = backend
        .ack(&lease.key)
        .await
        .expect_err("the lease went with it");
    assert!(matches!(err, Error::LeaseLost { .. }), "{err}");
    let stats = backend.stats(&q).await.expect("stats");
    assert_eq!((stats.ready, stats.leased), (2, 0));

    // Gone: a second remove and a read are both 404, and the rest is intact.
    let r = send(addr, "DELETE", &path, &write, "{}").await;
    assert_eq!(
        (r.status, r.json()["kind"].as_str()),
        (404, Some("not_found"))
    );
    let r = send(addr, "GET", &path, &[], "").await;
    assert_eq!(r.status, 404, "{}", r.body);
    let r = send(addr, "DELETE", "/api/queues/jobs/items/abc", &write, "{}").await;
    assert_eq!(
        (r.status, r.json()["kind"].as_str()),
        (400, Some("invalid_input"))
    );
    assert_eq!(backend.stats(&q).await.expect("stats").ready, 2);
}

#[tokio::test]
async fn with_a_token_every_request_carries_it_and_the_login_sets_a_cookie() {
    let (backend, _) = with_items(1).await;
    let (addr, _stop) = start(backend, Some(TOKEN)).await;
    let path = "/api/queues/jobs/items";
    // A token also frees the dashboard from the loopback host rule.
    let host = "Host: queues.example.internal";
    assert_eq!(send(addr, "GET", path, &[host], "").await.status, 401);
    assert_eq!(send(addr, "GET", "/", &[host], "").await.status, 401);
    let bearer = format!("Authorization: Bearer {TOKEN}");
    assert_eq!(
        send(addr, "GET", path, &[host, &bearer], "").await.status,
        200
    );
    let wrong = send(addr, "GET", "/?token=not-the-token-at-all", &[host], "").await;
    assert_eq!(wrong.status, 401);
    let login = send(addr, "GET", &format!("/?token={TOKEN}"), &[host], "").await;
    assert_eq!((login.status, login.header("location")), (303, Some("/")));
    let cookie = login.header("set-cookie").expect("cookie");
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let pair = cookie.split(';').next().expect("pair");
    let with_cookie = format!("Cookie: theme=dark; {pair}");
    assert_eq!(
        send(addr, "GET", path, &[host, &with_cookie], "")
            .await
            .status,
        200
    );
    // A write still needs the page's CSRF token, token or not.
    let r = send(
        addr,
        "POST",
        "/api/queues/jobs/purge",
        &[host, &with_cookie, "Content-Type: application/json"],
        r#"{"confirm":"jobs"}"#,
    )
    .await;
    assert_eq!(r.status, 403);
}

#[tokio::test]
async fn backend_errors_and_bad_input_are_json_with_their_kind() {
    let faults = Arc::new(Faults::new(
        Arc::new(MemoryBackend::new()) as Arc<dyn Backend>
    ));
    let q = QueueName::new("jobs").expect("queue");
    faults
        .enqueue(&q, vec![NewItem::new("x")])
        .await
        .expect("enqueue");
    let (addr, _stop) = start(faults.clone(), None).await;

    let r = send(addr, "GET", "/api/queues/jobs/items/999", &[], "").await;
    assert_eq!(
        (r.status, r.json()["kind"].as_str()),
        (404, Some("not_found"))
    );
    let r = send(addr, "GET", "/api/queues/jobs/items?state=gone", &[], "").await;
    assert_eq!(
        (r.status, r.json()["kind"].as_str()),
        (400, Some("invalid_input"))
    );
    let r = send(addr, "GET", "/api/queues/jobs/items/abc", &[], "").await;
    assert_eq!(r.status, 400);
    let r = send(addr, "GET", "/api/queues/no%20spaces%00/items", &[], "").await;
    assert_eq!(r.status, 400, "{}", r.body);

    faults.inject(Op::Stats, Fault::Refuse, u32::MAX);
    let r = send(addr, "GET", "/api/queues/jobs/items", &[], "").await;
    assert_eq!(
        (r.status, r.json()["kind"].as_str()),
        (503, Some("unavailable"))
    );
    assert!(r.json()["error"].as_str().is_some_and(|e| !e.is_empty()));
}

#[tokio::test]
async fn every_answer_carries_a_strict_content_security_policy() {
    let (backend, _) = with_items(1).await;
    let (addr, _stop) = start(backend, None).await;
    for path in ["/", "/assets/app.js", "/api/queues/jobs/items", "/nowhere"] {
        let r = send(addr, "GET", path, &[], "").await;
        let csp = r.header("content-security-policy").expect("csp");
        assert!(
            csp.contains("script-src 'self'") && !csp.contains("unsafe"),
            "{path}: {csp}"
        );
        assert_eq!(
            r.header("x-content-type-options"),
            Some("nosniff"),
            "{path}"
        );
    }
}

#[tokio::test]
async fn items_show_payloads_cut_to_a_preview_and_ids_as_strings() {
    let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    let q = QueueName::new("big").expect("queue");
    backend
        .enqueue(&q, vec![NewItem::new(vec![b'y'; 300_000])])
        .await
        .expect("enqueue");
    let (addr, _stop) = start(backend, None).await;
    let list = send(addr, "GET", "/api/queues/big/items?state=ready", &[], "")
        .await
        .json();
    let item = &list["items"][0];
    assert!(item["id"].is_string());
    assert_eq!(item["payload"]["bytes"], 300_000);
    assert_eq!(item["payload"]["truncated"], true);
    assert_eq!(
        item["payload"]["text"].as_str().map(str::len),
        Some(leaseq_dashboard::LIST_PREVIEW)
    );
    let id = item["id"].as_str().expect("id");
    let one = send(addr, "GET", &format!("/api/queues/big/items/{id}"), &[], "")
        .await
        .json();
    assert_eq!(
        one["item"]["payload"]["text"].as_str().map(str::len),
        Some(leaseq_dashboard::ITEM_PREVIEW)
    );
}

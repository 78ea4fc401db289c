//! The reverse proxy matches routes on the normalised path, as nginx locations do, and
//! forwards that path: `/app/../internal` is `/internal` (never the `/app/` route, whose
//! upstream might normalise it and serve `/internal`), dot segments resolved, `//`
//! collapsed, escapes of unreserved characters decoded; what cannot be normalised (`..`
//! above the root, an encoded `/` or `\`) is 400 and reaches no upstream. Header names with
//! `_` are dropped unless `[proxy] underscores_in_headers = true` (nginx's default: an
//! upstream that maps `-` and `_` alike would read `Content_Length` as `Content-Length`).

mod common;

use common::*;

/// A proxy with `/app/` routed to `app` and everything else to `other`.
fn two_routes(app: &Upstream, other: &Upstream, top: &str) -> Server {
    let (dir, cfg) = config_file(&format!(
        "listen = \"127.0.0.1:0\"\nworkers = 1\n[proxy]\n{top}\n\
         [[proxy.upstream]]\nname = \"app\"\nservers = [\"{}\"]\n\
         [[proxy.upstream]]\nname = \"other\"\nservers = [\"{}\"]\n\
         [[proxy.route]]\nprefix = \"/app/\"\nupstream = \"app\"\n\
         [[proxy.route]]\nprefix = \"/\"\nupstream = \"other\"\n",
        app.addr, other.addr
    ));
    let root = TempDir::new("proxy-paths-root");
    let args: Vec<String> = vec!["serve".into(), root.str(), "--config".into(), cfg];
    let mut s = launch(&args, &[], None).unwrap_or_else(|e| panic!("proxy did not start: {e:?}"));
    s.keep = vec![dir, root];
    s
}

/// The request line an upstream received.
fn line(seen: &Seen) -> &str {
    seen.head.lines().next().unwrap_or("")
}

#[test]
fn routes_match_and_forward_the_normalised_path() {
    let app = Upstream::ok("app");
    let other = Upstream::ok("other");
    let p = two_routes(&app, &other, "");
    let get = |target: &str| {
        let r = p.request(format!("GET {target} HTTP/1.1\r\nHost: t\r\n\r\n"));
        (r.status, r.text())
    };
    // (target, the pool that must answer, the request line it must receive)
    for (target, pool, want) in [
        ("/app/x", "app", "GET /app/x HTTP/1.1"),
        ("/app/../internal", "other", "GET /internal HTTP/1.1"),
        ("/app/%2e%2e/internal", "other", "GET /internal HTTP/1.1"),
        (
            "/app/%2E./internal?q=../x",
            "other",
            "GET /internal?q=../x HTTP/1.1",
        ),
        ("//app//./x/", "app", "GET /app/x/ HTTP/1.1"),
        ("/%61pp/%7Euser", "app", "GET /app/~user HTTP/1.1"),
        ("/app/a%20b/c/..", "app", "GET /app/a%20b/ HTTP/1.1"),
        ("/app", "other", "GET /app HTTP/1.1"),
        ("/x/../app/y", "app", "GET /app/y HTTP/1.1"),
    ] {
        let before = (app.requests().len(), other.requests().len());
        let (status, body) = get(target);
        assert_eq!((status, body.as_str()), (200, pool), "{target}");
        let seen = match pool {
            "app" => app.requests()[before.0].clone(),
            _ => other.requests()[before.1].clone(),
        };
        assert_eq!(line(&seen), want, "{target}");
    }
    // Cannot be normalised: 400 at the proxy, nothing upstream.
    let before = app.requests().len() + other.requests().len();
    for target in [
        "/../internal",
        "/app/../../internal",
        "/app/..%2Finternal",
        "/app/%2f",
        "/app/..%5Cinternal",
        "/app/%00",
    ] {
        assert_eq!(get(target).0, 400, "{target}");
    }
    assert_eq!(app.requests().len() + other.requests().len(), before);
}

#[test]
fn header_names_with_underscores_are_dropped_unless_allowed() {
    let head = "GET /x HTTP/1.1\r\nHost: t\r\nContent_Length: 5\r\nTransfer_Encoding: chunked\r\nX_Custom: 1\r\nX-Fine: 2\r\n\r\n";
    for (top, kept) in [("", false), ("underscores_in_headers = true", true)] {
        let app = Upstream::ok("app");
        let other = Upstream::ok("other");
        let p = two_routes(&app, &other, top);
        assert_eq!(p.request(head).status, 200);
        let seen = &other.requests()[0];
        assert_eq!(seen.header_all("X-Fine"), ["2"], "{}", seen.head);
        for name in ["Content_Length", "Transfer_Encoding", "X_Custom"] {
            assert_eq!(
                !seen.header_all(name).is_empty(),
                kept,
                "{name} with '{top}': {}",
                seen.head
            );
        }
    }
}

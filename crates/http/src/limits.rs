//! Protocol limits and timeouts. Defaults are peers' defaults; each names its source, and
//! `gearshift-core`'s defaults module re-exports them so all defaults sit in one place.

/// Size limits applied while parsing a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Longest request line (method SP target SP version) before 414.
    /// nginx: large_client_header_buffers 4 8k (a request line must fit one 8 KiB buffer).
    pub max_request_line: usize,
    /// Largest request head (request line + headers + CRLF) before 431.
    /// Issue 3 asks for 8 KiB by default (nginx's client_header_buffer_size/large buffer).
    pub max_head: usize,
    /// Most header fields before 431. Apache LimitRequestFields default 100.
    pub max_headers: usize,
    /// Largest request body in bytes before 413. nginx client_max_body_size default 1m.
    pub max_body: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_request_line: 8 * 1024,
            max_head: 8 * 1024,
            max_headers: 100,
            max_body: 1024 * 1024,
        }
    }
}

/// Timeouts in milliseconds; the connection machine turns them into deadlines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// From the first byte of a request head to its end (slow-loris guard).
    /// nginx client_header_timeout 60s; Apache RequestReadTimeout header=20-40; we take 20 s.
    pub header_ms: u64,
    /// Between two body reads. nginx client_body_timeout 60s.
    pub body_ms: u64,
    /// Idle keep-alive connection. nginx keepalive_timeout 75s; Apache KeepAliveTimeout 5s.
    /// We take nginx's 75 s: idle connections cost no read buffer here.
    pub keepalive_ms: u64,
    /// Between two successful writes of a response. nginx send_timeout 60s.
    pub send_ms: u64,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            header_ms: 20_000,
            body_ms: 60_000,
            keepalive_ms: 75_000,
            send_ms: 60_000,
        }
    }
}

//! The FastCGI handler's configuration (`[fastcgi]`), owned beside the handler.

use gearshift_core::config::positive;
use gearshift_core::defaults;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct FastCgiConfig {
    /// The application server: `IP:PORT`, `unix:/path` or `/path`; empty = off.
    pub backend: String,
    /// File name suffixes sent to the backend (nginx `location ~ \.php$`).
    pub extensions: Vec<String>,
    /// URL path prefixes whose paths all go to the backend.
    pub dirs: Vec<String>,
    /// Requests in flight at the backend at once; more get 503.
    pub max_connections: usize,
    /// Idle connections kept open per process for reuse (0: one connection per request).
    pub keepalive: usize,
    pub connect_timeout_ms: u64,
    /// Inactivity timeout while waiting for the backend's answer (504 before its head).
    pub read_timeout_ms: u64,
    /// Inactivity timeout while sending the request to the backend.
    pub send_timeout_ms: u64,
    /// `auto`: share connections among concurrent requests when the backend says it can
    /// (FCGI_MPXS_CONNS=1); `off`: one request per connection at a time.
    pub multiplex: String,
    /// Requests in flight on one multiplexed connection; 0: the backend's FCGI_MAX_REQS,
    /// at most 50. Never more than the backend announces.
    pub multiplex_requests: usize,
    /// Multiplexed connections per process, per event loop on the event engine (never more
    /// than the backend's FCGI_MAX_CONNS).
    pub multiplex_connections: usize,
    /// Read the whole request body (memory, then a temporary file) before the backend is
    /// involved, so a slow client holds no backend (nginx `*_request_buffering on`).
    pub request_buffering: bool,
    /// Hold a response the client reads slower than the backend writes (memory, then a
    /// temporary file), so the backend is released when it is done (nginx `*_buffering`).
    pub response_buffering: bool,
    /// Request body bytes kept in memory before a temporary file (`client_body_buffer_size`).
    pub request_buffer_bytes: u64,
    /// Response bytes held in memory before a temporary file (`*_buffers`).
    pub response_buffer_bytes: u64,
    /// Largest temporary file of a held response; past it the response goes on as the client
    /// reads (`*_max_temp_file_size`).
    pub max_temp_file_bytes: u64,
    /// A script found beneath the root is trusted this long before it is opened again
    /// (0: opened on every request).
    pub script_check_ms: u64,
}

impl Default for FastCgiConfig {
    fn default() -> Self {
        let b = crate::stream::spool::Buffering::default();
        use defaults::fastcgi as d;
        FastCgiConfig {
            backend: String::new(),
            extensions: Vec::new(),
            dirs: Vec::new(),
            max_connections: d::MAX_CONNECTIONS,
            keepalive: d::KEEPALIVE,
            connect_timeout_ms: d::CONNECT_TIMEOUT_MS,
            read_timeout_ms: d::READ_TIMEOUT_MS,
            send_timeout_ms: d::SEND_TIMEOUT_MS,
            multiplex: d::MULTIPLEX.to_string(),
            multiplex_requests: 0,
            multiplex_connections: d::MUX_CONNECTIONS,
            request_buffering: b.request,
            response_buffering: b.response,
            request_buffer_bytes: b.request_buffer_bytes,
            response_buffer_bytes: b.response_buffer_bytes,
            max_temp_file_bytes: b.max_temp_file_bytes,
            script_check_ms: d::SCRIPT_CHECK_MS,
        }
    }
}

impl FastCgiConfig {
    /// The buffering settings of this section.
    pub fn buffering(&self) -> crate::stream::spool::Buffering {
        crate::stream::spool::Buffering {
            request: self.request_buffering,
            response: self.response_buffering,
            request_buffer_bytes: self.request_buffer_bytes,
            response_buffer_bytes: self.response_buffer_bytes,
            max_temp_file_bytes: self.max_temp_file_bytes,
        }
    }

    /// Check the `[fastcgi]` section; the error is one line naming the option.
    pub fn validate(&self) -> Result<(), String> {
        self.buffering().validate("fastcgi")?;
        let f = self;
        positive("fastcgi.max_connections", f.max_connections as u64)?;
        positive("fastcgi.connect_timeout_ms", f.connect_timeout_ms)?;
        positive("fastcgi.read_timeout_ms", f.read_timeout_ms)?;
        positive("fastcgi.send_timeout_ms", f.send_timeout_ms)?;
        positive(
            "fastcgi.multiplex_connections",
            f.multiplex_connections as u64,
        )?;
        if f.multiplex != "auto" && f.multiplex != "off" {
            return Err(format!(
                "fastcgi.multiplex: '{}' is neither \"auto\" nor \"off\"",
                f.multiplex
            ));
        }
        if !f.backend.is_empty() {
            super::FastCgiBackend::parse(&f.backend)
                .map_err(|e| format!("fastcgi.backend: {e}"))?;
        }
        for d in &f.dirs {
            if !d.starts_with('/') || d.split('/').any(|s| s == "." || s == "..") {
                return Err(format!("fastcgi.dirs: '{d}' is not an absolute URL path"));
            }
        }
        for e in &f.extensions {
            if !e.starts_with('.') || e.len() < 2 || e.contains('/') {
                return Err(format!(
                    "fastcgi.extensions: '{e}' is not a suffix like '.php'"
                ));
            }
        }
        Ok(())
    }
}

//! The HTTP and log sections of the configuration (`[http]`, `[log]`): read by the engines
//! (limits, timeouts, keep-alive), the handlers (limits) and the runtime (the log sink), so
//! they sit below all three. `positive` is the one check every section's `validate` uses.

use crate::accesslog::LogFormat;
use crate::defaults;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    pub max_request_line: usize,
    pub max_head: usize,
    pub max_headers: usize,
    pub max_body: u64,
    pub header_timeout_ms: u64,
    /// Longest a head may take however fast it comes (mod_reqtimeout header=20-40).
    pub header_timeout_max_ms: u64,
    /// How long a new connection may stay silent.
    pub first_byte_timeout_ms: u64,
    /// Bytes per second a head earns time at and a body must keep (0 = no rate).
    pub min_rate: u64,
    /// A body's initial time before its rate counts (mod_reqtimeout body=20).
    pub body_rate_timeout_ms: u64,
    pub body_timeout_ms: u64,
    pub keepalive_timeout_ms: u64,
    /// Idle and head timeouts while the engine is under pressure.
    pub pressure_timeout_ms: u64,
    pub send_timeout_ms: u64,
    /// Requests per keep-alive connection before it is closed.
    pub keepalive_requests: u64,
    /// Every connection starts with a PROXY protocol header (v1 or v2) from a load
    /// balancer; connections without one are refused (400).
    pub proxy_protocol: bool,
    /// Networks (`10.0.0.0/8`, `::1`) whose PROXY headers and `X-Forwarded-For` are
    /// believed for the client's address (access log, CGI's REMOTE_ADDR, the proxy's
    /// forwarding headers). Empty: PROXY headers from anyone, `X-Forwarded-For` never.
    pub trusted_proxies: Vec<String>,
    /// Connections the server holds at once (all its workers together); beyond it new
    /// connections wait in the listen backlog. 0 = sized from the descriptor limit.
    pub max_connections: usize,
    /// TCP_DEFER_ACCEPT seconds: a connection is accepted once it sends (or after about
    /// this long); 0 = off.
    pub defer_accept_s: u32,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// `off`, `stdout` or a file path.
    pub access: String,
    pub format: LogFormat,
    /// Diagnostics filter for tracing (`error`, `warn`, `info`, `debug`, `trace`).
    pub level: String,
    /// Where diagnostics go: `stderr` or a file path (appended to, reopened on SIGUSR1).
    pub error: String,
}

impl Default for HttpConfig {
    fn default() -> Self {
        let l = defaults::Limits::default();
        let t = defaults::Timeouts::default();
        HttpConfig {
            max_request_line: l.max_request_line,
            max_head: l.max_head,
            max_headers: l.max_headers,
            max_body: l.max_body,
            header_timeout_ms: t.header_ms,
            header_timeout_max_ms: t.header_max_ms,
            first_byte_timeout_ms: t.first_byte_ms,
            min_rate: t.min_rate,
            body_rate_timeout_ms: t.body_rate_ms,
            body_timeout_ms: t.body_ms,
            keepalive_timeout_ms: t.keepalive_ms,
            pressure_timeout_ms: t.pressure_ms,
            send_timeout_ms: t.send_ms,
            keepalive_requests: defaults::KEEPALIVE_REQUESTS,
            proxy_protocol: false,
            trusted_proxies: Vec::new(),
            max_connections: defaults::MAX_CONNECTIONS,
            defer_accept_s: defaults::DEFER_ACCEPT_S,
        }
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            access: "stdout".to_string(),
            format: LogFormat::Common,
            level: "info".to_string(),
            error: "stderr".to_string(),
        }
    }
}

impl HttpConfig {
    /// Check the `[http]` section; the error is one line naming the option.
    pub fn validate(&self) -> Result<(), String> {
        let h = self;
        positive("http.max_request_line", h.max_request_line as u64)?;
        positive("http.max_head", h.max_head as u64)?;
        positive("http.max_headers", h.max_headers as u64)?;
        positive("http.header_timeout_ms", h.header_timeout_ms)?;
        positive("http.first_byte_timeout_ms", h.first_byte_timeout_ms)?;
        positive("http.body_rate_timeout_ms", h.body_rate_timeout_ms)?;
        positive("http.pressure_timeout_ms", h.pressure_timeout_ms)?;
        if h.header_timeout_max_ms < h.header_timeout_ms {
            return Err(
                "http.header_timeout_max_ms: must not be below http.header_timeout_ms".into(),
            );
        }
        positive("http.body_timeout_ms", h.body_timeout_ms)?;
        positive("http.send_timeout_ms", h.send_timeout_ms)?;
        positive("http.keepalive_requests", h.keepalive_requests)?;
        if h.max_head > 1024 * 1024 {
            return Err("http.max_head: at most 1 MiB".into());
        }
        if h.max_request_line > h.max_head {
            return Err("http.max_request_line: must not exceed http.max_head".into());
        }
        self.trusted()?;
        Ok(())
    }

    pub fn limits(&self) -> defaults::Limits {
        defaults::Limits {
            max_request_line: self.max_request_line,
            max_head: self.max_head,
            max_headers: self.max_headers,
            max_body: self.max_body,
        }
    }
    pub fn timeouts(&self) -> defaults::Timeouts {
        defaults::Timeouts {
            header_ms: self.header_timeout_ms,
            header_max_ms: self.header_timeout_max_ms,
            first_byte_ms: self.first_byte_timeout_ms,
            min_rate: self.min_rate,
            body_rate_ms: self.body_rate_timeout_ms,
            pressure_ms: self.pressure_timeout_ms,
            body_ms: self.body_timeout_ms,
            keepalive_ms: self.keepalive_timeout_ms,
            send_ms: self.send_timeout_ms,
        }
    }
}

impl HttpConfig {
    /// `trusted_proxies` parsed; the error names the option and the entry.
    pub fn trusted(&self) -> Result<Vec<gearshift_http::proxied::Cidr>, String> {
        self.trusted_proxies
            .iter()
            .map(|s| {
                gearshift_http::proxied::Cidr::parse(s)
                    .map_err(|e| format!("http.trusted_proxies: {e}"))
            })
            .collect()
    }
}

impl LogConfig {
    /// Check the `[log]` section; the error is one line naming the option.
    pub fn validate(&self) -> Result<(), String> {
        if self.access.is_empty() {
            return Err("log.access: use 'off', 'stdout' or a file path".into());
        }
        if self.error.is_empty() {
            return Err("log.error: use 'stderr' or a file path".into());
        }
        Ok(())
    }
}

/// Refuse 0 for `name`, in the one-line form every validation error has.
pub fn positive(name: &str, v: u64) -> Result<(), String> {
    if v == 0 {
        Err(format!("{name}: must be greater than 0"))
    } else {
        Ok(())
    }
}

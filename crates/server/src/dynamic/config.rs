//! Configuration of dynamic content (the event engine's hand-off pool, CGI, FastCGI, the
//! work endpoint), kept beside the code it configures; `config.rs` re-exports these sections so
//! the whole file format is still described from there.

use crate::config::positive;
use crate::defaults;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DynamicConfig {
    /// Threads running dynamic exchanges for the event engine.
    pub threads: usize,
    /// Exchanges waiting for a thread; beyond it the request gets 503.
    pub queue: usize,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct CgiConfig {
    /// URL path prefixes whose files are all scripts (like Apache `ScriptAlias`).
    pub dirs: Vec<String>,
    /// File name suffixes run as scripts anywhere (like `AddHandler cgi-script .cgi`).
    pub extensions: Vec<String>,
    /// Inactivity timeout on a script's output; the process group is then killed.
    pub timeout_ms: u64,
    /// Most scripts running at once; more requests get 503.
    pub max_processes: usize,
}

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
    /// Multiplexed connections per process (never more than the backend's FCGI_MAX_CONNS).
    pub multiplex_connections: usize,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct WorkConfig {
    pub enabled: bool,
    pub path: String,
    pub max_cpu_us: u64,
    pub max_sleep_ms: u64,
    pub max_bytes: u64,
    pub max_alloc_kb: u64,
}

impl Default for DynamicConfig {
    fn default() -> Self {
        DynamicConfig {
            threads: defaults::dynamic::THREADS,
            queue: defaults::dynamic::QUEUE,
        }
    }
}

impl Default for CgiConfig {
    fn default() -> Self {
        CgiConfig {
            dirs: Vec::new(),
            extensions: Vec::new(),
            timeout_ms: defaults::cgi::TIMEOUT_MS,
            max_processes: defaults::cgi::MAX_PROCESSES,
        }
    }
}

impl Default for FastCgiConfig {
    fn default() -> Self {
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
        }
    }
}

/// Check the `[fastcgi]` section; the error is one line naming the option.
pub fn validate_fastcgi(f: &FastCgiConfig) -> Result<(), String> {
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
        crate::dynamic::fastcgi::FastCgiBackend::parse(&f.backend)
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

impl Default for WorkConfig {
    fn default() -> Self {
        use defaults::work as d;
        WorkConfig {
            enabled: false,
            path: d::PATH.to_string(),
            max_cpu_us: d::MAX_CPU_US,
            max_sleep_ms: d::MAX_SLEEP_MS,
            max_bytes: d::MAX_BYTES,
            max_alloc_kb: d::MAX_ALLOC_KB,
        }
    }
}

/// Check the dynamic sections; the error is one line naming the option.
pub fn validate(dynamic: &DynamicConfig, cgi: &CgiConfig, work: &WorkConfig) -> Result<(), String> {
    positive("dynamic.threads", dynamic.threads as u64)?;
    positive("dynamic.queue", dynamic.queue as u64)?;
    positive("cgi.timeout_ms", cgi.timeout_ms)?;
    positive("cgi.max_processes", cgi.max_processes as u64)?;
    for d in &cgi.dirs {
        if !d.starts_with('/') || d.split('/').any(|s| s == "." || s == "..") {
            return Err(format!("cgi.dirs: '{d}' is not an absolute URL path"));
        }
    }
    for e in &cgi.extensions {
        if !e.starts_with('.') || e.len() < 2 || e.contains('/') {
            return Err(format!("cgi.extensions: '{e}' is not a suffix like '.cgi'"));
        }
    }
    let w = &work;
    if !w.path.starts_with('/') || w.path.contains(['?', '#', '%']) {
        return Err(format!("work.path: '{}' is not a plain URL path", w.path));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    #[test]
    fn sections_parse_and_bad_values_name_the_option() {
        let c = Config::from_toml(
            "[cgi]\ndirs = [\"/cgi-bin\"]\nextensions = [\".cgi\"]\n[work]\nenabled = true\n[dynamic]\nthreads = 4\n",
        )
        .unwrap();
        assert_eq!(
            (c.cgi.dirs.len(), c.work.enabled, c.dynamic.threads),
            (1, true, 4)
        );
        let mut f = Config::from_toml(
            "[fastcgi]\nbackend = \"unix:/run/php/fpm.sock\"\nextensions = [\".php\"]\nkeepalive = 0\n",
        )
        .unwrap();
        assert_eq!((f.fastcgi.keepalive, f.fastcgi.extensions.len()), (0, 1));
        f.root = std::env::temp_dir();
        assert_eq!(f.validate(), Ok(()));
        let e = Config::from_toml("[cgi]\ntimeout = 5\n").unwrap_err();
        assert!(e.contains("timeout") && !e.contains('\n'), "{e}");
        let base = Config {
            root: std::env::temp_dir(),
            ..Config::default()
        };
        for (edit, name) in [
            (
                &(|c: &mut Config| c.cgi.dirs = vec!["cgi-bin".into()]) as &dyn Fn(&mut Config),
                "cgi.dirs",
            ),
            (
                &|c: &mut Config| c.cgi.dirs = vec!["/a/../b".into()],
                "cgi.dirs",
            ),
            (
                &|c: &mut Config| c.cgi.extensions = vec!["cgi".into()],
                "cgi.extensions",
            ),
            (
                &|c: &mut Config| c.cgi.max_processes = 0,
                "cgi.max_processes",
            ),
            (&|c: &mut Config| c.dynamic.queue = 0, "dynamic.queue"),
            (&|c: &mut Config| c.work.path = "/w?x".into(), "work.path"),
            (
                &|c: &mut Config| c.fastcgi.backend = "localhost:9000".into(),
                "fastcgi.backend",
            ),
            (
                &|c: &mut Config| c.fastcgi.extensions = vec!["php".into()],
                "fastcgi.extensions",
            ),
            (
                &|c: &mut Config| c.fastcgi.read_timeout_ms = 0,
                "fastcgi.read_timeout_ms",
            ),
            (
                &|c: &mut Config| c.fastcgi.multiplex = "on".into(),
                "fastcgi.multiplex",
            ),
        ] {
            let mut c = base.clone();
            edit(&mut c);
            assert!(c.validate().unwrap_err().starts_with(name), "{name}");
        }
    }
}

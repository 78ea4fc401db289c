//! The CGI handler's configuration (`[cgi]`), owned beside the handler.

use gearshift_core::config::positive;
use gearshift_core::defaults;
use serde::{Deserialize, Serialize};

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
}

impl Default for CgiConfig {
    fn default() -> Self {
        let b = crate::stream::spool::Buffering::default();
        CgiConfig {
            dirs: Vec::new(),
            extensions: Vec::new(),
            timeout_ms: defaults::cgi::TIMEOUT_MS,
            max_processes: defaults::cgi::MAX_PROCESSES,
            request_buffering: b.request,
            response_buffering: b.response,
            request_buffer_bytes: b.request_buffer_bytes,
            response_buffer_bytes: b.response_buffer_bytes,
            max_temp_file_bytes: b.max_temp_file_bytes,
        }
    }
}

impl CgiConfig {
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

    /// Check the `[cgi]` section; the error is one line naming the option.
    pub fn validate(&self) -> Result<(), String> {
        self.buffering().validate("cgi")?;
        positive("cgi.timeout_ms", self.timeout_ms)?;
        positive("cgi.max_processes", self.max_processes as u64)?;
        for d in &self.dirs {
            if !d.starts_with('/') || d.split('/').any(|s| s == "." || s == "..") {
                return Err(format!("cgi.dirs: '{d}' is not an absolute URL path"));
            }
        }
        for e in &self.extensions {
            if !e.starts_with('.') || e.len() < 2 || e.contains('/') {
                return Err(format!("cgi.extensions: '{e}' is not a suffix like '.cgi'"));
            }
        }
        Ok(())
    }
}

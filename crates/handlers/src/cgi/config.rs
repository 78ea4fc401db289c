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

impl CgiConfig {
    /// Check the `[cgi]` section; the error is one line naming the option.
    pub fn validate(&self) -> Result<(), String> {
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

//! Access log: one line per request, buffered per worker.
//!
//! Writing a log line per request with its own `write(2)` would cost a
//! syscall per request, so each worker formats into its own [`Buffer`] and
//! hands whole lines to the shared [`Sink`] when the buffer passes 32 KiB,
//! once a second, and on exit. The sink appends with `O_APPEND`, so the
//! single `write(2)` of one flush never interleaves with another worker's,
//! and it can be reopened (SIGUSR1, after logrotate moved the file) with an
//! atomic swap, so writers never see a closed descriptor.
//!
//! Formats are Apache's Common and Combined Log Formats and JSON lines.
//! Request data is hostile: in CLF, `"` and `\` are backslash-escaped and
//! control bytes and bytes >= 0x80 are written as `\xhh` (as Apache's
//! `ap_escape_logitem` does), and JSON strings are escaped by the JSON rules
//! (non-UTF-8 bytes become U+FFFD), so no request can forge or break a line.

use arc_swap::ArcSwap;
use gearshift_http::date::civil_from_days;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::Arc;

/// Access log line format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Apache Common Log Format.
    Common,
    /// Apache Combined Log Format (Common plus referer and user agent).
    Combined,
    /// Apache's `vhost_combined`: the site (`[[site]]`'s first name; `-` without sites)
    /// before Combined.
    #[serde(rename = "vhost_combined")]
    VhostCombined,
    /// One JSON object per line.
    Json,
}

/// What is logged about one request.
#[derive(Clone, Copy, Debug)]
pub struct Record<'a> {
    /// The client's address (only the IP is logged).
    pub remote: SocketAddr,
    /// When the request was received, seconds since the Unix epoch (UTC).
    pub time_unix: u64,
    /// The request method, as received.
    pub method: &'a [u8],
    /// The request target, as received (still percent-encoded).
    pub target: &'a [u8],
    /// The protocol version, e.g. `"HTTP/1.1"`.
    pub version: &'a str,
    /// The response status code.
    pub status: u16,
    /// Response body bytes sent.
    pub bytes: u64,
    /// The `Referer` header, if any.
    pub referer: Option<&'a [u8]>,
    /// The `User-Agent` header, if any.
    pub user_agent: Option<&'a [u8]>,
    /// Time taken to answer, in microseconds.
    pub duration_us: u64,
    /// The site that answered (`[[site]]`'s first name, `_` for the top-level
    /// configuration); None when no sites are configured.
    pub site: Option<&'a str>,
}

/// Appends one log line for `rec`, ending in `'\n'`, to `buf`.
pub fn format(buf: &mut Vec<u8>, fmt: LogFormat, rec: &Record) {
    format_with(buf, fmt, rec, &mut TimeCache::default());
}

fn format_with(buf: &mut Vec<u8>, fmt: LogFormat, rec: &Record, time: &mut TimeCache) {
    time.set(rec.time_unix);
    let ip = canonical_ip(rec.remote);
    match fmt {
        LogFormat::Common | LogFormat::Combined | LogFormat::VhostCombined => {
            if fmt == LogFormat::VhostCombined {
                clf_escape(buf, rec.site.unwrap_or("-").as_bytes());
                buf.push(b' ');
            }
            let _ = write!(buf, "{ip} - - [{}] \"", time.clf);
            clf_escape(buf, rec.method);
            buf.push(b' ');
            clf_escape(buf, rec.target);
            buf.push(b' ');
            clf_escape(buf, rec.version.as_bytes());
            let _ = write!(buf, "\" {} ", rec.status);
            if rec.bytes == 0 {
                buf.push(b'-');
            } else {
                let _ = write!(buf, "{}", rec.bytes);
            }
            if fmt != LogFormat::Common {
                for field in [rec.referer, rec.user_agent] {
                    buf.extend_from_slice(b" \"");
                    match field {
                        Some(v) => clf_escape(buf, v),
                        None => buf.push(b'-'),
                    }
                    buf.push(b'"');
                }
            }
        }
        LogFormat::Json => {
            let _ = write!(buf, "{{\"time\":\"{}\",\"remote\":\"{ip}\"", time.rfc3339);
            buf.extend_from_slice(b",\"method\":");
            json_string(buf, rec.method);
            buf.extend_from_slice(b",\"target\":");
            json_string(buf, rec.target);
            buf.extend_from_slice(b",\"version\":");
            json_string(buf, rec.version.as_bytes());
            let _ = write!(buf, ",\"status\":{},\"bytes\":{}", rec.status, rec.bytes);
            for (key, field) in [("referer", rec.referer), ("user_agent", rec.user_agent)] {
                let _ = write!(buf, ",\"{key}\":");
                match field {
                    Some(v) => json_string(buf, v),
                    None => buf.extend_from_slice(b"null"),
                }
            }
            if let Some(site) = rec.site {
                buf.extend_from_slice(b",\"site\":");
                json_string(buf, site.as_bytes());
            }
            let _ = write!(buf, ",\"duration_us\":{}}}", rec.duration_us);
        }
    }
    buf.push(b'\n');
}

/// The client IP, with IPv4-mapped IPv6 addresses (dual-stack listeners)
/// shown as plain IPv4.
fn canonical_ip(remote: SocketAddr) -> IpAddr {
    match remote.ip() {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        ip => ip,
    }
}

/// Apache-style escaping of a CLF field: `"` and `\` get a backslash,
/// control bytes, DEL and bytes >= 0x80 become `\xhh`.
fn clf_escape(buf: &mut Vec<u8>, bytes: &[u8]) {
    fn plain(b: u8) -> bool {
        (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\'
    }
    if bytes.iter().all(|&b| plain(b)) {
        buf.extend_from_slice(bytes);
        return;
    }
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for &b in bytes {
        match b {
            b'"' | b'\\' => buf.extend_from_slice(&[b'\\', b]),
            b if plain(b) => buf.push(b),
            b => buf.extend_from_slice(&[
                b'\\',
                b'x',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 0x0f)],
            ]),
        }
    }
}

/// Writes `bytes` as a JSON string (quotes included). Invalid UTF-8 becomes
/// U+FFFD; `"`, `\`, control characters and DEL are escaped.
fn json_string(buf: &mut Vec<u8>, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let text = String::from_utf8_lossy(bytes);
    buf.push(b'"');
    for &b in text.as_bytes() {
        match b {
            b'"' => buf.extend_from_slice(b"\\\""),
            b'\\' => buf.extend_from_slice(b"\\\\"),
            b'\n' => buf.extend_from_slice(b"\\n"),
            b'\r' => buf.extend_from_slice(b"\\r"),
            b'\t' => buf.extend_from_slice(b"\\t"),
            0x00..=0x1f | 0x7f => buf.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 0x0f)],
            ]),
            b => buf.push(b),
        }
    }
    buf.push(b'"');
}

/// The timestamps of one second, formatted once and reused while requests
/// keep arriving in the same second.
#[derive(Default)]
struct TimeCache {
    secs: Option<u64>,
    /// `10/Oct/2000:13:55:36 +0000`
    clf: String,
    /// `2000-10-10T13:55:36Z`
    rfc3339: String,
}

impl TimeCache {
    fn set(&mut self, secs: u64) {
        if self.secs == Some(secs) {
            return;
        }
        const MONTHS: [&str; 12] = [
            "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
        ];
        let (y, mo, d) = civil_from_days(secs / 86_400);
        let rem = secs % 86_400;
        let (h, mi, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
        let month = MONTHS
            .get(usize::try_from(mo.saturating_sub(1)).unwrap_or(0))
            .copied()
            .unwrap_or("Jan");
        self.clf.clear();
        self.rfc3339.clear();
        use std::fmt::Write as _;
        let _ = write!(
            self.clf,
            "{d:02}/{month}/{y:04}:{h:02}:{mi:02}:{s:02} +0000"
        );
        let _ = write!(self.rfc3339, "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z");
        self.secs = Some(secs);
    }
}

/// Where the access log goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Destination {
    /// The server's standard output.
    Stdout,
    /// A file, created if missing and appended to.
    File(PathBuf),
}

/// The log's destination, shared by all workers (`Send + Sync`; share it in
/// an `Arc`).
pub struct Sink {
    /// `None` for stdout, which is never reopened.
    path: Option<PathBuf>,
    /// The open descriptor, swapped whole by [`Sink::reopen`]. Writers hold
    /// their own `Arc` for the duration of a write, so the old file is
    /// closed only after its last write.
    file: ArcSwap<File>,
}

impl fmt::Debug for Sink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sink").field("path", &self.path).finish()
    }
}

fn open_log_file(path: &std::path::Path) -> io::Result<File> {
    OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o644)
        .custom_flags(libc::O_CLOEXEC)
        .open(path)
}

impl Sink {
    /// Opens the destination: a file is opened `O_APPEND|O_CREAT|O_CLOEXEC`
    /// with mode 0644; stdout is duplicated (close-on-exec) so the sink owns
    /// its descriptor.
    pub fn open(dest: Destination) -> io::Result<Sink> {
        let (path, file) = match dest {
            Destination::Stdout => {
                let fd = io::stdout().as_fd().try_clone_to_owned()?;
                (None, File::from(fd))
            }
            Destination::File(path) => {
                let file = open_log_file(&path)?;
                (Some(path), file)
            }
        };
        Ok(Sink {
            path,
            file: ArcSwap::from_pointee(file),
        })
    }

    /// Reopens the file at the same path (SIGUSR1, after logrotate moved the
    /// old one away) and swaps it in atomically. A no-op for stdout. On
    /// error the old file stays in use.
    pub fn reopen(&self) -> io::Result<()> {
        if let Some(path) = &self.path {
            let file = open_log_file(path)?;
            self.file.store(Arc::new(file));
        }
        Ok(())
    }

    /// Appends `bytes`: one `write(2)` unless the kernel takes less (then
    /// the rest follows), retried on `EINTR`.
    pub fn write_all(&self, bytes: &[u8]) -> io::Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        let file = self.file.load_full();
        (&*file).write_all(bytes)
    }
}

/// Buffered bytes above which [`Buffer::log`] flushes.
const FLUSH_THRESHOLD: usize = 32 * 1024;

/// One worker's log buffer (not shared between threads).
pub struct Buffer {
    sink: Arc<Sink>,
    fmt: LogFormat,
    buf: Vec<u8>,
    time: TimeCache,
    /// A write failed and was reported; stay quiet until one succeeds.
    failing: bool,
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Buffer")
            .field("sink", &self.sink)
            .field("fmt", &self.fmt)
            .field("buffered", &self.buf.len())
            .finish()
    }
}

impl Buffer {
    /// A buffer writing lines of format `fmt` to `sink`.
    pub fn new(sink: Arc<Sink>, fmt: LogFormat) -> Buffer {
        Buffer {
            sink,
            fmt,
            buf: Vec::with_capacity(FLUSH_THRESHOLD + 4096),
            time: TimeCache::default(),
            failing: false,
        }
    }

    /// Formats one line into the buffer; flushes once more than 32 KiB are
    /// buffered.
    pub fn log(&mut self, rec: &Record) {
        format_with(&mut self.buf, self.fmt, rec, &mut self.time);
        if self.buf.len() > FLUSH_THRESHOLD {
            self.flush();
        }
    }

    /// Writes everything buffered to the sink. A failure is reported once on
    /// stderr (again only after a later write has succeeded) and the lines
    /// are dropped; never panics.
    pub fn flush(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        match self.sink.write_all(&self.buf) {
            Ok(()) => self.failing = false,
            Err(e) => {
                if !self.failing {
                    self.failing = true;
                    // Not eprintln!: it panics when stderr cannot be written.
                    let _ = writeln!(
                        io::stderr(),
                        "gearshift: access log write failed ({e}); dropping entries until a write succeeds"
                    );
                }
            }
        }
        self.buf.clear();
        // Do not keep a huge allocation around after one giant line.
        if self.buf.capacity() > 4 * FLUSH_THRESHOLD {
            self.buf.shrink_to(FLUSH_THRESHOLD + 4096);
        }
    }

    /// Whether this buffer writes to `sink` (a reload may have replaced the sink).
    pub fn sink_is(&self, sink: &Arc<Sink>) -> bool {
        Arc::ptr_eq(&self.sink, sink)
    }

    /// Switches the format of the following lines (configuration reload).
    pub fn set_format(&mut self, fmt: LogFormat) {
        self.fmt = fmt;
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        self.flush();
    }
}

#[cfg(test)]
#[path = "accesslog_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "accesslog_sink_tests.rs"]
mod sink_tests;

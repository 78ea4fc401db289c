//! Connections to the FastCGI backend (TCP or a Unix socket), kept open between requests
//! (FCGI_KEEP_CONN) in a small per-process pool of idle connections, so a request does not
//! pay a connect (nor php-fpm an accept) each time. A pooled connection is checked before
//! reuse: if the backend closed it meanwhile (php-fpm does when a worker retires), a
//! non-blocking peek sees the end of stream and it is dropped, not reused. Idle connections
//! hold a backend worker each (php-fpm serves one connection per process), so few are kept
//! and not for long: `keepalive` of them for at most `KEEPALIVE_TIMEOUT`.
//!
//! Once per process the backend is asked with FCGI_GET_VALUES whether it multiplexes
//! requests on a connection (FCGI_MPXS_CONNS) and how many connections and requests it
//! takes (FCGI_MAX_CONNS, FCGI_MAX_REQS); the answer is logged and decides whether requests
//! go through `mux` (shared connections) or this pool (one request per connection at a
//! time). php-fpm answers FCGI_MPXS_CONNS=0. If the backend cannot be reached the question
//! is asked again at the next request; an answer (or a backend that ignores the question)
//! is kept.

use super::record;
use rustix::event::{poll, PollFd, PollFlags};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::io::Errno;
use rustix::net::{RecvFlags, SendFlags};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gearshift_core::defaults::fastcgi as d;

/// Where the backend listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backend {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl Backend {
    /// `IP:PORT`, `unix:/path` or `/path`.
    pub fn parse(s: &str) -> Result<Backend, String> {
        if let Some(p) = s.strip_prefix("unix:") {
            if !p.starts_with('/') {
                return Err(format!("'{s}': a Unix socket path must be absolute"));
            }
            return Ok(Backend::Unix(p.into()));
        }
        if s.starts_with('/') {
            return Ok(Backend::Unix(s.into()));
        }
        s.parse()
            .map(Backend::Tcp)
            .map_err(|_| format!("'{s}' is not IP:PORT, unix:/path or /path"))
    }
}

/// Why no connection could be made.
#[derive(Debug)]
pub(super) enum ConnectFail {
    /// Within the connect timeout nothing answered (504).
    Timeout,
    /// Refused, no such socket, or another error (502).
    Failed(std::io::Error),
}

impl std::fmt::Display for ConnectFail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectFail::Timeout => f.write_str("connect timed out"),
            ConnectFail::Failed(e) => write!(f, "{e}"),
        }
    }
}

/// One open connection to the backend (non-blocking).
pub(super) struct Conn {
    pub fd: OwnedFd,
    /// Requests begun on it.
    pub requests: u64,
    idle_since: Instant,
    /// Taken from the pool (not freshly connected): a failure before any answer may be
    /// a connection the backend closed just now, worth one retry on a fresh one.
    pub reused: bool,
}

impl Conn {
    pub(super) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Still open and quiet: the backend has not closed it nor sent anything unasked.
    fn is_usable(&self) -> bool {
        let mut b = [0u8; 1];
        matches!(
            rustix::net::recv(&self.fd, &mut b, RecvFlags::PEEK | RecvFlags::DONTWAIT),
            Err(Errno::AGAIN)
        )
    }
}

/// What the backend said to FCGI_GET_VALUES (all unset when it did not answer).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Values {
    pub mpxs: bool,
    pub max_conns: Option<usize>,
    pub max_reqs: Option<usize>,
}

impl Values {
    fn from_pairs(pairs: &[(String, String)]) -> Values {
        let num = |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .and_then(|(_, v)| v.trim().parse::<usize>().ok())
                .filter(|&n| n > 0)
        };
        Values {
            mpxs: num("FCGI_MPXS_CONNS") == Some(1),
            max_conns: num("FCGI_MAX_CONNS"),
            max_reqs: num("FCGI_MAX_REQS"),
        }
    }
}

/// The connections of one backend in this process: idle ones of the one-request-per-
/// connection mode here, the multiplexed set in `mux`.
pub(super) struct ConnPool {
    pub backend: Backend,
    idle: Mutex<Vec<Conn>>,
    keepalive: usize,
    connect_timeout: Duration,
    /// The backend's FCGI_GET_VALUES answer, once it was reachable.
    values: Mutex<Option<Values>>,
    pub mux: Arc<super::mux::Mux>,
}

impl ConnPool {
    pub(super) fn new(backend: Backend, keepalive: usize, connect_timeout_ms: u64) -> ConnPool {
        ConnPool {
            backend,
            idle: Mutex::new(Vec::new()),
            keepalive,
            connect_timeout: Duration::from_millis(connect_timeout_ms),
            values: Mutex::new(None),
            mux: Arc::default(),
        }
    }

    /// A connection: the most recently used idle one that is still good, else a new one.
    pub(super) fn get(&self) -> Result<Conn, ConnectFail> {
        if let Some(c) = self.take_idle() {
            return Ok(c);
        }
        tracing::debug!(target: "fastcgi", "connecting to {:?}", self.backend);
        self.connect()
    }

    fn take_idle(&self) -> Option<Conn> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        while let Some(mut c) = idle.pop() {
            if c.idle_since.elapsed() < d::KEEPALIVE_TIMEOUT && c.is_usable() {
                c.reused = true;
                return Some(c);
            }
            tracing::debug!(target: "fastcgi", "dropping a pooled connection the backend closed or that idled too long");
        }
        None
    }

    /// Give a connection back after a clean request (END_REQUEST read, nothing pending).
    pub(super) fn put(&self, mut c: Conn) {
        if c.requests >= d::KEEPALIVE_REQUESTS {
            return;
        }
        c.idle_since = Instant::now();
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < self.keepalive {
            idle.push(c);
        }
    }

    /// A fresh connection.
    pub(super) fn connect(&self) -> Result<Conn, ConnectFail> {
        let fd = match &self.backend {
            Backend::Tcp(addr) => {
                let domain = socket2::Domain::for_address(*addr);
                let s = socket2::Socket::new(domain, socket2::Type::STREAM, None)
                    .map_err(ConnectFail::Failed)?;
                match s.connect_timeout(&(*addr).into(), self.connect_timeout) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                        return Err(ConnectFail::Timeout)
                    }
                    Err(e) => return Err(ConnectFail::Failed(e)),
                }
                let _ = s.set_nodelay(true);
                OwnedFd::from(s)
            }
            Backend::Unix(path) => OwnedFd::from(
                std::os::unix::net::UnixStream::connect(path).map_err(ConnectFail::Failed)?,
            ),
        };
        rustix::io::ioctl_fionbio(&fd, true).map_err(|e| ConnectFail::Failed(e.into()))?;
        Ok(Conn {
            fd,
            requests: 0,
            idle_since: Instant::now(),
            reused: false,
        })
    }

    /// Ask the backend FCGI_GET_VALUES again before its next request (an event loop's
    /// multiplexed connection died, or a request was refused with FCGI_CANT_MPX_CONN).
    pub(super) fn forget_values(&self) {
        *self.values.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// The backend's FCGI_GET_VALUES answer if it is known (nothing is asked).
    pub(super) fn known_values(&self) -> Option<Values> {
        *self.values.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The backend's FCGI_GET_VALUES answer, asked once per process (again while the
    /// backend cannot be reached, and after `mux` saw a multiplexed connection die or a
    /// request refused with FCGI_CANT_MPX_CONN); logs it.
    pub(super) fn values(&self) -> Values {
        {
            let mut known = self.values.lock().unwrap_or_else(|p| p.into_inner());
            if self.mux.take_reprobe() {
                *known = None;
            }
            if let Some(v) = *known {
                return v;
            }
        }
        let Ok(c) = self.connect() else {
            return Values::default();
        };
        let answer = self.ask_values(c);
        self.learned(answer)
    }

    /// Keep (and log) the backend's answer to FCGI_GET_VALUES, None when it gave none:
    /// asked here (`values`) or by an event loop without blocking (`evented`).
    pub(super) fn learned(&self, answer: Option<Vec<(String, String)>>) -> Values {
        let v = match answer {
            Some(v) => {
                tracing::info!(target: "fastcgi", backend = ?self.backend, "FCGI_GET_VALUES: {}", v.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" "));
                Values::from_pairs(&v)
            }
            None => {
                tracing::info!(target: "fastcgi", backend = ?self.backend, "no answer to FCGI_GET_VALUES");
                Values::default()
            }
        };
        *self.values.lock().unwrap_or_else(|p| p.into_inner()) = Some(v);
        v
    }

    /// FCGI_GET_VALUES on a connection of its own (php-fpm closes it after answering).
    fn ask_values(&self, c: Conn) -> Option<Vec<(String, String)>> {
        // Not every application answers management records: wait only briefly.
        let deadline = Instant::now() + self.connect_timeout.min(d::PROBE_TIMEOUT);
        write_all(c.fd(), &values_query(), deadline).ok()?;
        let mut buf = Vec::new();
        let mut chunk = [0u8; 1024];
        loop {
            if let Some(answer) = values_answer(&buf) {
                return answer;
            }
            match read_some(c.fd(), &mut chunk, deadline) {
                Ok(0) | Err(_) => return None,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    }
}

/// The FCGI_GET_VALUES record that asks a backend how far it multiplexes.
pub(super) fn values_query() -> Vec<u8> {
    record::get_values(&["FCGI_MAX_CONNS", "FCGI_MAX_REQS", "FCGI_MPXS_CONNS"])
}

/// The backend's answer to `values_query` at the start of `buf`: None while incomplete,
/// else its pairs (None when what came is not such an answer).
pub(super) fn values_answer(buf: &[u8]) -> Option<Option<Vec<(String, String)>>> {
    let r = match record::parse(buf) {
        Ok(Some(r)) => r,
        Ok(None) => return None,
        Err(_) => return Some(None),
    };
    if r.kind != record::GET_VALUES_RESULT {
        return Some(None);
    }
    let pairs = record::pairs(r.content(buf)).map(|pairs| {
        pairs
            .into_iter()
            .map(|(k, v)| {
                (
                    String::from_utf8_lossy(k).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                )
            })
            .collect()
    });
    Some(pairs)
}

/// Why a wait on the backend socket ended without data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum IoFail {
    Timeout,
    Io,
}

/// Write all of `data` to the non-blocking socket `fd` (no SIGPIPE), waiting while it is full, until `deadline`.
pub(super) fn write_all(
    fd: BorrowedFd<'_>,
    mut data: &[u8],
    deadline: Instant,
) -> Result<(), IoFail> {
    while !data.is_empty() {
        match rustix::net::send(fd, data, SendFlags::NOSIGNAL) {
            Ok(n) => data = &data[n..],
            Err(Errno::INTR) => {}
            Err(Errno::AGAIN) => wait(fd, PollFlags::OUT, deadline)?,
            Err(_) => return Err(IoFail::Io),
        }
    }
    Ok(())
}

/// One read from the non-blocking `fd`, waiting for data until `deadline`.
pub(super) fn read_some(
    fd: BorrowedFd<'_>,
    buf: &mut [u8],
    deadline: Instant,
) -> Result<usize, IoFail> {
    loop {
        match rustix::io::read(fd, &mut *buf) {
            Ok(n) => return Ok(n),
            Err(Errno::INTR) => {}
            Err(Errno::AGAIN) => wait(fd, PollFlags::IN, deadline)?,
            Err(_) => return Err(IoFail::Io),
        }
    }
}

fn wait(fd: BorrowedFd<'_>, flags: PollFlags, deadline: Instant) -> Result<(), IoFail> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(IoFail::Timeout);
    }
    let mut fds = [PollFd::new(&fd, flags)];
    match poll(&mut fds, left.as_millis().min(i32::MAX as u128) as i32) {
        Ok(_) | Err(Errno::INTR) => Ok(()),
        Err(_) => Err(IoFail::Io),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backends_parse() {
        assert_eq!(
            Backend::parse("127.0.0.1:9000"),
            Ok(Backend::Tcp("127.0.0.1:9000".parse().unwrap()))
        );
        assert_eq!(
            Backend::parse("unix:/run/php/fpm.sock"),
            Ok(Backend::Unix("/run/php/fpm.sock".into()))
        );
        assert_eq!(
            Backend::parse("/run/fpm.sock"),
            Ok(Backend::Unix("/run/fpm.sock".into()))
        );
        assert!(Backend::parse("localhost").is_err());
        assert!(Backend::parse("unix:rel.sock").is_err());
    }

    #[test]
    fn get_values_answers_parse() {
        let p = |s: &[(&str, &str)]| {
            let v: Vec<(String, String)> = s
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect();
            Values::from_pairs(&v)
        };
        assert_eq!(p(&[("FCGI_MPXS_CONNS", "0")]), Values::default());
        assert_eq!(
            p(&[
                ("FCGI_MPXS_CONNS", "1"),
                ("FCGI_MAX_REQS", "20"),
                ("FCGI_MAX_CONNS", "x")
            ]),
            Values {
                mpxs: true,
                max_conns: None,
                max_reqs: Some(20)
            }
        );
    }

    #[test]
    fn a_closed_pooled_connection_is_not_reused() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let pool = ConnPool::new(Backend::Tcp(addr), 4, 2000);
        let c = pool.connect().unwrap();
        let (peer, _) = l.accept().unwrap();
        pool.put(c);
        // Open: reused.
        let c = pool.take_idle().expect("open connection reused");
        assert!(c.reused);
        pool.put(c);
        // Closed by the backend: dropped.
        drop(peer);
        std::thread::sleep(Duration::from_millis(50));
        assert!(pool.take_idle().is_none());
    }
}

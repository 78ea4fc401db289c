//! A run's complete, validated description (what the command line says, with defaults
//! applied) and the check that keeps load on this machine unless the user says
//! `--allow-remote`. The engine reads only this. The target URLs are parsed in `target.rs`
//! (re-exported here).

pub use crate::target::{interface_addrs, is_local, Target};
use crate::wagon::WagonParams;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// How requests are generated.
#[derive(Clone, Debug, PartialEq)]
pub enum Mode {
    /// Each connection sends its next request as soon as the previous one is answered.
    Closed,
    /// Requests start on a schedule of `rate` per second (evenly spaced, or Poisson arrivals),
    /// whatever the server does; latency counts from the scheduled time.
    Open { rate: f64, poisson: bool },
    /// WAGON sessions (paper 001).
    Wagon(WagonParams),
}

impl Mode {
    pub fn name(&self) -> &'static str {
        match self {
            Mode::Closed => "closed",
            Mode::Open { .. } => "open",
            Mode::Wagon(_) => "wagon",
        }
    }
}

/// A request method: an HTTP token (RFC 9110 5.6.2), upper-cased as given on the command line.
pub fn parse_method(m: &str) -> Result<String, String> {
    let tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if m.is_empty() || !m.bytes().all(tchar) {
        return Err(format!("'{m}' is not a request method"));
    }
    Ok(m.to_ascii_uppercase())
}

/// Every default of a run, in one place, each with where it comes from.
pub mod defaults {
    use std::time::Duration;

    /// Connections: wrk's default (`-c 10`).
    pub const CONNECTIONS: usize = 10;
    /// WAGON: the most bursts in progress at once. Our choice: the preset starts 10 sessions
    /// a second and a burst of ~7 requests lasts milliseconds on loopback, so 100 slots only
    /// fill when the server is far behind.
    pub const WAGON_CONNECTIONS: usize = 100;
    /// Run length when neither a request nor a session count is given: wrk's default (`-d 10s`).
    pub const DURATION: Duration = Duration::from_secs(10);
    /// Per-request timeout, connect included: paper 003 ran its ab sweeps with 15 s.
    pub const TIMEOUT: Duration = Duration::from_secs(15);
    /// Hard bound on any run (our choice: the brief wants every run bounded).
    pub const TIME_LIMIT: Duration = Duration::from_secs(3600);
    /// Seed of `Config::new` (the command line seeds from the clock unless `--seed`).
    pub const SEED: u64 = 1;
}

/// Everything a run needs.
#[derive(Clone, Debug)]
pub struct Config {
    /// The first URL: the base of `--mix` paths, the name of the run in reports.
    pub target: Target,
    /// Every URL with its weight; requests pick among them (see the `mix` module).
    pub urls: Vec<(Target, f64)>,
    pub mode: Mode,
    /// Simultaneous connections (WAGON: the most bursts in progress at once).
    pub connections: usize,
    pub threads: usize,
    /// Stop issuing after this many requests.
    pub requests: Option<u64>,
    /// Stop at this time after the start.
    pub duration: Option<Duration>,
    /// WAGON: start at most this many sessions.
    pub sessions: Option<u64>,
    /// Hard bound on any run, whatever else is set.
    pub time_limit: Duration,
    pub keepalive: bool,
    pub http10: bool,
    /// Requests in flight per connection.
    pub pipeline: usize,
    /// Request method, upper case ("GET", "POST", ...).
    pub method: String,
    /// Request body sent with every request (Content-Length set); empty: none.
    pub body: Vec<u8>,
    /// Extra request header lines ("Name: value").
    pub headers: Vec<String>,
    /// Targets that are not this machine's are refused unless this is set.
    pub allow_remote: bool,
    /// https: accept any certificate (self-signed test servers).
    pub insecure: bool,
    /// https: trust the certificates of this PEM file besides the built-in roots.
    pub cacert: Option<PathBuf>,
    /// Write the latency histograms here in HdrHistogram's interval log format.
    pub hdr_out: Option<PathBuf>,
    pub timeout: Duration,
    pub seed: u64,
    /// Count connections whose bit rate was at least this many kbit/s (1000 bit/s units).
    pub conforming_kbits: Option<f64>,
    /// Read each connection no faster than this many kbit/s (SPECweb99's client rate limit).
    pub rated_receive_kbits: Option<f64>,
    /// Live progress line (only shown when stderr is a terminal).
    pub progress: bool,
}

impl Config {
    /// A closed-loop run against `url`, other settings default.
    pub fn new(url: &str) -> Result<Config, String> {
        Ok(Config::for_target(Target::parse(url)?))
    }

    /// A closed-loop run against `target`, other settings default.
    pub fn for_target(target: Target) -> Config {
        Config {
            urls: vec![(target.clone(), 1.0)],
            target,
            mode: Mode::Closed,
            connections: defaults::CONNECTIONS,
            threads: 1,
            requests: None,
            duration: Some(defaults::DURATION),
            sessions: None,
            time_limit: defaults::TIME_LIMIT,
            keepalive: true,
            http10: false,
            pipeline: 1,
            method: "GET".into(),
            body: Vec::new(),
            headers: Vec::new(),
            allow_remote: false,
            insecure: false,
            cacert: None,
            hdr_out: None,
            timeout: defaults::TIMEOUT,
            seed: defaults::SEED,
            conforming_kbits: None,
            rated_receive_kbits: None,
            progress: false,
        }
    }

    /// The connection groups of the run: one per distinct [`Target::origin_key`], in order
    /// of first appearance in `urls`.
    pub fn origins(&self) -> Vec<(bool, SocketAddr, &str)> {
        let mut out: Vec<(bool, SocketAddr, &str)> = Vec::new();
        for (t, _) in &self.urls {
            if !out.contains(&t.origin_key()) {
                out.push(t.origin_key());
            }
        }
        out
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.connections == 0 {
            return Err("--connections must be at least 1".into());
        }
        if self.threads == 0 {
            return Err("--threads must be at least 1".into());
        }
        if self.pipeline == 0 {
            return Err("--pipeline must be at least 1".into());
        }
        if self.pipeline > 1 && !self.keepalive {
            return Err("--pipeline needs keep-alive connections".into());
        }
        if self.requests == Some(0) {
            return Err("--requests must be at least 1".into());
        }
        if self.duration.is_some_and(|d| d.is_zero()) || self.time_limit.is_zero() {
            return Err("durations must be positive".into());
        }
        if self.timeout.is_zero() {
            return Err("--timeout must be positive".into());
        }
        if self.urls.is_empty() {
            return Err("no URL to load".into());
        }
        if self.urls.iter().all(|(_, w)| *w == 0.0) {
            return Err("every URL has weight 0".into());
        }
        if !self.allow_remote {
            let local = interface_addrs();
            for (t, _) in &self.urls {
                let ip = t.addr.ip();
                if !(ip.is_loopback() || local.contains(&ip)) {
                    return Err(format!(
                        "'{}': {} is not an address of this machine; add --allow-remote to \
                         load a remote host",
                        t.url(),
                        t.addr.ip()
                    ));
                }
            }
        }
        let origins = self.origins().len();
        if self.connections < origins {
            return Err(format!(
                "{origins} origins (scheme, address, TLS name) need at least {origins} \
                 connections, not {}",
                self.connections
            ));
        }
        parse_method(&self.method)?;
        match &self.mode {
            Mode::Open { rate, .. } if !(rate.is_finite() && *rate > 0.0) => {
                return Err(format!("--rate must be positive, not {rate}"));
            }
            Mode::Wagon(p) => p.validate()?,
            _ => {}
        }
        if let Some(k) = self.conforming_kbits {
            if !(k.is_finite() && k > 0.0) {
                return Err(format!("--conforming must be positive, not {k}"));
            }
        }
        if let Some(k) = self.rated_receive_kbits {
            if !(k.is_finite() && k > 0.0) {
                return Err(format!("--rated-receive must be positive, not {k}"));
            }
        }
        for h in &self.headers {
            let Some((name, _)) = h.split_once(':') else {
                return Err(format!("header '{h}' has no ':'"));
            };
            if name.is_empty() || name.bytes().any(|b| b <= b' ' || b == b':') {
                return Err(format!("header '{h}' has a bad name"));
            }
            if h.bytes().any(|b| b == b'\r' || b == b'\n') {
                return Err(format!("header '{h}' has a line break"));
            }
            if name.eq_ignore_ascii_case("content-length")
                || name.eq_ignore_ascii_case("transfer-encoding")
            {
                return Err(format!(
                    "header '{h}': gearshift load frames the body itself (--body, --body-file)"
                ));
            }
        }
        Ok(())
    }

    /// The bound in time: the duration, else the time limit.
    pub fn end(&self) -> Duration {
        match self.duration {
            Some(d) => d.min(self.time_limit),
            None => self.time_limit,
        }
    }

    /// Requests are HEAD: their responses have no body whatever they announce.
    pub fn head(&self) -> bool {
        self.method == "HEAD"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    #[test]
    fn remote_targets_need_allow_remote() {
        for url in [
            "http://192.0.2.1/",
            "https://10.0.0.1/",
            "http://[2001:db8::1]/",
        ] {
            let mut c = Config::new(url).unwrap();
            let e = c.validate().unwrap_err();
            assert!(e.contains("--allow-remote") && !e.contains('\n'), "{e}");
            c.allow_remote = true;
            assert!(c.validate().is_ok(), "{url}");
        }
        assert!(is_local("127.0.0.1".parse().unwrap()));
        assert!(is_local("::1".parse().unwrap()));
        assert!(!is_local("192.0.2.1".parse().unwrap()));
        // Every address of this machine's interfaces is local (whatever they are here).
        for a in nix::ifaddrs::getifaddrs().unwrap() {
            if let Some(v4) = a.address.as_ref().and_then(|s| s.as_sockaddr_in()) {
                assert!(is_local(IpAddr::V4(v4.ip())), "{}", v4.ip());
            }
        }
    }

    #[test]
    fn methods_are_tokens() {
        assert_eq!(parse_method("post").unwrap(), "POST");
        assert_eq!(parse_method("PROPFIND").unwrap(), "PROPFIND");
        assert!(parse_method("GE T").is_err());
        assert!(parse_method("").is_err());
        assert!(parse_method("G\r\n").is_err());
    }

    #[test]
    fn validation() {
        let mut c = Config::new("http://127.0.0.1:1/").unwrap();
        assert!(c.validate().is_ok());
        c.pipeline = 2;
        c.keepalive = false;
        assert!(c.validate().is_err());
        c.keepalive = true;
        assert!(c.validate().is_ok());
        c.headers = vec!["X-A: 1".into()];
        assert!(c.validate().is_ok());
        c.headers = vec!["nocolon".into()];
        assert!(c.validate().is_err());
        c.headers = vec!["Content-Length: 5".into()];
        assert!(c.validate().unwrap_err().contains("--body"));
        c.headers.clear();
        let other = Target::parse("https://127.0.0.1:2/").unwrap();
        c.urls.push((other, 1.0));
        assert_eq!(c.origins().len(), 2);
        c.connections = 1;
        assert!(c.validate().unwrap_err().contains("2 origins"));
        c.connections = 2;
        assert!(c.validate().is_ok());
        c.mode = Mode::Open {
            rate: 0.0,
            poisson: false,
        };
        assert!(c.validate().is_err());
    }
}

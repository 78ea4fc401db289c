//! A run's complete, validated description (what the command line says, with defaults
//! applied), and the target URL with its loopback-only check. The engine reads only this.

use crate::wagon::WagonParams;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
}

/// Where the load goes.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    pub addr: SocketAddr,
    /// Host header value (as written in the URL, port included when given).
    pub host: String,
    /// Path (and query) of the URL.
    pub path: String,
}

impl Target {
    /// Parses `http://HOST[:PORT][/PATH]`. HOST must be on loopback: `localhost`, an address
    /// in 127.0.0.0/8, or `[::1]`. gearshift load never sends traffic anywhere else.
    pub fn parse(url: &str) -> Result<Target, String> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| format!("'{url}': only http:// URLs are supported"))?;
        let (authority, path) = match rest.find(['/', '?']) {
            Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], rest[i..].to_string()),
            Some(i) => (&rest[..i], format!("/{}", &rest[i..])),
            None => (rest, "/".to_string()),
        };
        if authority.is_empty() {
            return Err(format!("'{url}': no host"));
        }
        if authority.contains('@') {
            return Err(format!("'{url}': user information is not supported"));
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let end = v6
                .find(']')
                .ok_or_else(|| format!("'{url}': unclosed '['"))?;
            let port = &v6[end + 1..];
            (&v6[..end], port.strip_prefix(':'))
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            }
        };
        let port: u16 = match port {
            Some(p) => p.parse().map_err(|_| format!("'{url}': bad port '{p}'"))?,
            None => 80,
        };
        let ip: IpAddr = if host.eq_ignore_ascii_case("localhost") {
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        } else {
            host.parse()
                .map_err(|_| format!("'{url}': host must be localhost or an IP address"))?
        };
        if !ip.is_loopback() {
            return Err(format!(
                "'{url}': {ip} is not a loopback address; gearshift load only targets \
                 127.0.0.0/8 and ::1"
            ));
        }
        if path.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return Err(format!(
                "'{url}': the path has spaces or control characters"
            ));
        }
        Ok(Target {
            addr: SocketAddr::new(ip, port),
            host: authority.to_string(),
            path,
        })
    }

    pub fn url(&self) -> String {
        format!("http://{}{}", self.host, self.path)
    }
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
    pub target: Target,
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
    pub method: Method,
    /// Extra request header lines ("Name: value").
    pub headers: Vec<String>,
    /// Paths with weights; requests pick among them.
    pub mix: Vec<(String, f64)>,
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
    /// A closed-loop run of `requests` on `connections` against `url`, other settings default.
    pub fn new(url: &str) -> Result<Config, String> {
        let target = Target::parse(url)?;
        Ok(Config {
            mix: vec![(target.path.clone(), 1.0)],
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
            method: Method::Get,
            headers: Vec::new(),
            timeout: defaults::TIMEOUT,
            seed: defaults::SEED,
            conforming_kbits: None,
            rated_receive_kbits: None,
            progress: false,
        })
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
        if self.mix.is_empty() {
            return Err("the URL mix is empty".into());
        }
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_loopback_urls() {
        let t = Target::parse("http://127.0.0.1:8080/a/b?x=1").unwrap();
        assert_eq!(t.addr, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(t.host, "127.0.0.1:8080");
        assert_eq!(t.path, "/a/b?x=1");
        assert_eq!(t.url(), "http://127.0.0.1:8080/a/b?x=1");
        let t = Target::parse("http://localhost").unwrap();
        assert_eq!(t.addr, "127.0.0.1:80".parse().unwrap());
        assert_eq!(t.path, "/");
        let t = Target::parse("http://[::1]:9/").unwrap();
        assert_eq!(t.addr, "[::1]:9".parse().unwrap());
        let t = Target::parse("http://127.1.2.3:1?q").unwrap();
        assert_eq!(t.path, "/?q");
    }

    #[test]
    fn rejects_everything_else() {
        for bad in [
            "https://127.0.0.1/",
            "http://10.0.0.1/",
            "http://192.168.1.1:80/",
            "http://example.com/",
            "http://[2001:db8::1]/",
            "http://127.0.0.1:99999/",
            "http://u@127.0.0.1/",
            "http:///x",
            "127.0.0.1:80",
            "http://127.0.0.1/a b",
        ] {
            assert!(Target::parse(bad).is_err(), "{bad}");
        }
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
        c.headers.clear();
        c.mode = Mode::Open {
            rate: 0.0,
            poisson: false,
        };
        assert!(c.validate().is_err());
    }
}

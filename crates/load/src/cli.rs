//! The `gearshift load` command line (clap), and its translation into a [`Config`]: defaults,
//! the choice of mode, and the checks that make every run bounded and keep it on this machine
//! unless the user says otherwise.

use crate::config::{defaults, Config, Mode, Target};
use crate::wagon::WagonParams;
use clap::{Args, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;

/// `gearshift load URL [options]`, or `gearshift load fileset DIR`.
#[derive(Args, Debug, Clone)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct LoadArgs {
    #[command(subcommand)]
    pub command: Option<LoadCommand>,
    /// Target URL(s): http[s]://HOST[:PORT]/PATH, each picked with weight 1. HOST must be
    /// this machine's (loopback or an interface address) unless --allow-remote.
    #[arg(required_unless_present = "urls", value_name = "URL")]
    pub url: Vec<String>,
    /// More URLs, from a file: lines `URL [WEIGHT]` (/PATH lines are on the first URL's
    /// host). Connections are divided among origins by weight; see the JSON `config.urls`.
    #[arg(long, value_name = "FILE")]
    pub urls: Option<PathBuf>,
    /// Allow targets that are not this machine's addresses (never without this flag).
    #[arg(long)]
    pub allow_remote: bool,
    /// https: accept any server certificate (self-signed test servers).
    #[arg(short = 'k', long)]
    pub insecure: bool,
    /// https: also trust the CA certificates of this PEM file.
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// Request body, sent with every request (Content-Length set).
    #[arg(long, value_name = "STRING", conflicts_with = "body_file")]
    pub body: Option<String>,
    /// Request body read from a file, sent with every request (Content-Length set).
    #[arg(long, value_name = "FILE")]
    pub body_file: Option<PathBuf>,
    /// Write the latency histograms (one per second, and the whole run tagged "all") to FILE
    /// in HdrHistogram's interval log format, for HdrHistogram's plotting tools.
    #[arg(long, value_name = "FILE")]
    pub hdr_out: Option<PathBuf>,
    /// Simultaneous connections [default: 10; WAGON: 100, the most bursts at once].
    #[arg(short = 'c', long)]
    pub connections: Option<usize>,
    /// Stop after this many requests.
    #[arg(short = 'n', long)]
    pub requests: Option<u64>,
    /// Stop after this long (10s, 500ms, 2m) [default: 10s unless -n or --sessions is given].
    #[arg(short = 'd', long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Worker threads, each one epoll loop [default: one per CPU, at most one per connection].
    #[arg(short = 't', long)]
    pub threads: Option<usize>,
    /// Open a new connection for every request (Connection: close).
    #[arg(long)]
    pub no_keepalive: bool,
    /// Send HTTP/1.0 requests (keep-alive asked for with Connection: keep-alive).
    #[arg(long = "http1.0")]
    pub http10: bool,
    /// Requests in flight per connection (pipelining depth).
    #[arg(short = 'p', long, default_value_t = 1)]
    pub pipeline: usize,
    /// Open loop: start this many requests per second whatever the server does; latency is
    /// measured from each request's scheduled time (coordinated omission corrected).
    #[arg(short = 'r', long)]
    pub rate: Option<f64>,
    /// Open-loop arrivals: evenly spaced or a Poisson process.
    #[arg(long, value_enum, default_value_t = Arrival::Fixed)]
    pub arrival: Arrival,
    /// Session workload preset: `wagon` (paper 001, Table II).
    #[arg(long, value_enum)]
    pub workload: Option<Workload>,
    /// WAGON: mean seconds between session arrivals (exponential) [0.1].
    #[arg(long, value_name = "SECS")]
    pub session_interval: Option<f64>,
    /// WAGON: clicks per session, lognormal MEAN,SD [8,3].
    #[arg(long, value_name = "MEAN,SD", value_parser = parse_mean_sd)]
    pub session_length: Option<(f64, f64)>,
    /// WAGON: requests per click, gaussian MEAN,SD, truncated to >= 1 and rounded [7,3].
    #[arg(long, value_name = "MEAN,SD", value_parser = parse_mean_sd)]
    pub burst_length: Option<(f64, f64)>,
    /// WAGON: seconds of think time between clicks, lognormal MEAN,SD [30,30].
    #[arg(long, value_name = "MEAN,SD", value_parser = parse_mean_sd)]
    pub think_time: Option<(f64, f64)>,
    /// WAGON: multiply think times by this (0.01 makes a 30 s think 0.3 s) [1].
    #[arg(long, value_name = "FACTOR")]
    pub think_scale: Option<f64>,
    /// WAGON: start at most this many sessions.
    #[arg(long)]
    pub sessions: Option<u64>,
    /// WAGON: keep each session's connection open through its think times (httperf
    /// sessions), so the server holds it until its keep-alive timeout; -c then bounds the
    /// sessions in progress.
    #[arg(long)]
    pub session_keepalive: bool,
    /// Random seed, for repeatable schedules, sessions and mixes [default: from the clock].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Request mix file: lines `PATH [WEIGHT]` (see `gearshift load fileset`).
    #[arg(long, value_name = "FILE")]
    pub mix: Option<PathBuf>,
    /// Count connections that kept at least this bit rate over their wall time (paper 002:
    /// 320; SPECweb99 counts a connection's bytes over the whole run, idle time included).
    #[arg(long, value_name = "KBITS")]
    pub conforming: Option<f64>,
    /// Read each connection no faster than this bit rate, as SPECweb99's client paces its
    /// connections (400): a response of B bytes then takes at least B x 8 / rate.
    #[arg(long, value_name = "KBITS")]
    pub rated_receive: Option<f64>,
    /// Give up on a request (connect included) after this long [default: 15s, as paper 003].
    #[arg(long, value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// Hard bound on the whole run, whatever else is set [default: 1h].
    #[arg(long, value_parser = parse_duration)]
    pub time_limit: Option<Duration>,
    /// Extra request header, "Name: value" (repeatable).
    #[arg(short = 'H', long = "header", value_name = "HEADER")]
    pub headers: Vec<String>,
    /// Request method (GET, HEAD, POST, PUT, DELETE, ... any token; upper-cased).
    #[arg(short = 'm', long, default_value = "GET", value_parser = crate::config::parse_method)]
    pub method: String,
    /// Print the results as JSON (schema: gearshift-load/1) instead of the summary.
    #[arg(long)]
    pub json: bool,
    /// No live progress line.
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

#[derive(Subcommand, Debug, Clone)]
pub enum LoadCommand {
    /// Write a SPECweb99-like static file set and its request mix (DIR/specweb99.mix).
    Fileset(FilesetArgs),
}

#[derive(Args, Debug, Clone)]
pub struct FilesetArgs {
    /// Directory to write into (file_set/ and specweb99.mix are created there).
    pub dir: PathBuf,
    /// Number of directories of 36 files (about 5 MB each).
    #[arg(long, default_value_t = 10)]
    pub dirs: usize,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    Fixed,
    Poisson,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    Wagon,
}

/// "10s", "1.5s", "500ms", "250us", "2m", "1h"; a bare number is seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a duration (like 10s, 500ms, 2m)"))?;
    let secs = match unit.trim() {
        "" | "s" => v,
        "ms" => v / 1e3,
        "us" => v / 1e6,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        u => return Err(format!("'{s}': unknown unit '{u}' (us, ms, s, m, h)")),
    };
    if !secs.is_finite() || !(0.0..=1e7).contains(&secs) {
        return Err(format!("'{s}' is out of range"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// "MEAN,SD".
pub fn parse_mean_sd(s: &str) -> Result<(f64, f64), String> {
    let (m, d) = s
        .split_once(',')
        .ok_or_else(|| format!("'{s}': expected MEAN,SD"))?;
    let m: f64 = m.trim().parse().map_err(|_| format!("'{s}': bad mean"))?;
    let d: f64 = d.trim().parse().map_err(|_| format!("'{s}': bad sd"))?;
    Ok((m, d))
}

/// `gearshift load`'s arguments alone, for parsing them outside the `gearshift` binary.
#[derive(clap::Parser, Debug)]
#[command(name = "load")]
struct Standalone {
    #[command(flatten)]
    args: LoadArgs,
}

impl LoadArgs {
    /// Parses `args` (the first item is the program name) as `gearshift load` would.
    pub fn parse_from<I, T>(args: I) -> Result<LoadArgs, String>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        use clap::Parser;
        Standalone::try_parse_from(args)
            .map(|s| s.args)
            .map_err(|e| e.to_string())
    }

    /// The run these arguments describe.
    pub fn to_config(&self) -> Result<Config, String> {
        let mut urls = Vec::new();
        for u in &self.url {
            urls.push((Target::parse(u)?, 1.0));
        }
        let base = urls.first().map(|(t, _)| t.clone());
        if let Some(path) = &self.urls {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("--urls {}: {e}", path.display()))?;
            let more = crate::mix::parse_mix(&text, base.as_ref())
                .map_err(|e| format!("--urls {}: {e}", path.display()))?;
            urls.extend(more);
        }
        if let Some(path) = &self.mix {
            if self.url.len() != 1 || self.urls.is_some() {
                return Err("--mix takes the paths of one URL; for several, use --urls".into());
            }
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("--mix {}: {e}", path.display()))?;
            urls = crate::mix::parse_mix(&text, base.as_ref())
                .map_err(|e| format!("--mix {}: mix {e}", path.display()))?;
        }
        let first = urls.first().ok_or("a target URL is required")?.0.clone();
        let mut c = Config::for_target(first);
        c.urls = urls;
        let wagon = self.workload == Some(Workload::Wagon);
        let wagon_flags = self.session_interval.is_some()
            || self.session_length.is_some()
            || self.burst_length.is_some()
            || self.think_time.is_some()
            || self.think_scale.is_some()
            || self.sessions.is_some()
            || self.session_keepalive;
        if wagon_flags && !wagon {
            return Err("session options need --workload wagon".into());
        }
        c.mode = if wagon {
            if self.rate.is_some() {
                return Err("--rate and --workload wagon do not go together".into());
            }
            if self.no_keepalive {
                return Err("WAGON sends each burst on one keep-alive connection".into());
            }
            let d = WagonParams::default();
            Mode::Wagon(WagonParams {
                session_interval: self.session_interval.unwrap_or(d.session_interval),
                session_length: self.session_length.unwrap_or(d.session_length),
                burst_length: self.burst_length.unwrap_or(d.burst_length),
                think_time: self.think_time.unwrap_or(d.think_time),
                think_scale: self.think_scale.unwrap_or(d.think_scale),
                hold_connection: self.session_keepalive,
            })
        } else if let Some(rate) = self.rate {
            Mode::Open {
                rate,
                poisson: self.arrival == Arrival::Poisson,
            }
        } else {
            Mode::Closed
        };
        c.connections = self.connections.unwrap_or(if wagon {
            defaults::WAGON_CONNECTIONS
        } else {
            defaults::CONNECTIONS
        });
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        c.threads = self.threads.unwrap_or(cpus).min(c.connections.max(1));
        c.requests = self.requests;
        c.sessions = self.sessions;
        c.duration = match self.duration {
            Some(d) => Some(d),
            None if self.requests.is_some() || self.sessions.is_some() => None,
            None => Some(defaults::DURATION),
        };
        c.time_limit = self.time_limit.unwrap_or(defaults::TIME_LIMIT);
        c.keepalive = !self.no_keepalive;
        c.http10 = self.http10;
        c.pipeline = self.pipeline;
        c.method = self.method.clone();
        c.headers = self.headers.clone();
        c.body = match (&self.body, &self.body_file) {
            (Some(b), _) => b.clone().into_bytes(),
            (None, Some(path)) => {
                std::fs::read(path).map_err(|e| format!("--body-file {}: {e}", path.display()))?
            }
            (None, None) => Vec::new(),
        };
        c.allow_remote = self.allow_remote;
        c.insecure = self.insecure;
        c.cacert = self.cacert.clone();
        c.hdr_out = self.hdr_out.clone();
        c.timeout = self.timeout.unwrap_or(defaults::TIMEOUT);
        c.seed = self.seed.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
        c.conforming_kbits = self.conforming;
        c.rated_receive_kbits = self.rated_receive;
        c.progress = !self.quiet;
        c.validate()?;
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<LoadArgs, String> {
        LoadArgs::parse_from(std::iter::once("load").chain(args.iter().copied()))
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("10").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert!(parse_duration("x").is_err());
        assert!(parse_duration("5 parsecs").is_err());
        assert_eq!(parse_mean_sd("8,3").unwrap(), (8.0, 3.0));
        assert!(parse_mean_sd("8").is_err());
    }

    #[test]
    fn url_or_fileset() {
        let a = parse(&["http://127.0.0.1:1/", "-c", "10", "-n", "1000"]).unwrap();
        assert_eq!(a.url, ["http://127.0.0.1:1/"]);
        assert!(a.command.is_none());
        let c = a.to_config().unwrap();
        assert_eq!(c.connections, 10);
        assert_eq!(c.requests, Some(1000));
        assert_eq!(c.duration, None);
        assert_eq!(c.mode, Mode::Closed);
        let a = parse(&["fileset", "/tmp/x", "--dirs", "2"]).unwrap();
        match a.command {
            Some(LoadCommand::Fileset(f)) => assert_eq!(f.dirs, 2),
            None => panic!("no subcommand"),
        }
        assert!(parse(&[]).is_err());
        assert!(parse(&["fileset", "/tmp/x", "-c", "3"]).is_err());
    }

    #[test]
    fn urls_methods_and_bodies() {
        let dir = std::env::temp_dir().join(format!("gs-load-cli-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let list = dir.join("urls");
        std::fs::write(&list, "/b 3\nhttps://127.0.0.1:2/c\n").unwrap();
        let body = dir.join("body");
        std::fs::write(&body, b"\x00\x01bin").unwrap();
        let (l, b) = (list.to_str().unwrap(), body.to_str().unwrap());
        let c = parse(&[
            "http://127.0.0.1:1/a",
            "http://127.0.0.1:1/z",
            "--urls",
            l,
            "-m",
            "put",
            "--body-file",
            b,
        ])
        .unwrap()
        .to_config()
        .unwrap();
        let got: Vec<(String, f64)> = c.urls.iter().map(|(t, w)| (t.url(), *w)).collect();
        assert_eq!(
            got,
            [
                ("http://127.0.0.1:1/a".to_string(), 1.0),
                ("http://127.0.0.1:1/z".to_string(), 1.0),
                ("http://127.0.0.1:1/b".to_string(), 3.0),
                ("https://127.0.0.1:2/c".to_string(), 1.0)
            ]
        );
        assert_eq!(c.method, "PUT");
        assert_eq!(c.body, b"\x00\x01bin");
        let c = parse(&["--urls", l, "--body", "x=1"]).unwrap().to_config();
        assert!(c.unwrap_err().contains("no URL on the command line"));
        let c = parse(&["http://127.0.0.1:1/", "--body", "x=1", "-m", "POST"]).unwrap();
        assert_eq!(c.to_config().unwrap().body, b"x=1");
        assert!(parse(&["http://127.0.0.1:1/", "--body", "x", "--body-file", b]).is_err());
        assert!(parse(&["http://127.0.0.1:1/", "-m", "GE T"]).is_err());
        let two_with_mix = parse(&["http://127.0.0.1:1/", "http://127.0.0.1:1/", "--mix", l]);
        assert!(two_with_mix
            .unwrap()
            .to_config()
            .unwrap_err()
            .contains("--urls"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn modes_and_defaults() {
        let c = parse(&["http://127.0.0.1:1/"])
            .unwrap()
            .to_config()
            .unwrap();
        assert_eq!(c.duration, Some(Duration::from_secs(10)));
        assert_eq!(c.timeout, Duration::from_secs(15));
        let c = parse(&[
            "http://127.0.0.1:1/",
            "--rate",
            "100",
            "--arrival",
            "poisson",
        ])
        .unwrap()
        .to_config()
        .unwrap();
        assert_eq!(
            c.mode,
            Mode::Open {
                rate: 100.0,
                poisson: true
            }
        );
        let c = parse(&[
            "http://127.0.0.1:1/",
            "--workload",
            "wagon",
            "--think-scale",
            "0.01",
            "--burst-length",
            "3,1",
            "--seed",
            "7",
        ])
        .unwrap()
        .to_config()
        .unwrap();
        match c.mode {
            Mode::Wagon(p) => {
                assert_eq!(p.think_scale, 0.01);
                assert_eq!(p.burst_length, (3.0, 1.0));
                assert_eq!(p.session_length, (8.0, 3.0));
            }
            m => panic!("{m:?}"),
        }
        assert_eq!(c.connections, 100);
        assert_eq!(c.seed, 7);
        let bad = |args: &[&str]| parse(args).unwrap().to_config().is_err();
        assert!(bad(&["http://127.0.0.1:1/", "--think-scale", "0.1"]));
        assert!(bad(&[
            "http://127.0.0.1:1/",
            "--workload",
            "wagon",
            "--rate",
            "5"
        ]));
        assert!(bad(&["http://10.1.1.1/"]));
        assert!(!bad(&["http://10.1.1.1/", "--allow-remote"]));
        assert!(bad(&["http://127.0.0.1:1/", "--no-keepalive", "-p", "2"]));
        assert!(bad(&["http://127.0.0.1:1/", "-c", "0"]));
    }
}

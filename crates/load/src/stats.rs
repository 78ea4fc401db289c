//! What a worker measures: latency histograms (HdrHistogram, microseconds) and the timing
//! splits (connect, TLS handshake, first and last response byte), counters, status codes,
//! errors by kind, schedule lag, per-connection bit rates and a per-second series. Each worker owns
//! its `Stats`, records with no locking, and the run merges them at the end.

use hdrhistogram::Histogram;

/// Why a request failed (or, for `Status`, completed with a non-2xx status).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The TCP connection could not be opened (refused, unreachable, ...).
    Connect = 0,
    /// No complete response within the timeout (connect included).
    Timeout = 1,
    /// The connection was reset or closed before a response head arrived.
    Reset = 2,
    /// A complete response whose status is not 2xx.
    Status = 3,
    /// The connection ended inside a response body.
    ShortBody = 4,
    /// The response could not be parsed.
    Parse = 5,
    /// The TLS handshake or record layer failed (certificate refused, protocol error).
    Tls = 6,
}

pub const KINDS: [ErrorKind; 7] = [
    ErrorKind::Connect,
    ErrorKind::Timeout,
    ErrorKind::Reset,
    ErrorKind::Status,
    ErrorKind::ShortBody,
    ErrorKind::Parse,
    ErrorKind::Tls,
];

impl ErrorKind {
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Connect => "connect",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Reset => "reset",
            ErrorKind::Status => "status",
            ErrorKind::ShortBody => "short_body",
            ErrorKind::Parse => "parse",
            ErrorKind::Tls => "tls",
        }
    }
}

/// A latency histogram in microseconds, 1 us .. 1 h (grows past that), `sigfig` digits.
pub fn histogram(sigfig: u8) -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1, 3_600_000_000, sigfig).expect("histogram bounds");
    h.auto(true);
    h
}

/// Records a duration given in nanoseconds, in microseconds (at least 1).
#[inline]
pub fn record_ns(h: &mut Histogram<u64>, ns: u64) {
    h.saturating_record((ns / 1000).max(1));
}

/// One second of the run (by completion time).
#[derive(Clone, Debug)]
pub struct Second {
    pub requests: u64,
    pub ok: u64,
    pub bytes: u64,
    pub errors: [u64; KINDS.len()],
    /// Latency in microseconds, 2 significant digits (enough for a plot, small to keep).
    pub latency: Histogram<u64>,
}

impl Second {
    fn new() -> Second {
        Second {
            requests: 0,
            ok: 0,
            bytes: 0,
            errors: [0; KINDS.len()],
            latency: histogram(2),
        }
    }

    pub fn errors_total(&self) -> u64 {
        self.errors.iter().sum()
    }
}

/// Everything one worker measured.
#[derive(Clone, Debug)]
pub struct Stats {
    /// Latency of every completed response, from its intended start (us).
    pub latency: Histogram<u64>,
    /// WAGON: time from a click's intended start to the last response of its burst (us).
    pub page_latency: Histogram<u64>,
    /// Requests handed to a connection (sent or queued for sending).
    pub issued: u64,
    /// Complete responses, any status.
    pub requests: u64,
    /// Complete responses with a 2xx status.
    pub ok: u64,
    /// Response bytes received (heads, bodies, framing).
    pub bytes: u64,
    /// Responses by status class: index 0 = other, 1 = 1xx, ..., 5 = 5xx.
    pub status_classes: [u64; 6],
    /// Responses by status code (index 100..=599; other codes count in `status_classes[0]`).
    pub status_codes: Vec<u64>,
    pub errors: [u64; KINDS.len()],
    /// Requests still waiting for their response when the run ended.
    pub incomplete: u64,
    /// Open loop: requests whose intended time had come but which were never sent.
    pub unsent: u64,
    /// Requests re-sent after a reused keep-alive connection closed before answering.
    pub retried: u64,
    /// TCP connections opened (attempted).
    pub connects: u64,
    /// Time from connect() to the connection being established, per new connection (us).
    pub connect_time: Histogram<u64>,
    /// Time from the TCP connection to the end of the TLS handshake, per handshake (us).
    pub tls_handshake: Histogram<u64>,
    /// TLS handshakes completed.
    pub tls_handshakes: u64,
    /// The first TLS failure, described for people (the kind is counted in `errors`).
    pub tls_error: Option<String>,
    /// Per request, from when its bytes could go on the wire (handed to a connection that is
    /// ready: connected, handshake done) to its response's first byte, and to its last (us).
    pub first_byte: Histogram<u64>,
    pub last_byte: Histogram<u64>,
    /// Open loop / WAGON: send time minus intended time, over every request with a schedule.
    pub lag_count: u64,
    pub lag_sum_ns: u64,
    pub lag_max_ns: u64,
    /// Bit rate of each logical connection that carried traffic (bits/s over its busy time).
    pub conn_rates: Vec<f64>,
    pub sessions_started: u64,
    pub sessions_completed: u64,
    pub sessions_failed: u64,
    pub pages: u64,
    pub pages_failed: u64,
    pub series: Vec<Second>,
    /// When this worker stopped (run time); merged as the latest.
    pub elapsed_ns: u64,
}

impl Default for Stats {
    fn default() -> Self {
        Stats::new()
    }
}

impl Stats {
    pub fn new() -> Stats {
        Stats {
            latency: histogram(3),
            page_latency: histogram(3),
            issued: 0,
            requests: 0,
            ok: 0,
            bytes: 0,
            status_classes: [0; 6],
            status_codes: vec![0; 600],
            errors: [0; KINDS.len()],
            incomplete: 0,
            unsent: 0,
            retried: 0,
            connects: 0,
            connect_time: histogram(3),
            tls_handshake: histogram(3),
            tls_handshakes: 0,
            tls_error: None,
            first_byte: histogram(3),
            last_byte: histogram(3),
            lag_count: 0,
            lag_sum_ns: 0,
            lag_max_ns: 0,
            conn_rates: Vec::new(),
            sessions_started: 0,
            sessions_completed: 0,
            sessions_failed: 0,
            pages: 0,
            pages_failed: 0,
            series: Vec::new(),
            elapsed_ns: 0,
        }
    }

    #[inline]
    fn second(&mut self, now_ns: u64) -> &mut Second {
        let i = (now_ns / 1_000_000_000) as usize;
        while self.series.len() <= i {
            self.series.push(Second::new());
        }
        &mut self.series[i]
    }

    /// A complete response at `now_ns` (run time) whose latency is `latency_ns`.
    #[inline]
    pub fn response(&mut self, now_ns: u64, latency_ns: u64, status: u16, bytes: u64) {
        let ok = (200..300).contains(&status);
        self.requests += 1;
        self.bytes += bytes;
        self.ok += ok as u64;
        let class = if (100..600).contains(&status) {
            self.status_codes[status as usize] += 1;
            (status / 100) as usize
        } else {
            0
        };
        self.status_classes[class] += 1;
        record_ns(&mut self.latency, latency_ns);
        let s = self.second(now_ns);
        s.requests += 1;
        s.ok += ok as u64;
        s.bytes += bytes;
        record_ns(&mut s.latency, latency_ns);
        if !ok {
            self.error(now_ns, ErrorKind::Status, 1);
        }
    }

    /// A response's first and last byte, `first_ns` and `last_ns` after its request could go
    /// on the wire.
    #[inline]
    pub fn split(&mut self, first_ns: u64, last_ns: u64) {
        record_ns(&mut self.first_byte, first_ns);
        record_ns(&mut self.last_byte, last_ns);
    }

    /// `n` requests failed with `kind` at `now_ns`.
    pub fn error(&mut self, now_ns: u64, kind: ErrorKind, n: u64) {
        if n == 0 {
            return;
        }
        self.errors[kind as usize] += n;
        self.second(now_ns).errors[kind as usize] += n;
    }

    #[inline]
    pub fn lag(&mut self, lag_ns: u64) {
        self.lag_count += 1;
        self.lag_sum_ns += lag_ns;
        self.lag_max_ns = self.lag_max_ns.max(lag_ns);
    }

    pub fn errors_total(&self) -> u64 {
        self.errors.iter().sum()
    }

    /// Requests that failed without a response (every error kind but `Status`).
    pub fn failed(&self) -> u64 {
        self.errors_total() - self.errors[ErrorKind::Status as usize]
    }

    /// Adds another worker's measurements to these.
    pub fn merge(&mut self, o: &Stats) {
        self.latency.add(&o.latency).expect("histogram add");
        self.page_latency
            .add(&o.page_latency)
            .expect("histogram add");
        self.issued += o.issued;
        self.requests += o.requests;
        self.ok += o.ok;
        self.bytes += o.bytes;
        for i in 0..6 {
            self.status_classes[i] += o.status_classes[i];
        }
        for (a, b) in self.status_codes.iter_mut().zip(&o.status_codes) {
            *a += b;
        }
        for (a, b) in self.errors.iter_mut().zip(o.errors) {
            *a += b;
        }
        for (a, b) in [
            (&mut self.connect_time, &o.connect_time),
            (&mut self.tls_handshake, &o.tls_handshake),
            (&mut self.first_byte, &o.first_byte),
            (&mut self.last_byte, &o.last_byte),
        ] {
            a.add(b).expect("histogram add");
        }
        self.tls_handshakes += o.tls_handshakes;
        if self.tls_error.is_none() {
            self.tls_error.clone_from(&o.tls_error);
        }
        self.incomplete += o.incomplete;
        self.unsent += o.unsent;
        self.retried += o.retried;
        self.connects += o.connects;
        self.lag_count += o.lag_count;
        self.lag_sum_ns += o.lag_sum_ns;
        self.lag_max_ns = self.lag_max_ns.max(o.lag_max_ns);
        self.conn_rates.extend_from_slice(&o.conn_rates);
        self.sessions_started += o.sessions_started;
        self.sessions_completed += o.sessions_completed;
        self.sessions_failed += o.sessions_failed;
        self.pages += o.pages;
        self.pages_failed += o.pages_failed;
        self.elapsed_ns = self.elapsed_ns.max(o.elapsed_ns);
        if self.series.len() < o.series.len() {
            self.series.resize_with(o.series.len(), Second::new);
        }
        for (a, b) in self.series.iter_mut().zip(&o.series) {
            a.requests += b.requests;
            a.ok += b.ok;
            a.bytes += b.bytes;
            for (x, y) in a.errors.iter_mut().zip(b.errors) {
                *x += y;
            }
            a.latency.add(&b.latency).expect("histogram add");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_and_merges() {
        let mut a = Stats::new();
        a.response(100, 2_000_000, 200, 50);
        a.response(1_500_000_000, 3_000_000, 500, 60);
        a.error(1_600_000_000, ErrorKind::Timeout, 2);
        let mut b = Stats::new();
        b.response(2_100_000_000, 1_000, 204, 10);
        b.lag(5);
        a.merge(&b);
        assert_eq!(a.requests, 3);
        assert_eq!(a.ok, 2);
        assert_eq!(a.bytes, 120);
        assert_eq!(a.errors[ErrorKind::Status as usize], 1);
        assert_eq!(a.errors_total(), 3);
        assert_eq!(a.failed(), 2);
        assert_eq!(a.status_classes[2], 2);
        assert_eq!(a.status_classes[5], 1);
        assert_eq!(a.series.len(), 3);
        assert_eq!(a.series.iter().map(|s| s.requests).sum::<u64>(), 3);
        assert_eq!(a.series[1].errors_total(), 3);
        assert_eq!(a.latency.len(), 3);
        assert_eq!(a.latency.max(), a.latency.highest_equivalent(3000));
        assert_eq!(a.lag_max_ns, 5);
        assert_eq!(a.status_codes[200], 1);
        assert_eq!(a.status_codes[204], 1);
        assert_eq!(a.status_codes[500], 1);
        a.split(2_000, 9_000);
        let mut c = Stats::new();
        c.split(1_000, 3_000);
        c.tls_error = Some("x".into());
        a.merge(&c);
        assert_eq!((a.first_byte.len(), a.last_byte.len()), (2, 2));
        assert_eq!(a.last_byte.max(), a.last_byte.highest_equivalent(9));
        assert_eq!(a.tls_error.as_deref(), Some("x"));
    }
}

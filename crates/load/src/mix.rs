//! What the run requests: the URLs (the command line's, a `--urls` file's, or a `--mix`
//! file's paths on the command line's URL) with their weights, grouped into origins (scheme,
//! address, TLS name: what one connection can carry), and turned once, before the run, into
//! fully serialised request bytes and alias tables, so that choosing and sending a request
//! costs no allocation and no formatting.
//!
//! How requests pick their URL: each connection belongs to one origin, and the run's
//! connections are divided among the origins in proportion to the summed weights of their
//! URLs (at least one each, see `run.rs`). In the closed loop a connection's next request
//! picks among its origin's URLs by weight; the open loop and WAGON pick among all URLs by
//! weight (a WAGON session picks its origin with its first draw and stays on it) and wait for
//! a free connection of that origin. With one origin, the usual case, every request picks
//! among all URLs by weight.

use crate::config::{Config, Target};
use crate::rng::{alias, WorkloadRng};
use rand_distr::weighted::WeightedAliasIndex;
use rand_distr::Distribution;
use rustls::pki_types::ServerName;
use std::net::SocketAddr;
use std::sync::Arc;

/// Requests of a run take at most this much memory (each URL's request is kept whole,
/// body included, so that sending one is one write).
const MAX_REQUEST_BYTES: usize = 1 << 30;

/// Parses a URL list: one `URL [WEIGHT]` per line (weight 1 when absent), `#` comments and
/// blank lines ignored. URL is `http[s]://...` or `/PATH` on `base`'s origin. This is the
/// format of both `--mix` and `--urls`.
pub fn parse_mix(text: &str, base: Option<&Target>) -> Result<Vec<(Target, f64)>, String> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut words = line.split_whitespace();
        let first = words.next().unwrap_or_default();
        let weight = match words.next() {
            Some(w) => w
                .parse::<f64>()
                .map_err(|_| format!("line {}: bad weight '{w}'", i + 1))?,
            None => 1.0,
        };
        if words.next().is_some() {
            return Err(format!("line {}: expected 'URL [WEIGHT]'", i + 1));
        }
        if !(weight.is_finite() && weight >= 0.0) {
            return Err(format!("line {}: weight must be >= 0", i + 1));
        }
        let target = if first.starts_with('/') {
            let Some(base) = base else {
                return Err(format!(
                    "line {}: '{first}' is a path, and no URL on the command line says where",
                    i + 1
                ));
            };
            if first.bytes().any(|b| b <= b' ' || b == 0x7f) {
                return Err(format!("line {}: bad path", i + 1));
            }
            Target {
                path: first.to_string(),
                ..base.clone()
            }
        } else if first.starts_with("http://") || first.starts_with("https://") {
            Target::parse(first).map_err(|e| format!("line {}: {e}", i + 1))?
        } else {
            return Err(format!(
                "line {}: '{first}' is neither /PATH nor http[s]://...",
                i + 1
            ));
        };
        out.push((target, weight));
    }
    if out.is_empty() {
        return Err("it lists no URL".into());
    }
    if out.iter().all(|(_, w)| *w == 0.0) {
        return Err("every weight in it is 0".into());
    }
    Ok(out)
}

/// Where one group of connections goes.
#[derive(Clone, Debug)]
pub struct Origin {
    pub addr: SocketAddr,
    /// https: the SNI name (and the name the certificate must have).
    pub tls_name: Option<ServerName<'static>>,
    /// "https://host:port", for messages.
    pub label: String,
}

/// Serialised requests and the choice among them.
#[derive(Clone, Debug)]
pub struct Requests {
    pub bytes: Vec<Box<[u8]>>,
    pub origins: Vec<Origin>,
    /// The origin of each request.
    pub origin_of: Vec<u32>,
    /// Each origin's share of the total weight.
    pub origin_weights: Vec<f64>,
    /// Weighted choice among all requests (None: there is one).
    alias: Option<WeightedAliasIndex<f64>>,
    /// Per origin: its requests and the weighted choice among them (None: one request).
    per_origin: Vec<(Vec<u32>, Option<WeightedAliasIndex<f64>>)>,
    pub head: bool,
    /// The TLS client configuration, when some origin is https.
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

fn choice(weights: &[f64]) -> Result<Option<WeightedAliasIndex<f64>>, String> {
    Ok(if weights.len() > 1 {
        Some(alias(weights)?)
    } else {
        None
    })
}

impl Requests {
    pub fn build(cfg: &Config) -> Result<Requests, String> {
        let keys = cfg.origins();
        let mut origins = Vec::with_capacity(keys.len());
        for (t, _) in &cfg.urls {
            if origins.len() < keys.len() && t.origin_key() == keys[origins.len()] {
                let tls_name = if t.https {
                    Some(
                        ServerName::try_from(t.server_name.clone())
                            .map_err(|_| format!("'{}': not a TLS server name", t.url()))?,
                    )
                } else {
                    None
                };
                let scheme = if t.https { "https" } else { "http" };
                origins.push(Origin {
                    addr: t.addr,
                    tls_name,
                    label: format!("{scheme}://{}", t.host),
                });
            }
        }
        let mut bytes = Vec::with_capacity(cfg.urls.len());
        let mut origin_of = Vec::with_capacity(cfg.urls.len());
        let mut total = 0usize;
        for (t, _) in &cfg.urls {
            let b = serialize(cfg, t);
            total = total.saturating_add(b.len());
            if total > MAX_REQUEST_BYTES {
                return Err(format!(
                    "{} URLs with this body make more than {} MiB of requests",
                    cfg.urls.len(),
                    MAX_REQUEST_BYTES >> 20
                ));
            }
            bytes.push(b.into_boxed_slice());
            origin_of.push(keys.iter().position(|k| *k == t.origin_key()).unwrap() as u32);
        }
        let weights: Vec<f64> = cfg.urls.iter().map(|(_, w)| *w).collect();
        let sum: f64 = weights.iter().sum();
        let mut per_origin = Vec::with_capacity(keys.len());
        let mut origin_weights = Vec::with_capacity(keys.len());
        for (o, origin) in origins.iter().enumerate() {
            let members: Vec<u32> = (0..cfg.urls.len() as u32)
                .filter(|&i| origin_of[i as usize] == o as u32)
                .collect();
            let w: Vec<f64> = members.iter().map(|&i| weights[i as usize]).collect();
            let share = w.iter().sum::<f64>();
            if share <= 0.0 {
                return Err(format!("every URL of {} has weight 0", origin.label));
            }
            origin_weights.push(share / sum);
            per_origin.push((members, choice(&w)?));
        }
        let tls = if origins.iter().any(|o| o.tls_name.is_some()) {
            Some(crate::tls::client_config(cfg)?)
        } else {
            None
        };
        Ok(Requests {
            bytes,
            origins,
            origin_of,
            origin_weights,
            alias: choice(&weights)?,
            per_origin,
            head: cfg.head(),
            tls,
        })
    }

    /// Index of the next request to send, among all.
    #[inline]
    pub fn pick(&self, rng: &mut WorkloadRng) -> u32 {
        match &self.alias {
            Some(a) => a.sample(rng) as u32,
            None => 0,
        }
    }

    /// Index of the next request to send on a connection to `origin`.
    #[inline]
    pub fn pick_in(&self, origin: u32, rng: &mut WorkloadRng) -> u32 {
        if self.origins.len() == 1 {
            return self.pick(rng);
        }
        let (members, choice) = &self.per_origin[origin as usize];
        match choice {
            Some(a) => members[a.sample(rng)],
            None => members[0],
        }
    }
}

/// Methods whose requests carry content, so that an empty body is sent as Content-Length: 0
/// (RFC 9110 8.6: a user agent sends it when the method anticipates content).
const METHODS_WITH_CONTENT: [&str; 3] = ["POST", "PUT", "PATCH"];

/// One request's bytes: request line, Host (unless the user gives one), User-Agent, the
/// connection header the settings call for, Content-Length when there is a body (or the
/// method expects one), the user's headers, blank line, body.
pub fn serialize(cfg: &Config, target: &Target) -> Vec<u8> {
    let version = if cfg.http10 { "HTTP/1.0" } else { "HTTP/1.1" };
    let mut s = format!("{} {} {version}\r\n", cfg.method, target.path);
    let user_host = cfg.headers.iter().any(|h| {
        h.split_once(':')
            .is_some_and(|(n, _)| n.eq_ignore_ascii_case("host"))
    });
    if !user_host {
        s.push_str(&format!("Host: {}\r\n", target.host));
    }
    s.push_str("User-Agent: gearshift-load\r\n");
    match (cfg.http10, cfg.keepalive) {
        (false, false) => s.push_str("Connection: close\r\n"),
        (true, true) => s.push_str("Connection: keep-alive\r\n"),
        _ => {}
    }
    if !cfg.body.is_empty() || METHODS_WITH_CONTENT.contains(&cfg.method.as_str()) {
        s.push_str(&format!("Content-Length: {}\r\n", cfg.body.len()));
    }
    for h in &cfg.headers {
        s.push_str(h);
        s.push_str("\r\n");
    }
    s.push_str("\r\n");
    let mut b = s.into_bytes();
    b.extend_from_slice(&cfg.body);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> Target {
        Target::parse("http://127.0.0.1:8080/").unwrap()
    }

    fn text(cfg: &Config) -> String {
        String::from_utf8(serialize(cfg, &cfg.target)).unwrap()
    }

    #[test]
    fn parses_mix_files() {
        let m = parse_mix(
            "# comment\n/a 3\n\n/b\nhttp://127.0.0.1:8080/c?x 0.5  # trailing\n\
             https://127.0.0.1:9/d 2\n",
            Some(&target()),
        )
        .unwrap();
        let got: Vec<(String, f64)> = m.iter().map(|(t, w)| (t.url(), *w)).collect();
        assert_eq!(
            got,
            vec![
                ("http://127.0.0.1:8080/a".to_string(), 3.0),
                ("http://127.0.0.1:8080/b".to_string(), 1.0),
                ("http://127.0.0.1:8080/c?x".to_string(), 0.5),
                ("https://127.0.0.1:9/d".to_string(), 2.0)
            ]
        );
        let t = Some(&target());
        assert!(parse_mix("", t).is_err());
        assert!(parse_mix("/a x", t).is_err());
        assert!(parse_mix("/a -1", t).is_err());
        assert!(parse_mix("/a 0", t).is_err());
        assert!(parse_mix("a 1", t).is_err());
        assert!(parse_mix("/a 1 2", t).is_err());
        assert!(parse_mix("/a", None)
            .unwrap_err()
            .contains("no URL on the command line"));
    }

    #[test]
    fn serializes_connection_headers() {
        let mut c = Config::new("http://127.0.0.1:8080/x").unwrap();
        assert_eq!(
            text(&c),
            "GET /x HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: gearshift-load\r\n\r\n"
        );
        c.keepalive = false;
        assert!(text(&c).contains("Connection: close\r\n"));
        c.http10 = true;
        let s = text(&c);
        assert!(s.starts_with("GET /x HTTP/1.0\r\n") && !s.contains("Connection"));
        c.keepalive = true;
        c.method = "HEAD".into();
        c.headers = vec!["X-A: b".into()];
        let s = text(&c);
        assert!(s.starts_with("HEAD /x HTTP/1.0\r\n"));
        assert!(s.ends_with("Connection: keep-alive\r\nX-A: b\r\n\r\n"));
    }

    #[test]
    fn serializes_bodies_and_host_overrides() {
        let mut c = Config::new("http://127.0.0.1:8080/up").unwrap();
        c.method = "POST".into();
        assert!(text(&c).ends_with("Content-Length: 0\r\n\r\n"));
        c.body = b"a=1&b=2".to_vec();
        c.headers = vec!["Host: example.test".into()];
        let s = text(&c);
        assert!(s.starts_with("POST /up HTTP/1.1\r\nUser-Agent"), "{s}");
        assert!(s.ends_with("Content-Length: 7\r\nHost: example.test\r\n\r\na=1&b=2"));
        c.method = "DELETE".into();
        c.body.clear();
        assert!(!text(&c).contains("Content-Length"));
    }

    #[test]
    fn picks_by_weight() {
        let mut c = Config::new("http://127.0.0.1:8080/").unwrap();
        c.urls = parse_mix("/a 3\n/b 1\n", Some(&c.target)).unwrap();
        let r = Requests::build(&c).unwrap();
        let mut rng = crate::rng::seeded(2);
        let a = (0..40_000).filter(|_| r.pick(&mut rng) == 0).count();
        assert!((a as f64 / 40_000.0 - 0.75).abs() < 0.01, "{a}");
        assert_eq!(r.origins.len(), 1);
    }

    #[test]
    fn groups_urls_by_origin() {
        let mut c = Config::new("http://127.0.0.1:8080/").unwrap();
        c.urls = parse_mix(
            "/a 1\nhttp://127.0.0.1:9/b 2\n/c 1\nhttp://localhost:8080/d 4\n",
            Some(&c.target),
        )
        .unwrap();
        let r = Requests::build(&c).unwrap();
        // localhost:8080 is 127.0.0.1:8080: the same connections (Host differs per request).
        assert_eq!(r.origins.len(), 2);
        assert_eq!(r.origin_of, [0, 1, 0, 0]);
        assert_eq!(r.origin_weights, [0.75, 0.25]);
        let mut rng = crate::rng::seeded(3);
        for _ in 0..1000 {
            assert_eq!(r.pick_in(1, &mut rng), 1);
            assert_ne!(r.pick_in(0, &mut rng), 1);
        }
        assert!(String::from_utf8_lossy(&r.bytes[3]).contains("Host: localhost:8080\r\n"));
    }
}

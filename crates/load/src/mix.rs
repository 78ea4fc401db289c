//! Request mixes: a list of paths with weights (read from a file, or the one path of the URL),
//! turned once, before the run, into fully serialised request bytes and an alias table, so
//! that choosing and sending a request costs no allocation and no formatting.

use crate::config::{Config, Method, Target};
use crate::rng::{alias, WorkloadRng};
use rand_distr::weighted::WeightedAliasIndex;
use rand_distr::Distribution;

/// Parses a mix file: one `PATH [WEIGHT]` per line (weight 1 when absent), `#` comments and
/// blank lines ignored. PATH is `/...` or a full `http://` URL of the same host and port.
pub fn parse_mix(text: &str, target: &Target) -> Result<Vec<(String, f64)>, String> {
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
                .map_err(|_| format!("mix line {}: bad weight '{w}'", i + 1))?,
            None => 1.0,
        };
        if words.next().is_some() {
            return Err(format!("mix line {}: expected 'PATH [WEIGHT]'", i + 1));
        }
        if !(weight.is_finite() && weight >= 0.0) {
            return Err(format!("mix line {}: weight must be >= 0", i + 1));
        }
        let path = if first.starts_with('/') {
            first.to_string()
        } else if first.starts_with("http://") {
            let t = Target::parse(first).map_err(|e| format!("mix line {}: {e}", i + 1))?;
            if t.addr != target.addr {
                return Err(format!(
                    "mix line {}: {first} is not on {} (one target per run)",
                    i + 1,
                    target.addr
                ));
            }
            t.path
        } else {
            return Err(format!(
                "mix line {}: '{first}' is neither /PATH nor http://...",
                i + 1
            ));
        };
        if path.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return Err(format!("mix line {}: bad path", i + 1));
        }
        out.push((path, weight));
    }
    if out.is_empty() {
        return Err("the mix file lists no paths".into());
    }
    if out.iter().all(|(_, w)| *w == 0.0) {
        return Err("every weight in the mix is 0".into());
    }
    Ok(out)
}

/// Serialised requests and the choice among them.
#[derive(Clone, Debug)]
pub struct Requests {
    pub bytes: Vec<Box<[u8]>>,
    alias: Option<WeightedAliasIndex<f64>>,
    pub head: bool,
}

impl Requests {
    pub fn build(cfg: &Config) -> Result<Requests, String> {
        let mut bytes = Vec::with_capacity(cfg.mix.len());
        for (path, _) in &cfg.mix {
            bytes.push(serialize(cfg, path).into_boxed_slice());
        }
        let alias = if cfg.mix.len() > 1 {
            let w: Vec<f64> = cfg.mix.iter().map(|(_, w)| *w).collect();
            Some(alias(&w)?)
        } else {
            None
        };
        Ok(Requests {
            bytes,
            alias,
            head: cfg.method == Method::Head,
        })
    }

    /// Index of the next request to send.
    #[inline]
    pub fn pick(&self, rng: &mut WorkloadRng) -> u32 {
        match &self.alias {
            Some(a) => a.sample(rng) as u32,
            None => 0,
        }
    }
}

/// One request's bytes: request line, Host, User-Agent, the connection header the settings
/// call for, the user's headers, blank line.
pub fn serialize(cfg: &Config, path: &str) -> Vec<u8> {
    let method = match cfg.method {
        Method::Get => "GET",
        Method::Head => "HEAD",
    };
    let version = if cfg.http10 { "HTTP/1.0" } else { "HTTP/1.1" };
    let mut s = format!(
        "{method} {path} {version}\r\nHost: {}\r\nUser-Agent: gearshift-load\r\n",
        cfg.target.host
    );
    match (cfg.http10, cfg.keepalive) {
        (false, false) => s.push_str("Connection: close\r\n"),
        (true, true) => s.push_str("Connection: keep-alive\r\n"),
        _ => {}
    }
    for h in &cfg.headers {
        s.push_str(h);
        s.push_str("\r\n");
    }
    s.push_str("\r\n");
    s.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> Target {
        Target::parse("http://127.0.0.1:8080/").unwrap()
    }

    #[test]
    fn parses_mix_files() {
        let m = parse_mix(
            "# comment\n/a 3\n\n/b\nhttp://127.0.0.1:8080/c?x 0.5  # trailing\n",
            &target(),
        )
        .unwrap();
        assert_eq!(
            m,
            vec![
                ("/a".to_string(), 3.0),
                ("/b".to_string(), 1.0),
                ("/c?x".to_string(), 0.5)
            ]
        );
        assert!(parse_mix("", &target()).is_err());
        assert!(parse_mix("/a x", &target()).is_err());
        assert!(parse_mix("/a -1", &target()).is_err());
        assert!(parse_mix("/a 0", &target()).is_err());
        assert!(parse_mix("a 1", &target()).is_err());
        assert!(parse_mix("http://127.0.0.1:9/x 1", &target()).is_err());
        assert!(parse_mix("/a 1 2", &target()).is_err());
    }

    #[test]
    fn serializes_connection_headers() {
        let mut c = Config::new("http://127.0.0.1:8080/x").unwrap();
        let s = String::from_utf8(serialize(&c, "/x")).unwrap();
        assert_eq!(
            s,
            "GET /x HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: gearshift-load\r\n\r\n"
        );
        c.keepalive = false;
        assert!(String::from_utf8(serialize(&c, "/x"))
            .unwrap()
            .contains("Connection: close\r\n"));
        c.http10 = true;
        let s = String::from_utf8(serialize(&c, "/x")).unwrap();
        assert!(s.starts_with("GET /x HTTP/1.0\r\n") && !s.contains("Connection"));
        c.keepalive = true;
        c.method = Method::Head;
        c.headers = vec!["X-A: b".into()];
        let s = String::from_utf8(serialize(&c, "/x")).unwrap();
        assert!(s.starts_with("HEAD /x HTTP/1.0\r\n"));
        assert!(s.ends_with("Connection: keep-alive\r\nX-A: b\r\n\r\n"));
    }

    #[test]
    fn picks_by_weight() {
        let mut c = Config::new("http://127.0.0.1:8080/").unwrap();
        c.mix = vec![("/a".into(), 3.0), ("/b".into(), 1.0)];
        let r = Requests::build(&c).unwrap();
        let mut rng = crate::rng::seeded(2);
        let a = (0..40_000).filter(|_| r.pick(&mut rng) == 0).count();
        assert!((a as f64 / 40_000.0 - 0.75).abs() < 0.01, "{a}");
    }
}

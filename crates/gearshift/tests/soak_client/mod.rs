//! The soak's clients (tests/soak.rs): what one connection asks for (closing, keep-alive
//! or pipelined requests of static files, CGI, PHP and proxied files), how each answer is
//! checked, and the outcome recorded for the fault accounting; with GEARSHIFT_SOAK_STACKS,
//! the server's stacks at the first answer that does not come.

use crate::common::{req, Conn};
use std::net::SocketAddr;
use std::time::Instant;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Static,
    Cgi,
    Php,
    Proxy,
}

/// One request: when its connection opened, when it ended, and why it failed if it did.
pub struct Outcome {
    pub kind: Kind,
    pub opened: Instant,
    pub end: Instant,
    pub error: Option<String>,
}

/// The files and answers the clients check against.
pub struct Site {
    pub statics: Vec<(String, Vec<u8>)>,
    pub proxied: Vec<(String, Vec<u8>)>,
    pub php: bool,
}

impl Site {
    pub fn expect(&self, kind: Kind, n: usize) -> (String, Vec<u8>) {
        match kind {
            Kind::Static => self.statics[n % self.statics.len()].clone(),
            Kind::Proxy => self.proxied[n % self.proxied.len()].clone(),
            Kind::Cgi => (
                format!("/cgi-bin/echo.sh?{n}"),
                format!("cgi {n}\n").into_bytes(),
            ),
            Kind::Php => (format!("/echo.php?n={n}"), format!("php {n}").into_bytes()),
        }
    }
}

pub struct Rng(pub u64);
impl Rng {
    pub fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

pub fn check(c: &mut Conn, want: &[u8]) -> Result<(), String> {
    let r = c.try_response(false)?;
    if r.status != 200 {
        return Err(format!("status {} {}", r.status, r.text().trim()));
    }
    if r.body != want {
        return Err(format!(
            "wrong body ({} bytes, want {})",
            r.body.len(),
            want.len()
        ));
    }
    Ok(())
}

/// The server's pid, for `stacks`.
pub static SERVER_PID: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// GEARSHIFT_SOAK_STACKS=FILE: at the first answer that does not come in time, the
/// server's thread stacks (gdb) go to FILE, taken while the request is still stuck.
pub fn stacks(error: &str, local: Option<SocketAddr>) {
    static TAKEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let Ok(file) = std::env::var("GEARSHIFT_SOAK_STACKS") else {
        return;
    };
    if !error.contains("os error 11") || TAKEN.swap(true, std::sync::atomic::Ordering::SeqCst) {
        return;
    }
    let pid = SERVER_PID
        .load(std::sync::atomic::Ordering::SeqCst)
        .to_string();
    let out = std::process::Command::new("gdb")
        .args(["-p", &pid, "-batch", "-ex", "thread apply all bt full"])
        .output();
    // The server's side of the connection: what its kernel holds unread (Recv-Q).
    let port = local.map_or(0, |a| a.port());
    let filter = format!("( dport = :{port} or sport = :{port} )");
    let ss = std::process::Command::new("ss")
        .args(["-tnpie", "state", "all", &filter])
        .output();
    let mut text = format!("{error} (client {local:?})\n").into_bytes();
    for o in [ss, out].into_iter().flatten() {
        text.extend(o.stdout);
    }
    let _ = std::fs::write(&file, text);
}

/// One connection's worth of requests (1 closing, or 3 in keep-alive or pipelined).
pub fn one_connection(addr: SocketAddr, site: &Site, rng: &mut Rng, out: &mut Vec<Outcome>) {
    let kinds = [Kind::Static, Kind::Cgi, Kind::Php, Kind::Proxy];
    let kinds = &kinds[..if site.php { 4 } else { 3 }];
    let mode = rng.below(3);
    let count = if mode == 0 { 1 } else { 3 };
    let plan: Vec<(Kind, String, Vec<u8>)> = (0..count)
        .map(|_| {
            let kind = kinds[rng.below(kinds.len())];
            let (path, body) = site.expect(kind, rng.below(1000));
            (kind, path, body)
        })
        .collect();
    let opened = Instant::now();
    let mut record = |kind, error: Option<String>| {
        out.push(Outcome {
            kind,
            opened,
            end: Instant::now(),
            error,
        })
    };
    let mut c = match Conn::try_open(addr) {
        Ok(c) => c,
        Err(e) => return record(plan[0].0, Some(format!("connect: {e}"))),
    };
    let head = |path: &str, close: bool| {
        let extra: &[(&str, &str)] = if close {
            &[("Connection", "close")]
        } else {
            &[]
        };
        req("GET", path, extra)
    };
    if mode == 2 {
        let all: Vec<u8> = plan.iter().flat_map(|(_, p, _)| head(p, false)).collect();
        if let Err(e) = c.try_send(&all) {
            return record(plan[0].0, Some(format!("send: {e}")));
        }
    }
    for (i, (kind, path, want)) in plan.iter().enumerate() {
        if mode != 2 {
            if let Err(e) = c.try_send(&head(path, mode == 0)) {
                return record(*kind, Some(format!("send: {e} (request {i})")));
            }
        }
        if let Err(e) = check(&mut c, want) {
            stacks(&format!("{path}: {e}"), c.stream.local_addr().ok());
            return record(
                *kind,
                Some(format!("{path}: {e} (request {i}, mode {mode})")),
            );
        }
        record(*kind, None);
    }
}

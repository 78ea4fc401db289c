//! The servers the lab measures, gearshift's engines and the real peers the papers measured:
//! each described by a `ServerDef` (its label in the report, its configuration file written
//! by the lab and saved verbatim in the report, its command line), started on its own port,
//! configuration and pid file, checked to be listening, and stopped by pid. A peer whose
//! package cannot be installed is unavailable, and its rows become "not tested".

pub mod apache;
pub mod gearshift;
pub mod lighttpd;
pub mod nginx;
pub mod node;
pub mod python;

use crate::sys::procs::{Proc, Spawn};
use crate::sys::{http, install, netns::Netns};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Everything needed to start one server.
#[derive(Clone, Debug)]
pub struct ServerDef {
    /// Label in the report ("gs-worker", "apache2-worker", "nginx" ...).
    pub label: String,
    /// Architecture as the report names it ("gearshift worker", "apache2 mpm_worker" ...).
    pub engine: String,
    /// Knob values in one line, for runs.csv.
    pub knobs: String,
    /// Configuration file name and text (saved verbatim in the report).
    pub config_name: String,
    pub config: String,
    /// Extra files the server needs beside its configuration (scripts), name and text.
    pub files: Vec<(String, String)>,
    /// Command line; `{dir}` is replaced by the run directory.
    pub argv: Vec<String>,
    pub port: u16,
    /// gearshift's admin listener, when it has one.
    pub admin: Option<u16>,
    /// Binary and Debian package that provide it (for installing).
    pub binary: String,
    pub package: String,
    /// Version probe name (machine.rs).
    pub tool: String,
}

/// A started server.
pub struct Server {
    pub def: ServerDef,
    pub proc: Proc,
    pub dir: PathBuf,
    pub command: String,
    pub netns: Option<String>,
}

impl Server {
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.def.port))
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.def.port)
    }

    pub fn admin(&self) -> Option<String> {
        self.def.admin.map(|p| format!("127.0.0.1:{p}"))
    }

    pub fn pid(&self) -> i32 {
        self.proc.pid
    }

    pub fn alive(&mut self) -> bool {
        self.proc.running()
    }

    /// The last lines of the server's error output, for a failure message.
    pub fn log_tail(&self) -> String {
        tail(&self.dir)
    }

    pub fn stop(mut self) {
        self.proc.stop(Duration::from_secs_f64(
            crate::defaults::common::STOP_GRACE_S,
        ));
    }
}

fn tail(dir: &Path) -> String {
    let mut lines = Vec::new();
    for f in ["stderr.log", "error.log", "stdout.log"] {
        if let Ok(t) = std::fs::read_to_string(dir.join(f)) {
            lines.extend(
                t.lines()
                    .rev()
                    .take(3)
                    .map(|l| format!("{f}: {l}"))
                    .collect::<Vec<_>>(),
            );
        }
    }
    lines.join(" | ")
}

/// A free TCP port on 127.0.0.1 below the ephemeral range, so that the generator's own
/// connections (thousands per point, each from an ephemeral port) can never be sitting on it
/// when the server starts (a port from bind(0) was, twice, in a full run). Each call moves
/// on, so the ports of one run do not repeat.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32768);
    let (base, span) = (10_000u32, low.saturating_sub(10_000).max(1000));
    let start = (std::process::id() * 7919) % span;
    for _ in 0..span {
        let p = base + (start + NEXT.fetch_add(1, Ordering::Relaxed)) % span;
        if let Ok(l) = TcpListener::bind(("127.0.0.1", p as u16)) {
            drop(l);
            return p as u16;
        }
    }
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(18080)
}

/// Where and how to start a server.
pub struct Placement<'a> {
    /// Run directory (configuration, pid file, logs).
    pub dir: PathBuf,
    /// Report directory for the verbatim configuration.
    pub save_to: &'a Path,
    pub cpu: Option<usize>,
    pub nice: Option<i32>,
    pub netns: Option<&'a Netns>,
}

/// Installs (if needed), writes the configuration, starts and waits for the server to
/// listen. Err when it cannot be had (the caller marks its rows "not tested").
pub fn start(def: &ServerDef, at: &Placement) -> Result<Server, String> {
    install::ensure(&def.binary, &def.package)?;
    std::fs::create_dir_all(&at.dir).map_err(|e| format!("{}: {e}", at.dir.display()))?;
    set_mode(&at.dir, 0o755);
    let dir_s = at.dir.display().to_string();
    let fill = |s: &str| s.replace("{dir}", &dir_s);
    let config = fill(&def.config);
    std::fs::write(at.dir.join(&def.config_name), &config).map_err(|e| e.to_string())?;
    let _ = std::fs::create_dir_all(at.save_to);
    let _ = std::fs::write(at.save_to.join(&def.config_name), &config);
    for (name, text) in &def.files {
        std::fs::write(at.dir.join(name), fill(text)).map_err(|e| e.to_string())?;
        let _ = std::fs::write(at.save_to.join(name), fill(text));
    }
    let argv: Vec<String> = def.argv.iter().map(|a| fill(a)).collect();
    let spawn = Spawn {
        argv,
        netns: at.netns.map(|n| n.name.clone()),
        cpu: at.cpu,
        nice: at.nice,
        stdout: Some(at.dir.join("stdout.log")),
        stderr: Some(at.dir.join("stderr.log")),
        cwd: Some(at.dir.clone()),
        ..Spawn::default()
    };
    let command = spawn.display();
    let proc = spawn.start(&def.label)?;
    let mut server = Server {
        def: def.clone(),
        proc,
        dir: at.dir.clone(),
        command,
        netns: at.netns.map(|n| n.name.clone()),
    };
    let addr = server.addr();
    let limit = Duration::from_secs_f64(crate::defaults::common::START_TIMEOUT_S);
    let up = match at.netns {
        None => http::wait_listening(addr, limit, || server.proc.running()),
        Some(ns) => {
            let mut up = false;
            let end = std::time::Instant::now() + limit;
            while !up
                && std::time::Instant::now() < end
                && server.proc.running()
                && !crate::sys::procs::interrupted()
            {
                up = ns
                    .enter(move || {
                        std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200))
                            .is_ok()
                    })
                    .unwrap_or(false);
                if !up {
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
            up
        }
    };
    if !up {
        let why = server.log_tail();
        server.stop();
        return Err(format!(
            "{} did not start listening on {addr}: {why}",
            def.label
        ));
    }
    Ok(server)
}

pub fn set_mode(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode));
}

/// Checks that every server answers each path with exactly the bytes of `files` (spec
/// section 0: the same file bytes everywhere, checked before any timing).
pub fn check_bytes(
    server: &Server,
    ns: Option<&Netns>,
    files: &[(String, Vec<u8>)],
) -> Result<(), String> {
    for (path, want) in files {
        let addr = server.addr();
        let p = path.clone();
        let got = match ns {
            None => http::get(addr, &p, Duration::from_secs(10)),
            Some(ns) => ns.enter(move || http::get(addr, &p, Duration::from_secs(10)))?,
        }?;
        if got.status != 200 {
            return Err(format!(
                "{} answered {path} with status {}",
                server.def.label, got.status
            ));
        }
        if &got.body != want {
            return Err(format!(
                "{} answered {path} with {} bytes that differ from the file's {}",
                server.def.label,
                got.body.len(),
                want.len()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_below_the_ephemeral_range_and_not_repeated() {
        let low: u16 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
            .unwrap_or(32768);
        let a = free_port();
        let b = free_port();
        assert!(a >= 10_000 && a < low && b < low, "{a} {b} below {low}");
        assert_ne!(a, b);
        assert!(TcpListener::bind(("127.0.0.1", a)).is_ok());
    }
}

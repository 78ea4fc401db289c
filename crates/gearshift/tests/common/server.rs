//! The server process of the end-to-end tests: `gearshift serve` started on `127.0.0.1:0`
//! with test defaults, its banner read for the address, its output collected, and the
//! process killed on drop; a proxying gearshift in front of it on request
//! (GEARSHIFT_TEST_VIA_PROXY); and any `gearshift` command run to its exit, bounded. Apart
//! from `mod.rs` (temporary directories, polling) so launching reads on its own.

use super::{bin, req, Conn, Response, TempDir};
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

pub struct Server {
    child: Child,
    pub addr: SocketAddr,
    pub port: u16,
    pub banner: String,
    stdout: Arc<Mutex<Vec<String>>>,
    stderr: Arc<Mutex<Vec<String>>>,
    /// Kept so the docroot lives as long as the server.
    pub root: Option<TempDir>,
    /// Other directories (config files, logs) that must outlive the server.
    pub keep: Vec<TempDir>,
    /// With GEARSHIFT_TEST_VIA_PROXY=1: the origin this server (a proxy) forwards to.
    pub origin: Option<Box<Server>>,
}

/// How a launch failed: the exit status (None if it hung) and its stderr.
#[derive(Debug)]
pub struct LaunchError {
    pub status: Option<ExitStatus>,
    pub stderr: String,
    pub stdout: String,
}

fn has(args: &[String], flag: &str) -> bool {
    args.iter()
        .any(|a| a == flag || a.starts_with(&format!("{flag}=")))
}

/// `gearshift serve ROOT` with test defaults (`--listen 127.0.0.1:0 --workers 1
/// --access-log off`) unless `args` sets them.
pub fn serve(root: TempDir, args: &[&str]) -> Server {
    let mut full: Vec<String> = vec!["serve".into(), root.str()];
    full.extend(args.iter().map(|s| s.to_string()));
    let mut s = launch(&full, &[], None).unwrap_or_else(|e| panic!("server did not start: {e:?}"));
    s.root = Some(root);
    via_proxy_if_asked(s)
}

/// Like `serve`, with the docroot at `dir/rel` (so tests can put files beside the root).
pub fn serve_at(dir: TempDir, rel: &str, args: &[&str]) -> Server {
    let mut full: Vec<String> = vec!["serve".into(), dir.join(rel).to_str().unwrap().into()];
    full.extend(args.iter().map(|s| s.to_string()));
    let mut s = launch(&full, &[], None).unwrap_or_else(|e| panic!("server did not start: {e:?}"));
    s.root = Some(dir);
    via_proxy_if_asked(s)
}

/// GEARSHIFT_TEST_VIA_PROXY=1 puts a proxying gearshift in front of `origin` and returns
/// it (owning the origin and its docroot), so a suite written against the origin checks
/// that the proxy passes everything through unchanged.
pub fn via_proxy_if_asked(origin: Server) -> Server {
    if std::env::var("GEARSHIFT_TEST_VIA_PROXY").as_deref() != Ok("1") {
        return origin;
    }
    proxy_for(origin, "")
}

/// A gearshift proxy forwarding everything to `origin` (kept alive by the result);
/// `extra` is appended to the `[[proxy.upstream]]` table.
pub fn proxy_for(mut origin: Server, extra: &str) -> Server {
    let (cfg_dir, cfg) = config_file(&format!(
        "listen = \"127.0.0.1:0\"\nworkers = 1\n[[proxy.upstream]]\nname = \"origin\"\nservers = [\"{}\"]\n{extra}\n[[proxy.route]]\nprefix = \"/\"\nupstream = \"origin\"\n",
        origin.addr
    ));
    let empty = TempDir::new("proxy-root");
    let args: Vec<String> = vec!["serve".into(), empty.str(), "--config".into(), cfg];
    let mut p = launch(&args, &[], None).unwrap_or_else(|e| panic!("proxy did not start: {e:?}"));
    p.root = origin.root.take();
    p.keep = vec![cfg_dir, empty];
    p.origin = Some(Box::new(origin));
    p
}

/// A config file in its own temp dir; push the TempDir into `Server::keep`.
pub fn config_file(toml: &str) -> (TempDir, String) {
    let d = TempDir::new("cfg");
    let p = d.write("gearshift.toml", toml);
    let p = p.to_str().unwrap().to_string();
    (d, p)
}

/// A `gearshift` command with GEARSHIFT_* variables cleared, plus test defaults for the
/// listen address, worker count and access log when `args` starts with `serve` and lacks them.
pub fn command(args: &[String], env: &[(&str, &str)], cwd: Option<&Path>) -> Command {
    let mut args = args.to_vec();
    let env_has = |k: &str| env.iter().any(|(n, _)| *n == k);
    if args.first().map(String::as_str) == Some("serve") && !has(&args, "--check-config") {
        if !has(&args, "--listen") && !env_has("GEARSHIFT_LISTEN") && !has(&args, "--config") {
            args.push("--listen".into());
            args.push("127.0.0.1:0".into());
        }
        if !has(&args, "--workers") && !env_has("GEARSHIFT_WORKERS") && !has(&args, "--config") {
            args.push("--workers".into());
            args.push("1".into());
        }
        // GEARSHIFT_TEST_ENGINE=threads (say) runs the suite against another engine.
        if let Ok(engine) = std::env::var("GEARSHIFT_TEST_ENGINE") {
            if !has(&args, "--engine") && !env_has("GEARSHIFT_ENGINE") {
                args.push("--engine".into());
                args.push(engine);
            }
        }
        if !has(&args, "--access-log") && !env_has("GEARSHIFT_ACCESS_LOG") {
            args.push("--access-log".into());
            args.push("off".into());
        }
    }
    let mut cmd = Command::new(bin());
    cmd.args(&args);
    for (k, _) in std::env::vars() {
        if k.starts_with("GEARSHIFT_") {
            cmd.env_remove(k);
        }
    }
    cmd.env_remove("RUST_LOG");
    for (k, v) in env {
        cmd.env(k, v);
    }
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Run a command to completion (for `--check-config` and failing starts), at most 10 s.
pub fn run_to_exit(mut cmd: Command) -> (ExitStatus, String, String) {
    let mut child = cmd.spawn().expect("spawn gearshift");
    let (out, out_done) = collect_to_eof(child.stdout.take().unwrap());
    let (err, err_done) = collect_to_eof(child.stderr.take().unwrap());
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if start.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "gearshift did not exit within 10 s; stdout: {:?} stderr: {:?}",
                out.lock().unwrap(),
                err.lock().unwrap()
            );
        }
        thread::sleep(Duration::from_millis(20));
    };
    // Until both pipes reach EOF (a fixed short sleep lost the last line on a busy machine).
    let readers = Instant::now();
    while !(out_done.is_finished() && err_done.is_finished())
        && readers.elapsed() < Duration::from_secs(5)
    {
        thread::sleep(Duration::from_millis(10));
    }
    let o = out.lock().unwrap().join("\n");
    let e = err.lock().unwrap().join("\n");
    (status, o, e)
}

fn collect(r: impl Read + Send + 'static) -> Arc<Mutex<Vec<String>>> {
    collect_to_eof(r).0
}

/// The lines read so far, and the reader thread (finished at EOF).
fn collect_to_eof(
    r: impl Read + Send + 'static,
) -> (Arc<Mutex<Vec<String>>>, thread::JoinHandle<()>) {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let l2 = lines.clone();
    let reader = thread::spawn(move || {
        for line in BufReader::new(r).lines() {
            match line {
                Ok(l) => l2.lock().unwrap().push(l),
                Err(_) => break,
            }
        }
    });
    (lines, reader)
}

/// Start gearshift and wait (at most 10 s) for its banner; on failure return its stderr.
pub fn launch(
    args: &[String],
    env: &[(&str, &str)],
    cwd: Option<&Path>,
) -> Result<Server, LaunchError> {
    launch_with(args, env, cwd, |_| {})
}

/// `launch`, with the command adjusted by `tweak` first (say, a `pre_exec` setting limits).
pub fn launch_with(
    args: &[String],
    env: &[(&str, &str)],
    cwd: Option<&Path>,
    tweak: impl FnOnce(&mut Command),
) -> Result<Server, LaunchError> {
    let mut cmd = command(args, env, cwd);
    tweak(&mut cmd);
    let mut child = cmd.spawn().expect("spawn gearshift");
    let stdout_pipe = child.stdout.take().unwrap();
    let stderr = collect(child.stderr.take().unwrap());
    let stdout = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = mpsc::channel::<String>();
    let out2 = stdout.clone();
    thread::spawn(move || {
        let mut first = true;
        for line in BufReader::new(stdout_pipe).lines() {
            let Ok(line) = line else { break };
            if first {
                first = false;
                let _ = tx.send(line.clone());
            }
            out2.lock().unwrap().push(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    let banner = loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(line) => break line,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if let Some(st) = child.try_wait().unwrap() {
                    thread::sleep(Duration::from_millis(50));
                    return Err(LaunchError {
                        status: Some(st),
                        stderr: stderr.lock().unwrap().join("\n"),
                        stdout: stdout.lock().unwrap().join("\n"),
                    });
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(LaunchError {
                        status: None,
                        stderr: stderr.lock().unwrap().join("\n"),
                        stdout: stdout.lock().unwrap().join("\n"),
                    });
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let st = child.wait().unwrap();
                thread::sleep(Duration::from_millis(50));
                return Err(LaunchError {
                    status: Some(st),
                    stderr: stderr.lock().unwrap().join("\n"),
                    stdout: stdout.lock().unwrap().join("\n"),
                });
            }
        }
    };
    let addr = banner_addr(&banner).unwrap_or_else(|| {
        let _ = child.kill();
        panic!("banner does not name http://IP:PORT/: {banner:?}")
    });
    Ok(Server {
        child,
        addr,
        port: addr.port(),
        banner,
        stdout,
        stderr,
        root: None,
        keep: Vec::new(),
        origin: None,
    })
}

/// `gearshift: serving DIR on http://IP:PORT/ (...)` -> IP:PORT.
pub fn banner_addr(banner: &str) -> Option<SocketAddr> {
    let rest = &banner[banner.find(" on http://")? + " on http://".len()..];
    rest[..rest.find('/')?].parse().ok()
}

impl Server {
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn root(&self) -> &TempDir {
        self.root.as_ref().expect("server has no TempDir root")
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid.
        let rc = unsafe { libc::kill(self.pid(), sig) };
        assert_eq!(rc, 0, "kill({}, {sig}) failed", self.pid());
    }

    /// Wait for the process to exit, at most `limit`.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let start = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return Some(st);
            }
            if start.elapsed() > limit {
                return None;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Lines printed on stdout so far (the banner first).
    pub fn stdout_lines(&self) -> Vec<String> {
        self.stdout.lock().unwrap().clone()
    }

    pub fn stderr_text(&self) -> String {
        self.stderr.lock().unwrap().join("\n")
    }

    pub fn conn(&self) -> Conn {
        Conn::open(self.addr)
    }

    /// One request on a fresh connection.
    pub fn request(&self, raw: impl AsRef<[u8]>) -> Response {
        let mut c = self.conn();
        c.send(raw.as_ref());
        c.response()
    }

    pub fn get(&self, path: &str) -> Response {
        self.request(req("GET", path, &[]))
    }

    pub fn get_with(&self, path: &str, headers: &[(&str, &str)]) -> Response {
        self.request(req("GET", path, headers))
    }

    pub fn head(&self, path: &str, headers: &[(&str, &str)]) -> Response {
        let mut c = self.conn();
        c.send(&req("HEAD", path, headers));
        c.head_response()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

//! The FastCGI peers of the FastCGI tests: Debian's php-fpm, started per test with its own
//! configuration in a temporary directory (loopback port or Unix socket), and a small
//! Python FastCGI backend that answers wrongly on purpose (garbage, no header section,
//! FCGI_OVERLOADED) for the failure modes php-fpm never shows. Both are killed on drop.
//! Also: counting our connections to a backend port from /proc/net/tcp.
#![allow(dead_code)]

pub mod mux;

use super::common::{poll, TempDir};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub const FPM: &str = "php-fpm8.2";

/// Where php-fpm is, or None (then the caller skips; when root, it must be installed:
/// scripts/test installs php8.2-fpm).
pub fn fpm_binary() -> Option<String> {
    for dir in ["/usr/sbin", "/usr/bin", "/usr/local/sbin"] {
        let p = format!("{dir}/{FPM}");
        if std::path::Path::new(&p).exists() {
            return Some(p);
        }
    }
    None
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Some(binary), or None after printing why the test is skipped; panics when root (then
/// missing php-fpm is an installation bug, not a reason to skip).
pub fn fpm_or_skip(test: &str) -> Option<String> {
    match fpm_binary() {
        Some(b) => Some(b),
        None if is_root() => {
            panic!("{FPM} is not installed (scripts/test installs php8.2-fpm when root)")
        }
        None => {
            println!("SKIPPED {test}: {FPM} is not installed and we are not root to install it");
            None
        }
    }
}

/// A free loopback port (bound then released; the peer binds it right after).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub struct Fpm {
    child: Child,
    pub dir: TempDir,
    /// `127.0.0.1:PORT` or the socket path: what goes into `[fastcgi] backend`.
    pub backend: String,
    pub port: Option<u16>,
    bin: String,
    conf: String,
}

impl Fpm {
    /// php-fpm on a loopback port (`unix` false) or a Unix socket in its temp dir.
    pub fn start(bin: &str, unix: bool) -> Fpm {
        Fpm::start_with(bin, unix, "ondemand", 12)
    }

    /// `start` with php-fpm's `pm` and `pm.max_children` given (a small `static` pool has
    /// all its workers running from the start: tests/fastcgi_capacity.rs). php-fpm ties a
    /// worker to every connection, kept-alive ones too.
    #[allow(dead_code)]
    pub fn start_with(bin: &str, unix: bool, pm: &str, max_children: usize) -> Fpm {
        let dir = TempDir::new("fpm");
        let (listen, port) = if unix {
            (dir.join("fpm.sock").to_str().unwrap().to_string(), None)
        } else {
            let p = free_port();
            (format!("127.0.0.1:{p}"), Some(p))
        };
        // ondemand: workers start as connections come (pooled ones hold one each).
        let conf = format!(
            "[global]\nerror_log = {d}/fpm.log\ndaemonize = no\n[www]\nlisten = {listen}\n\
             listen.mode = 0666\npm = {pm}\npm.max_children = {max_children}\n\
             pm.process_idle_timeout = 30s\nrequest_terminate_timeout = 20s\n\
             catch_workers_output = yes\nphp_admin_value[post_max_size] = 200M\n\
             php_admin_value[memory_limit] = 64M\nphp_admin_value[output_buffering] = 0\n",
            d = dir.str()
        );
        let conf_path = dir.write("fpm.conf", conf);
        let conf = conf_path.to_str().unwrap().to_string();
        let mut f = Fpm {
            child: spawn_fpm(bin, &conf),
            backend: listen,
            port,
            dir,
            bin: bin.to_string(),
            conf,
        };
        f.wait_ready();
        f
    }

    fn wait_ready(&mut self) {
        let ready = poll(Duration::from_secs(10), || {
            let ok = match self.port {
                Some(p) => TcpStream::connect(("127.0.0.1", p)).is_ok(),
                None => std::os::unix::net::UnixStream::connect(&self.backend).is_ok(),
            };
            ok.then_some(())
        });
        if ready.is_none() {
            let log = std::fs::read_to_string(self.dir.join("fpm.log")).unwrap_or_default();
            panic!("php-fpm did not start listening on {}: {log}", self.backend);
        }
    }

    /// Stop php-fpm (closing every connection to it) and start it again on the same address.
    pub fn restart(&mut self) {
        self.stop();
        self.child = spawn_fpm(&self.bin, &self.conf);
        self.wait_ready();
    }

    fn stop(&mut self) {
        // SIGTERM: the master ends its workers at once, then itself.
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let gone = poll(Duration::from_secs(10), || {
            self.child.try_wait().ok().flatten().map(|_| ())
        });
        if gone.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// php-fpm's own log (workers' stray output, errors).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("fpm.log")).unwrap_or_default()
    }
}

fn spawn_fpm(bin: &str, conf: &str) -> Child {
    let mut cmd = Command::new(bin);
    // -n: no php.ini; -F: foreground; -R: allow running as root (CI is root).
    cmd.args(["-n", "-F", "-y", conf]);
    if is_root() {
        cmd.arg("-R");
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {bin}: {e}"))
}

impl Drop for Fpm {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Local ports of the established TCP connections to `127.0.0.1:port` (our side of them).
pub fn conns_to(port: u16) -> Vec<u16> {
    let text = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    let mut out = Vec::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 4 || f[3] != "01" {
            continue;
        }
        let port_of = |a: &str| u16::from_str_radix(a.rsplit(':').next().unwrap_or(""), 16).ok();
        if port_of(f[2]) == Some(port) {
            if let Some(local) = port_of(f[1]) {
                out.push(local);
            }
        }
    }
    // The kernel's table walk may list a connection twice while it changes.
    out.sort_unstable();
    out.dedup();
    out
}

/// A FastCGI backend in Python answering by SCRIPT_NAME: `/ok.x` a good answer, `/garbage.x`
/// bytes that are not records, `/nohead.x` STDOUT without a header section,
/// `/overloaded.x` END_REQUEST with FCGI_OVERLOADED, `/cut.x` a head and part of a body
/// and then a closed connection.
pub struct PyBackend {
    child: Child,
    pub addr: SocketAddr,
    _dir: TempDir,
}

const PY_BACKEND: &str = r#"
import socket, struct, sys
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", int(sys.argv[1]))); srv.listen(16)
def rec(t, rid, body=b""):
    return struct.pack(">BBHHBB", 1, t, rid, len(body), 0, 0) + body
def read_exact(c, n):
    b = b""
    while len(b) < n:
        d = c.recv(n - len(b))
        if not d: raise EOFError
        b += d
    return b
def pairs(b):
    out, i = {}, 0
    def ln():
        nonlocal i
        if b[i] < 128: i += 1; return b[i-1]
        v = struct.unpack(">I", b[i:i+4])[0] & 0x7fffffff; i += 4; return v
    while i < len(b):
        n = ln(); v = ln(); out[b[i:i+n]] = b[i+n:i+n+v]; i += n + v
    return out
while True:
    c, _ = srv.accept()
    try:
        params, rid = b"", 1
        while True:
            v, t, rid, n, p, _ = struct.unpack(">BBHHBB", read_exact(c, 8))
            body = read_exact(c, n + p)[:n]
            if t == 9:
                ans = bytes([15, 1]) + b"FCGI_MPXS_CONNS0"
                c.sendall(rec(10, 0, ans)); raise EOFError
            if t == 4: params += body
            if t == 5 and n == 0: break
        name = pairs(params).get(b"SCRIPT_NAME", b"")
        if name == b"/garbage.x":
            c.sendall(b"HTTP/1.1 200 OK\r\n\r\nnot fastcgi")
        elif name == b"/nohead.x":
            c.sendall(rec(6, rid, b"just text\n\n") + rec(6, rid) + rec(3, rid, b"\0" * 8))
        elif name == b"/overloaded.x":
            c.sendall(rec(3, rid, b"\0\0\0\0\x02\0\0\0"))
        elif name == b"/cut.x":
            c.sendall(rec(6, rid, b"Content-Type: text/plain\r\n\r\npartial"))
        else:
            c.sendall(rec(6, rid, b"Content-Type: text/plain\r\n\r\nok") + rec(6, rid) + rec(3, rid, b"\0" * 8))
    except Exception:
        pass
    c.close()
"#;

impl PyBackend {
    pub fn start() -> PyBackend {
        let dir = TempDir::new("pyfcgi");
        let script = dir.write("backend.py", PY_BACKEND);
        let port = free_port();
        let child = Command::new("python3")
            .arg(script)
            .arg(port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 runs");
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        poll(Duration::from_secs(10), || {
            TcpStream::connect(addr).ok().map(|_| ())
        })
        .expect("python FastCGI backend listens");
        PyBackend {
            child,
            addr,
            _dir: dir,
        }
    }
}

impl Drop for PyBackend {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

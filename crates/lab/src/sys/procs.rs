//! Every process the lab starts: spawned in its own process group (so a Ctrl-C at the terminal
//! reaches only the lab, which then stops them in order), with the file limit raised to its
//! hard value, optionally inside a network namespace, pinned to a CPU (`taskset`) and at a
//! higher priority (`nice`), the wrappers written into the command line as run. Each one is
//! registered until it has been reaped, so an interruption or a panic stops them all, by pid.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Set by SIGINT/SIGTERM; every wait of the lab checks it.
pub fn interrupt_flag() -> &'static Arc<AtomicBool> {
    static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();
    FLAG.get_or_init(|| Arc::new(AtomicBool::new(false)))
}

pub fn interrupted() -> bool {
    interrupt_flag().load(Ordering::Relaxed)
}

/// SIGINT and SIGTERM set the flag instead of killing the lab.
pub fn install_signal_handlers() {
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let _ = signal_hook::flag::register(sig, interrupt_flag().clone());
    }
}

fn registry() -> &'static Mutex<Vec<(i32, String)>> {
    static REG: OnceLock<Mutex<Vec<(i32, String)>>> = OnceLock::new();
    REG.get_or_init(|| Mutex::new(Vec::new()))
}

/// How to start one process.
#[derive(Clone, Debug, Default)]
pub struct Spawn {
    pub argv: Vec<String>,
    /// Run inside this network namespace (`ip netns exec`).
    pub netns: Option<String>,
    /// Pin to this CPU (`taskset -c`).
    pub cpu: Option<usize>,
    /// Start at this niceness (`nice -n`), when we are root.
    pub nice: Option<i32>,
    pub env: Vec<(String, String)>,
    pub stdout: Option<PathBuf>,
    pub stderr: Option<PathBuf>,
    pub cwd: Option<PathBuf>,
}

impl Spawn {
    pub fn new<S: AsRef<str>>(argv: &[S]) -> Spawn {
        Spawn {
            argv: argv.iter().map(|s| s.as_ref().to_string()).collect(),
            ..Spawn::default()
        }
    }

    /// The full command line as executed, wrappers included.
    pub fn full_argv(&self) -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        if let Some(ns) = &self.netns {
            v.extend(["ip", "netns", "exec", ns].map(String::from));
        }
        if let Some(cpu) = self.cpu {
            v.extend(["taskset".into(), "-c".into(), cpu.to_string()]);
        }
        if let Some(n) = self.nice.filter(|_| is_root()) {
            v.extend(["nice".into(), "-n".into(), n.to_string()]);
        }
        v.extend(self.argv.iter().cloned());
        v
    }

    pub fn display(&self) -> String {
        self.full_argv()
            .iter()
            .map(|a| shell_quote(a))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Starts the process (registered until reaped).
    pub fn start(&self, name: &str) -> Result<Proc, String> {
        let argv = self.full_argv();
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..]).stdin(Stdio::null());
        cmd.stdout(open_out(self.stdout.as_deref())?);
        cmd.stderr(open_out(self.stderr.as_deref())?);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        if let Some(d) = &self.cwd {
            cmd.current_dir(d);
        }
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                let mut lim = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
                    lim.rlim_cur = lim.rlim_max;
                    libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
                }
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .map_err(|e| format!("{name}: cannot start {}: {e}", argv[0]))?;
        let pid = child.id() as i32;
        // The child is waited for by pid (wait4, for its rusage); dropping the handle
        // neither kills nor reaps it.
        drop(child);
        registry().lock().unwrap().push((pid, name.to_string()));
        Ok(Proc {
            pid,
            name: name.to_string(),
            started: Instant::now(),
            reaped: None,
        })
    }
}

fn open_out(p: Option<&Path>) -> Result<Stdio, String> {
    match p {
        None => Ok(Stdio::null()),
        Some(p) => std::fs::File::create(p)
            .map(Stdio::from)
            .map_err(|e| format!("{}: {e}", p.display())),
    }
}

pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:=,@%+".contains(&b))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// How a process ended.
#[derive(Clone, Copy, Debug)]
pub struct Exit {
    /// Exit code, or 128 + signal.
    pub code: i32,
    /// User + system CPU seconds of the process and its reaped children.
    pub cpu_s: f64,
    pub wall_s: f64,
}

/// A started process.
#[derive(Debug)]
pub struct Proc {
    pub pid: i32,
    pub name: String,
    pub started: Instant,
    reaped: Option<Exit>,
}

impl Proc {
    /// Reaps the process if it has ended (None while it runs).
    pub fn try_wait(&mut self) -> Option<Exit> {
        if self.reaped.is_some() {
            return self.reaped;
        }
        let mut status = 0;
        // SAFETY: rusage is plain data filled by the kernel.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: wait4 on our own child's pid with valid pointers.
        let r = unsafe { libc::wait4(self.pid, &mut status, libc::WNOHANG, &mut ru) };
        if r == self.pid
            || (r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD))
        {
            let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
            let code = if r < 0 {
                -1
            } else if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else {
                128 + libc::WTERMSIG(status)
            };
            let exit = Exit {
                code,
                cpu_s: if r < 0 {
                    0.0
                } else {
                    tv(ru.ru_utime) + tv(ru.ru_stime)
                },
                wall_s: self.started.elapsed().as_secs_f64(),
            };
            self.reaped = Some(exit);
            registry().lock().unwrap().retain(|(p, _)| *p != self.pid);
            return Some(exit);
        }
        None
    }

    pub fn running(&mut self) -> bool {
        self.try_wait().is_none()
    }

    /// Stops the process group: SIGTERM, then SIGKILL after `grace`.
    pub fn stop(&mut self, grace: Duration) -> Exit {
        if let Some(e) = self.try_wait() {
            kill_group(self.pid, libc::SIGKILL);
            return e;
        }
        kill_group(self.pid, libc::SIGTERM);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Some(e) = self.try_wait() {
                // Children that outlive their leader (none should) go too.
                kill_group(self.pid, libc::SIGKILL);
                return e;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        kill_group(self.pid, libc::SIGKILL);
        loop {
            if let Some(e) = self.try_wait() {
                return e;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: kill on our own child's pid.
        unsafe {
            libc::kill(self.pid, sig);
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.reaped.is_none() {
            self.stop(Duration::from_secs(2));
        }
    }
}

fn kill_group(pid: i32, sig: i32) {
    // SAFETY: signalling the process group our child leads.
    unsafe {
        libc::kill(-pid, sig);
    }
}

/// Stops every registered process (an interruption, or the end of a panicking run).
pub fn stop_all() -> Vec<String> {
    let list: Vec<(i32, String)> = registry().lock().unwrap().drain(..).collect();
    let mut stopped = Vec::new();
    for (pid, name) in &list {
        kill_group(*pid, libc::SIGTERM);
        stopped.push(format!("{name} (pid {pid})"));
    }
    let deadline = Instant::now() + Duration::from_secs(3);
    for (pid, _) in &list {
        loop {
            let mut status = 0;
            // SAFETY: reaping our own child.
            let r = unsafe { libc::waitpid(*pid, &mut status, libc::WNOHANG) };
            if r != 0 || Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        kill_group(*pid, libc::SIGKILL);
        // SAFETY: as above; blocking is bounded because SIGKILL was sent.
        unsafe {
            let mut status = 0;
            libc::waitpid(*pid, &mut status, 0);
        }
    }
    stopped
}

/// Runs a short command to completion and returns its stdout (bounded by `limit`).
pub fn output(argv: &[&str], limit: Duration) -> Result<String, String> {
    let mut cmd = Command::new(argv[0]);
    cmd.args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    use std::os::unix::process::CommandExt;
    cmd.process_group(0);
    let mut child = cmd.spawn().map_err(|e| format!("{}: {e}", argv[0]))?;
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let t1 = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut out, &mut s);
        s
    });
    let t2 = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut s);
        s
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().map_err(|e| e.to_string())? {
            break s;
        }
        if Instant::now() > deadline {
            kill_group(child.id() as i32, libc::SIGKILL);
            let _ = child.wait();
            return Err(format!("{}: no answer within {limit:?}", argv.join(" ")));
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let (o, e) = (t1.join().unwrap_or_default(), t2.join().unwrap_or_default());
    if status.success() {
        Ok(if o.trim().is_empty() { e } else { o })
    } else {
        Err(format!(
            "{} failed ({status}): {}",
            argv.join(" "),
            e.lines().last().unwrap_or("").trim()
        ))
    }
}

/// Sleeps `d`, waking early (false) on an interruption.
pub fn sleep(d: Duration) -> bool {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if interrupted() {
            return false;
        }
        std::thread::sleep((end - Instant::now()).min(Duration::from_millis(50)));
    }
    !interrupted()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("abc-1.2:3"), "abc-1.2:3");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn wrappers_are_in_the_command_line() {
        let mut s = Spawn::new(&["nginx", "-c", "x y"]);
        s.cpu = Some(0);
        s.netns = Some("ns1".into());
        let argv = s.full_argv();
        assert_eq!(&argv[..6], ["ip", "netns", "exec", "ns1", "taskset", "-c"]);
        assert_eq!(argv.last().unwrap(), "x y");
        assert!(s.display().ends_with("nginx -c 'x y'"));
    }

    #[test]
    fn start_wait_and_stop() {
        let mut p = Spawn::new(&["sh", "-c", "exit 3"]).start("t").unwrap();
        let exit = loop {
            if let Some(e) = p.try_wait() {
                break e;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        assert_eq!(exit.code, 3);
        let mut p = Spawn::new(&["sleep", "30"]).start("t").unwrap();
        assert!(p.running());
        let e = p.stop(Duration::from_secs(2));
        assert_eq!(e.code, 128 + libc::SIGTERM);
        assert!(!registry()
            .lock()
            .unwrap()
            .iter()
            .any(|(pid, _)| *pid == p.pid));
    }

    #[test]
    fn bounded_output() {
        assert_eq!(
            output(&["echo", "hi"], Duration::from_secs(5)).unwrap(),
            "hi\n"
        );
        assert!(output(&["sleep", "5"], Duration::from_millis(100)).is_err());
        assert!(output(&["false"], Duration::from_secs(5)).is_err());
    }
}

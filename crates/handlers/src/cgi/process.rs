//! One running CGI script: spawned in its own process group, its stdout read with an
//! inactivity timeout while its stderr goes to the error log line by line, and the client
//! watched for a hang-up, all in one poll(2). However the exchange ends, `Drop` kills the
//! whole group and reaps the script, so no process outlives its request: a script gets a
//! short grace period to exit after its output ends, then SIGKILL. The group is killed
//! while the leader is still unreaped (a zombie holds its pid), so the signal cannot reach
//! an unrelated process that reused the id.

use rustix::event::{poll, PollFd, PollFlags};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::io::Errno;
use rustix::process::{Pid, Signal};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Longest single poll before the deadlines are checked again.
const TICK_MS: u64 = 200;
/// Time a script has to exit after closing its output before its group is killed.
const EXIT_GRACE: Duration = Duration::from_millis(1000);
/// Longest stderr line logged whole.
const MAX_LOG_LINE: usize = 4096;

/// Why reading the script's output stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ReadFail {
    /// No output for the timeout (or the server's drain deadline passed).
    Timeout,
    /// The client hung up.
    ClientGone,
    Io,
}

/// The script's process group, shared with the thread feeding its stdin (which kills it
/// when the request body turns out bad).
pub(super) struct Group {
    pgid: Option<Pid>,
    /// Set once the leader is reaped: from then on the id may be reused, so no more kills.
    reaped: Mutex<bool>,
}

impl Group {
    /// SIGKILL the whole process group (unless the leader was reaped already).
    pub(super) fn kill(&self) {
        let reaped = self.reaped.lock().unwrap_or_else(|p| p.into_inner());
        if !*reaped {
            if let Some(pgid) = self.pgid {
                let _ = rustix::process::kill_process_group(pgid, Signal::Kill);
            }
        }
    }
}

pub(super) struct Running {
    child: Child,
    pub group: Arc<Group>,
    pidfd: Option<OwnedFd>,
    pub stdout: ChildStdout,
    stderr: Option<ChildStderr>,
    err_line: Vec<u8>,
    /// The script's name, for log lines.
    name: String,
}

/// Make `cmd` execute `file` (fexecve) instead of looking its program up by path again: the
/// descriptor the handler opened beneath the root and checked is the one run, whatever
/// happens to the path in between. `argv0` and `vars` are the program name and the whole
/// environment (the same as `cmd`'s, built here before the fork: the child may not
/// allocate). An interpreted script is read by its interpreter through `/dev/fd/N`, so the
/// descriptor stays open across the exec (its close-on-exec flag is cleared in the child).
/// libc's `fexecve` directly rather than nix's, which allocates its arrays in the child.
pub(super) fn exec_descriptor(
    cmd: &mut Command,
    file: std::fs::File,
    argv0: &[u8],
    vars: &[(std::ffi::OsString, std::ffi::OsString)],
) -> std::io::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::io::AsRawFd;
    let invalid = |_| std::io::Error::from(std::io::ErrorKind::InvalidInput);
    let argv0 = CString::new(argv0).map_err(invalid)?;
    let envs: Vec<CString> = vars
        .iter()
        .map(|(k, v)| CString::new([k.as_bytes(), b"=", v.as_bytes()].concat()).map_err(invalid))
        .collect::<Result<_, _>>()?;
    let exec = Exec {
        argv: vec![argv0.as_ptr(), std::ptr::null()],
        envp: envs
            .iter()
            .map(|c| c.as_ptr())
            .chain([std::ptr::null()])
            .collect(),
        _strings: (argv0, envs),
        file,
    };
    // SAFETY: the closure runs in the child between fork and exec and calls only fcntl
    // and fexecve (async-signal-safe) on memory prepared before the fork.
    unsafe {
        cmd.pre_exec(move || {
            let exec = &exec; // the whole value (Send), not its fields
            let fd = exec.file.as_raw_fd();
            if libc::fcntl(fd, libc::F_SETFD, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::fexecve(fd, exec.argv.as_ptr(), exec.envp.as_ptr());
            Err(std::io::Error::last_os_error())
        });
    }
    Ok(())
}

/// What the child's fexecve needs, prepared before the fork (the pointers point into
/// `_strings`, which lives as long as they do).
struct Exec {
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    _strings: (std::ffi::CString, Vec<std::ffi::CString>),
    file: std::fs::File,
}

// SAFETY: the raw pointers point into `_strings`, owned by the same value and never
// changed; the value is only read (in the forked child).
unsafe impl Send for Exec {}
unsafe impl Sync for Exec {}

/// Spawn `cmd` with piped stdio in a new process group (pgid = its pid).
pub(super) fn spawn(mut cmd: Command, name: String) -> std::io::Result<(Running, ChildStdin)> {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cmd.spawn()?;
    let pgid = Pid::from_raw(child.id() as i32);
    let pidfd = pgid
        .and_then(|p| rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()).ok());
    let stdin = child.stdin.take().expect("piped stdin");
    let stdout = child.stdout.take().expect("piped stdout");
    let stderr = child.stderr.take().expect("piped stderr");
    let _ = rustix::io::ioctl_fionbio(&stdout, true);
    let _ = rustix::io::ioctl_fionbio(&stderr, true);
    Ok((
        Running {
            child,
            group: Arc::new(Group {
                pgid,
                reaped: Mutex::new(false),
            }),
            pidfd,
            stdout,
            stderr: Some(stderr),
            err_line: Vec::new(),
            name,
        },
        stdin,
    ))
}

impl Running {
    pub(super) fn kill(&self) {
        self.group.kill();
    }

    /// Read output into `buf`; Ok(0) at its end. Waits at most `timeout_ms` for output, and
    /// gives up once `past_drain()` says the server's drain deadline has passed (checked at
    /// every tick, since shutdown may begin while waiting); while waiting, stderr is logged
    /// and `client` (when given) is watched for a hang-up.
    pub(super) fn read(
        &mut self,
        buf: &mut [u8],
        timeout_ms: u64,
        past_drain: &dyn Fn() -> bool,
        client: Option<BorrowedFd<'_>>,
    ) -> Result<usize, ReadFail> {
        let deadline = Instant::now() + Duration::from_millis(timeout_ms);
        loop {
            match rustix::io::read(&self.stdout, &mut *buf) {
                Ok(n) => return Ok(n),
                Err(Errno::INTR) => continue,
                Err(Errno::AGAIN) => {}
                Err(_) => return Err(ReadFail::Io),
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || past_drain() {
                return Err(ReadFail::Timeout);
            }
            let wait = (left.as_millis() as u64).min(TICK_MS) as i32;
            let out = self.stdout.as_fd();
            let err = self.stderr.as_ref().map(|e| e.as_fd());
            let mut fds = vec![PollFd::new(&out, PollFlags::IN)];
            if let Some(c) = &client {
                fds.push(PollFd::new(c, PollFlags::RDHUP));
            }
            if let Some(e) = &err {
                fds.push(PollFd::new(e, PollFlags::IN));
            }
            match poll(&mut fds, wait) {
                Ok(_) | Err(Errno::INTR) => {}
                Err(_) => return Err(ReadFail::Io),
            }
            let hangup = PollFlags::RDHUP | PollFlags::HUP | PollFlags::ERR;
            if client.is_some() && fds[1].revents().intersects(hangup) {
                return Err(ReadFail::ClientGone);
            }
            let err_ready = err.is_some()
                && !fds
                    .last()
                    .map_or(PollFlags::empty(), |f| f.revents())
                    .is_empty();
            drop(fds);
            if err_ready {
                self.log_stderr();
            }
        }
    }

    /// Log what the script wrote to stderr so far, one event per line.
    fn log_stderr(&mut self) {
        let Some(err) = self.stderr.take() else {
            return;
        };
        let mut buf = [0u8; 4096];
        loop {
            match rustix::io::read(&err, &mut buf) {
                Ok(0) => {
                    self.flush_err_line();
                    return; // EOF: stderr stays closed
                }
                Ok(n) => {
                    for &b in &buf[..n] {
                        if b == b'\n' || self.err_line.len() >= MAX_LOG_LINE {
                            self.flush_err_line();
                        }
                        if b != b'\n' {
                            self.err_line.push(b);
                        }
                    }
                }
                Err(Errno::INTR) => continue,
                Err(_) => break,
            }
        }
        self.stderr = Some(err);
    }

    fn flush_err_line(&mut self) {
        if !self.err_line.is_empty() {
            let line = String::from_utf8_lossy(&self.err_line);
            tracing::warn!(target: "cgi", script = %self.name, "stderr: {line}");
            self.err_line.clear();
        }
    }

    /// Wait (at most `grace`) for the script to exit, logging its stderr.
    fn await_exit(&mut self, grace: Duration) {
        let until = Instant::now() + grace;
        loop {
            self.log_stderr();
            let left = until.saturating_duration_since(Instant::now());
            let Some(pidfd) = &self.pidfd else { return };
            let mut fds = vec![PollFd::new(pidfd, PollFlags::IN)];
            if let Some(e) = &self.stderr {
                fds.push(PollFd::new(e, PollFlags::IN));
            }
            match poll(&mut fds, (left.as_millis() as u64).min(TICK_MS) as i32) {
                _ if fds[0].revents().contains(PollFlags::IN) => return,
                _ if left.is_zero() => return,
                _ => {}
            }
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.await_exit(EXIT_GRACE);
        let group = self.group.clone();
        let mut reaped = group.reaped.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(pgid) = group.pgid {
            // Also takes any process the script left behind in its group.
            let _ = rustix::process::kill_process_group(pgid, Signal::Kill);
        }
        match self.child.wait() {
            Ok(st) if !st.success() => {
                tracing::debug!(target: "cgi", script = %self.name, "exited: {st}")
            }
            Ok(_) => {}
            Err(e) => tracing::error!(target: "cgi", script = %self.name, "wait: {e}"),
        }
        *reaped = true;
        drop(reaped);
        self.log_stderr();
        self.flush_err_line();
    }
}

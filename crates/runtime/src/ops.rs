//! What an operator's service manager expects of a server process: the listening socket
//! handed over by systemd (socket activation, `LISTEN_FDS`), readiness, reloading and
//! stopping announced to it (`sd_notify` when `NOTIFY_SOCKET` is set), a pid file, and
//! privileges dropped to `user`/`group` once the privileged work (binding port 80, opening
//! logs) is done and before any child is forked. Nothing here daemonizes: systemd and
//! container runtimes supervise the process as it is.

use nix::unistd::{Gid, Group, Uid, User};
use sd_notify::NotifyState;
use std::net::TcpListener;
use std::os::fd::{FromRawFd, RawFd};
use std::path::{Path, PathBuf};

/// Listening sockets passed by the service manager (`LISTEN_PID` is this process,
/// `LISTEN_FDS` of them from descriptor 3, as many as there are `ListenStream=` lines), each
/// checked to be a listening TCP socket.
/// The variables are unset so children do not take the sockets for theirs. Empty when the
/// server was not socket-activated.
pub fn activated_listeners() -> Result<Vec<TcpListener>, String> {
    let fds: Vec<RawFd> = sd_notify::listen_fds()
        .map_err(|e| format!("socket activation: {e}"))?
        .collect();
    let mut out = Vec::with_capacity(fds.len());
    for fd in fds {
        // SAFETY: the service manager passed `fd` to this process for it to own (sd_listen_fds
        // protocol); `listen_fds` checked LISTEN_PID and marked it close-on-exec, and nothing
        // else in this process has taken it.
        let owned = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        let listening = rustix::net::sockopt::get_socket_acceptconn(&owned)
            .map_err(|e| format!("socket activation: descriptor {fd}: {e}"))?;
        let stream = rustix::net::sockopt::get_socket_type(&owned)
            .map_err(|e| format!("socket activation: descriptor {fd}: {e}"))?
            == rustix::net::SocketType::STREAM;
        if !listening || !stream {
            return Err(format!(
                "socket activation: descriptor {fd} is not a listening stream socket"
            ));
        }
        out.push(TcpListener::from(owned));
    }
    Ok(out)
}

/// What `READY=1` says in `STATUS=` (`systemctl status` shows it): set once listening.
static LISTENING: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Say where the server listens (`serving http://A/ https://B/`) in the readiness status.
pub fn set_listening(urls: &str) {
    let _ = LISTENING.set(urls.to_string());
}

/// Tells the service manager (if any: `NOTIFY_SOCKET`) how the server is doing. Failures
/// are logged, never fatal: a manager that cannot be told is not the server's problem.
pub fn notify(state: Notify) {
    if std::env::var_os("NOTIFY_SOCKET").is_none() {
        return;
    }
    let status;
    let states: Vec<NotifyState> = match state {
        Notify::Ready => {
            status = match LISTENING.get() {
                Some(urls) => format!("serving {urls}"),
                None => "serving".to_string(),
            };
            vec![
                NotifyState::Ready,
                NotifyState::MainPid(std::process::id()),
                NotifyState::Status(&status),
            ]
        }
        Notify::Reloading => match NotifyState::monotonic_usec_now() {
            // systemd >= 253 requires MONOTONIC_USEC with RELOADING=1.
            Ok(now) => vec![NotifyState::Reloading, now],
            Err(_) => vec![NotifyState::Reloading],
        },
        Notify::Stopping => vec![NotifyState::Stopping],
    };
    if let Err(e) = sd_notify::notify(false, &states) {
        tracing::warn!("sd_notify: {e}");
    }
}

/// A state change announced with `notify`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Notify {
    /// Listening; also after a reload.
    Ready,
    Reloading,
    Stopping,
}

/// The pid file: written (atomically) once the server listens, removed when it stops if it
/// still names this process.
pub struct PidFile {
    path: PathBuf,
}

impl PidFile {
    pub fn write(path: &Path) -> Result<PidFile, String> {
        let pid = std::process::id();
        let tmp = path.with_extension(format!("tmp{pid}"));
        std::fs::write(&tmp, format!("{pid}\n"))
            .and_then(|()| std::fs::rename(&tmp, path))
            .map_err(|e| {
                let _ = std::fs::remove_file(&tmp);
                format!("pid_file: {}: {e}", path.display())
            })?;
        Ok(PidFile {
            path: path.to_path_buf(),
        })
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        let ours = std::fs::read_to_string(&self.path)
            .is_ok_and(|s| s.trim() == std::process::id().to_string());
        if ours {
            if let Err(e) = std::fs::remove_file(&self.path) {
                tracing::warn!("pid_file: {}: {e}", self.path.display());
            }
        }
    }
}

/// The identity `user`/`group` name, looked up once (at validation and before dropping).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identity {
    pub uid: Uid,
    pub gid: Gid,
}

/// Resolve `user` (a name or a number) and `group` (the user's primary group when empty).
/// `None` when `user` is empty: the server keeps the identity it was started with.
pub fn identity(user: &str, group: &str) -> Result<Option<Identity>, String> {
    if user.is_empty() {
        if !group.is_empty() {
            return Err("group: set user too (the group alone is not dropped to)".into());
        }
        return Ok(None);
    }
    let u = match user.parse::<u32>() {
        Ok(n) => User::from_uid(Uid::from_raw(n)),
        Err(_) => User::from_name(user),
    }
    .map_err(|e| format!("user: {user}: {e}"))?
    .ok_or_else(|| format!("user: no such user '{user}'"))?;
    let gid = if group.is_empty() {
        u.gid
    } else {
        match group.parse::<u32>() {
            Ok(n) => Group::from_gid(Gid::from_raw(n)),
            Err(_) => Group::from_name(group),
        }
        .map_err(|e| format!("group: {group}: {e}"))?
        .ok_or_else(|| format!("group: no such group '{group}'"))?
        .gid
    };
    Ok(Some(Identity { uid: u.uid, gid }))
}

/// Become `id` for good: supplementary groups dropped, then the group, then the user (in
/// that order: after setuid the process may no longer change its groups), and checked that
/// root cannot be regained. A no-op when the process already is `id`; an error when it is
/// not root and asked to become someone else.
pub fn drop_privileges(id: Identity) -> Result<(), String> {
    if Uid::effective() == id.uid && Gid::effective() == id.gid {
        return Ok(());
    }
    if !Uid::effective().is_root() {
        return Err(format!(
            "user: only root can switch to uid {} (running as uid {})",
            id.uid,
            Uid::effective()
        ));
    }
    nix::unistd::setgroups(&[id.gid]).map_err(|e| format!("group: setgroups: {e}"))?;
    nix::unistd::setgid(id.gid).map_err(|e| format!("group: setgid({}): {e}", id.gid))?;
    nix::unistd::setuid(id.uid).map_err(|e| format!("user: setuid({}): {e}", id.uid))?;
    if !id.uid.is_root() && nix::unistd::setuid(Uid::from_raw(0)).is_ok() {
        return Err("user: root could be regained after dropping privileges".into());
    }
    // Forked children (and their core dumps) stay ours, not root's: dumpable again.
    let _ = rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::Dumpable);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_resolve_by_name_and_number_and_errors_name_the_option() {
        assert_eq!(identity("", ""), Ok(None));
        assert!(identity("", "root").unwrap_err().starts_with("group:"));
        let root = identity("root", "").unwrap().unwrap();
        assert_eq!((root.uid.as_raw(), root.gid.as_raw()), (0, 0));
        assert_eq!(identity("0", "0").unwrap(), Some(root));
        assert!(identity("no-such-user-here", "")
            .unwrap_err()
            .starts_with("user: no such user"));
        assert!(identity("root", "no-such-group-here")
            .unwrap_err()
            .starts_with("group: no such group"));
    }

    #[test]
    fn the_pid_file_names_this_process_and_is_removed_when_ours() {
        let dir = std::env::temp_dir().join(format!("gs-pid-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("gs.pid");
        let f = PidFile::write(&path).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!("{}\n", std::process::id())
        );
        drop(f);
        assert!(!path.exists());
        // Someone else's pid file (a newer server took it over) is left alone.
        let f = PidFile::write(&path).unwrap();
        std::fs::write(&path, "1\n").unwrap();
        drop(f);
        assert!(path.exists());
        let e = PidFile::write(&dir.join("missing/gs.pid")).err().unwrap();
        assert!(e.starts_with("pid_file:"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

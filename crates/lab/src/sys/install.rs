//! Peers and tools come from Debian packages: found on the PATH (or in /usr/sbin), else
//! installed with apt when we are root (waiting for another apt to finish rather than
//! fighting it), else unavailable, which makes their rows "not tested", never a failed run.
//! One attempt per package per run.

use crate::sys::procs;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// Where `binary` is, searching the PATH and the sbin directories root's PATH may lack.
pub fn which(binary: &str) -> Option<PathBuf> {
    if binary.contains('/') {
        let p = PathBuf::from(binary);
        return p.is_file().then_some(p);
    }
    let path = std::env::var("PATH").unwrap_or_default();
    let found = path
        .split(':')
        .chain(["/usr/local/sbin", "/usr/sbin", "/sbin", "/usr/bin", "/bin"])
        .filter(|d| !d.is_empty())
        .map(|d| PathBuf::from(d).join(binary))
        .find(|p| p.is_file());
    found
}

fn attempts() -> &'static Mutex<HashMap<String, Result<(), String>>> {
    static A: OnceLock<Mutex<HashMap<String, Result<(), String>>>> = OnceLock::new();
    A.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Makes `binary` available, installing Debian `package` if needed. Err says why not.
pub fn ensure(binary: &str, package: &str) -> Result<PathBuf, String> {
    if let Some(p) = which(binary) {
        return Ok(p);
    }
    let mut tried = attempts().lock().unwrap();
    if let Some(Err(e)) = tried.get(package) {
        return Err(e.clone());
    }
    let result = install(package);
    tried.insert(package.to_string(), result.clone());
    drop(tried);
    result?;
    which(binary).ok_or_else(|| format!("{package} installed but {binary} is not on the PATH"))
}

fn install(package: &str) -> Result<(), String> {
    if !procs::is_root() {
        return Err(format!(
            "{package} is not installed (run as root to have it installed)"
        ));
    }
    if which("apt-get").is_none() {
        return Err(format!(
            "{package} is not installed and there is no apt-get"
        ));
    }
    eprintln!("gearshift lab: installing Debian package {package}");
    // Packages such as nginx and apache2 start their service on port 80 when installed;
    // two of them would fight over it and fail the install. A policy-rc.d that refuses
    // service starts (Debian's own mechanism, as container images ship it) prevents that.
    let policy = std::path::Path::new("/usr/sbin/policy-rc.d");
    let placed = !policy.exists()
        && std::fs::write(
            policy,
            "#!/bin/sh\n# gearshift lab: no service starts while installing\nexit 101\n",
        )
        .is_ok();
    if placed {
        crate::peers::set_mode(policy, 0o755);
    }
    let result = apt_install(package);
    if placed {
        let _ = std::fs::remove_file(policy);
    }
    result
}

fn apt_install(package: &str) -> Result<(), String> {
    let limit = Duration::from_secs(900);
    let apt = |args: &[&str]| {
        let mut v = vec![
            "env",
            "DEBIAN_FRONTEND=noninteractive",
            "apt-get",
            "-o",
            "DPkg::Lock::Timeout=600",
        ];
        v.extend_from_slice(args);
        procs::output(&v, limit)
    };
    let args = ["install", "-y", "-q", "--no-install-recommends", package];
    if apt(&args).is_ok() {
        return Ok(());
    }
    apt(&["update", "-q"]).map_err(|e| format!("apt-get update: {e}"))?;
    apt(&args)
        .map(drop)
        .map_err(|e| format!("apt-get install {package}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_binaries() {
        assert!(which("sh").is_some());
        assert!(which("/bin/sh").is_some());
        assert!(which("no-such-binary-gearshift").is_none());
    }
}

//! Records the gearshift commit the lab was built from (`git rev-parse`), for the report's
//! machine section; "unknown" outside a git checkout.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    Command::new("git")
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    let suffix = if dirty { "+dirty" } else { "" };
    println!("cargo:rustc-env=GEARSHIFT_LAB_COMMIT={commit}{suffix}");
    // Rebuilt when HEAD moves (a commit or a checkout; worktrees keep HEAD apart from refs).
    let mut watch = Vec::new();
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        watch.push(format!("{dir}/HEAD"));
        watch.push(format!("{dir}/index"));
    }
    if let (Some(common), Some(head)) = (
        git(&["rev-parse", "--git-common-dir"]),
        git(&["rev-parse", "--symbolic-full-name", "HEAD"]),
    ) {
        watch.push(format!("{common}/{head}"));
    }
    for p in watch {
        if std::path::Path::new(&p).exists() {
            println!("cargo:rerun-if-changed={p}");
        }
    }
}

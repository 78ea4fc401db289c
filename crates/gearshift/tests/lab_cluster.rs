//! `gearshift lab cluster` end to end, its cheap half: where network namespaces cannot be
//! made (here: run as `nobody` when the test is root, or as the unprivileged user it is),
//! the lab still succeeds and writes the cluster report, every claim "not tested" with the
//! reason, its summary valid against the schema, and the cluster row in the top-level
//! verdict matrix. The measured half (about 2 minutes even in quick mode, 14 clusters) is
//! `gearshift lab cluster --quick` by hand or bench/cluster; CI time is too tight for it.

mod common;

use common::{bin, TempDir};
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn lab_cluster_without_namespaces_is_not_tested_and_still_reports() {
    if let Ok(e) = std::env::var("GEARSHIFT_TEST_ENGINE") {
        if e != "event" {
            eprintln!("SKIPPED: the lab runs no engine of its own (GEARSHIFT_TEST_ENGINE={e})");
            return;
        }
    }
    let dir = TempDir::new("labcluster");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = dir.join("report");
    let mut cmd = Command::new(bin());
    cmd.args(["lab", "cluster", "--quick", "--out"])
        .arg(&out)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        cmd.uid(65534).gid(65534);
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("SKIPPED: cannot run the binary as nobody: {e}");
            return;
        }
    };
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("gearshift lab cluster overran 60 s without namespaces");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let text = reader.join().unwrap();
    if status.code() == Some(126) || text.contains("Permission denied") && !out.exists() {
        eprintln!("SKIPPED: the binary is not reachable as nobody: {text}");
        return;
    }
    assert!(status.success(), "lab cluster failed: {text}");
    assert!(
        text.contains("cluster not tested: network namespaces need root"),
        "{text}"
    );
    let paper = out.join("cluster");
    for f in ["index.html", "runs.csv", "series.csv", "summary.json"] {
        assert!(paper.join(f).is_file(), "cluster/{f} missing");
    }
    let s: Value =
        serde_json::from_str(&std::fs::read_to_string(paper.join("summary.json")).unwrap())
            .unwrap();
    gearshift_lab::report::summary::validate(&s).unwrap();
    assert_eq!(s["paper"], "cluster");
    assert_eq!(s["mode"], "quick");
    let claims = s["claims"].as_array().unwrap();
    let ids: Vec<&str> = claims.iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["C1", "C2", "C3", "C4", "C5", "C6"]);
    for c in claims {
        assert_eq!(c["verdict"], "not tested", "{c}");
        assert!(
            c["reason"].as_str().unwrap().contains("need root"),
            "{}: {}",
            c["id"],
            c["reason"]
        );
    }
    let page = std::fs::read_to_string(paper.join("index.html")).unwrap();
    assert!(page.contains("id=\"claim-C4\"") && page.contains("network namespaces need root"));
    let index = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(
        index.contains("href=\"cluster/index.html#claim-C1\""),
        "the cluster row is in the verdict matrix"
    );
}

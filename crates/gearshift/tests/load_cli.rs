//! `gearshift load` end to end against `gearshift serve`: a closed-loop run with exact counts
//! in JSON, the human summary, a SPECweb99-like file set served and loaded through its mix,
//! and the refusal of non-loopback targets.

mod common;
use common::*;

/// These tests are about the generator, not an engine: the event engine serves its many
/// keep-alive connections at once whatever GEARSHIFT_TEST_ENGINE says (a one-worker blocking
/// engine would hold the other connections until the keep-alive timeout).
const SERVER: &[&str] = &["--engine", "event"];

fn load(args: &[&str]) -> (bool, String, String) {
    let mut full: Vec<String> = vec!["load".into()];
    if args.first() != Some(&"fileset") {
        // The progress line's switch belongs to load runs, not to the fileset subcommand.
        full.push("-q".into());
    }
    full.extend(args.iter().map(|s| s.to_string()));
    let (status, out, err) = run_to_exit(command(&full, &[], None));
    (status.success(), out, err)
}

fn json(out: &str) -> serde_json::Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

#[test]
fn closed_loop_exact_count_as_json() {
    let s = serve(standard_docroot(), SERVER);
    let url = format!("http://{}/data.bin", s.addr);
    let (ok, out, err) = load(&[&url, "-c", "4", "-n", "500", "-t", "2", "--json"]);
    assert!(ok, "{err}");
    let j = json(&out);
    assert_eq!(j["schema"], "gearshift-load/1");
    assert_eq!(j["requests"], 500);
    assert_eq!(j["ok"], 500);
    assert_eq!(j["errors"]["total"], 0);
    assert!(j["bytes"].as_u64().unwrap() >= 500 * 1000);
    let per_second: u64 = j["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["requests"].as_u64().unwrap())
        .sum();
    assert_eq!(per_second, 500);
}

#[test]
fn human_summary() {
    let s = serve(standard_docroot(), SERVER);
    let url = format!("http://{}/file.txt", s.addr);
    let (ok, out, err) = load(&[&url, "-c", "2", "-n", "50", "--rate", "500"]);
    assert!(ok, "{err}");
    assert!(out.contains("50 requests (50 2xx)"), "{out}");
    assert!(out.contains("open loop at 500 req/s"), "{out}");
    assert!(out.contains("latency") && out.contains("p99"), "{out}");
    assert!(out.contains("errors    none"), "{out}");
}

#[test]
fn fileset_served_and_loaded_through_its_mix() {
    let dir = TempDir::new("fileset");
    let (ok, out, err) = load(&["fileset", &dir.str(), "--dirs", "1"]);
    assert!(ok, "{err}");
    assert!(out.contains("36 files"), "{out}");
    let mix = dir.join("specweb99.mix");
    assert!(mix.exists());
    let s = serve(dir, SERVER);
    let url = format!("http://{}/", s.addr);
    let (ok, out, err) = load(&[
        &url,
        "-c",
        "4",
        "-n",
        "400",
        "--mix",
        mix.to_str().unwrap(),
        "--seed",
        "1",
        "--json",
    ]);
    assert!(ok, "{err}");
    let j = json(&out);
    assert_eq!(j["requests"], 400, "{out}");
    assert_eq!(j["ok"], 400, "every file of the mix exists: {out}");
    assert_eq!(j["config"]["mix"].as_array().unwrap().len(), 36);
}

#[test]
fn refuses_non_loopback_targets() {
    let (ok, _, err) = load(&["http://192.0.2.7:80/", "-n", "1"]);
    assert!(!ok);
    assert!(err.contains("not a loopback address"), "{err}");
}

#[test]
fn bad_input_is_one_line_and_non_zero() {
    let dir = TempDir::new("load-bad");
    let bad_mix = dir.join("bad.mix");
    std::fs::write(&bad_mix, "/a notaweight\n").unwrap();
    let missing = dir.join("missing.mix");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["http://127.0.0.1:1/".into(), "-c".into(), "0".into()],
            "connections",
        ),
        (
            vec!["http://127.0.0.1:1/".into(), "--rate".into(), "0".into()],
            "--rate",
        ),
        (vec!["https://127.0.0.1:1/".into()], "only http://"),
        (
            vec![
                "http://127.0.0.1:1/".into(),
                "--think-scale".into(),
                "0.1".into(),
            ],
            "--workload wagon",
        ),
        (
            vec![
                "http://127.0.0.1:1/".into(),
                "--mix".into(),
                missing.to_str().unwrap().into(),
            ],
            "--mix",
        ),
        (
            vec![
                "http://127.0.0.1:1/".into(),
                "--mix".into(),
                bad_mix.to_str().unwrap().into(),
            ],
            "bad weight",
        ),
        (vec!["fileset".into(), "/dev/null/x".into()], "/dev/null/x"),
    ];
    for (args, want) in cases {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let (ok, out, err) = load(&refs);
        assert!(!ok, "{args:?} succeeded: {out}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with("gearshift: ") && err.contains(want),
            "{args:?}: {err}"
        );
    }
}

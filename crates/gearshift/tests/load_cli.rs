//! `gearshift load` end to end against `gearshift serve`: a closed-loop run with exact counts
//! in JSON, the human summary, a SPECweb99-like file set served and loaded through its mix,
//! POST bodies checked whole by a CGI script, per-status-code counts, the `--hdr-out`
//! interval log read back, the refusal of a remote target without `--allow-remote`; and
//! https against a rustls test server (gearshift serves no TLS yet): keep-alive and
//! pipelining over one TLS connection, SNI and ALPN, `--cacert`, `--insecure`, and a
//! certificate it cannot verify refused with a one-line error.

mod common;
mod tls_peer;
use common::*;
use std::os::unix::fs::PermissionsExt;
use tls_peer::{Hello, TlsServer};

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
fn refuses_remote_targets_without_allow_remote() {
    // 192.0.2.0/24 is for documentation: nothing is ever sent there (refused before).
    let (ok, out, err) = load(&["http://192.0.2.7:80/", "-n", "1"]);
    assert!(!ok, "{out}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.starts_with("gearshift: ") && err.contains("is not an address of this machine"),
        "{err}"
    );
    assert!(err.contains("--allow-remote"), "{err}");
}

/// A CGI script that answers 200 only when the request is a POST whose body is exactly the
/// bytes of `expected.bin` beside it (422 with the reason otherwise).
const CHECK_BODY_PY: &str = "#!/usr/bin/env python3
import os, sys
want = open(os.path.join(os.path.dirname(os.environ['SCRIPT_FILENAME']), 'expected.bin'), 'rb').read()
n = int(os.environ.get('CONTENT_LENGTH') or 0)
got = sys.stdin.buffer.read(n)
if os.environ['REQUEST_METHOD'] != 'POST':
    why = 'method ' + os.environ['REQUEST_METHOD']
elif n != len(want) or got != want:
    why = 'body of %d bytes (read %d), want %d' % (n, len(got), len(want))
else:
    why = ''
sys.stdout.write('Status: %s\\r\\nContent-Type: text/plain\\r\\n\\r\\n%s' % ('422 Bad Body' if why else '200 OK', why or 'ok'))
";

#[test]
fn post_bodies_arrive_whole_at_a_cgi_script() {
    let root = standard_docroot();
    let body = pattern(100_000, 11);
    root.write("cgi-bin/expected.bin", &body);
    let script = root.write("cgi-bin/check.py", CHECK_BODY_PY);
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let body_file = root.join("body.bin");
    std::fs::write(&body_file, &body).unwrap();
    let (cfg, path) = config_file("listen = \"127.0.0.1:0\"\n[cgi]\ndirs = [\"/cgi-bin\"]\n");
    let mut s = serve(root, &["--config", &path, "--engine", "event"]);
    s.keep.push(cfg);
    let url = format!("http://{}/cgi-bin/check.py", s.addr);
    let file = body_file.to_str().unwrap();
    let (ok, out, err) = load(&[
        &url,
        "-m",
        "POST",
        "--body-file",
        file,
        "-c",
        "3",
        "-n",
        "24",
        "--json",
    ]);
    assert!(ok, "{err}");
    let j = json(&out);
    assert_eq!(j["status_codes"], serde_json::json!({ "200": 24 }), "{out}");
    assert_eq!(j["config"]["body_bytes"], 100_000);
    // The script does say no to a body that is not the one it expects.
    let (ok, out, err) = load(&[&url, "-m", "POST", "--body", "short", "-n", "3", "--json"]);
    assert!(ok, "{err}");
    assert_eq!(
        json(&out)["status_codes"],
        serde_json::json!({ "422": 3 }),
        "{out}"
    );
}

#[test]
fn per_status_counts_and_hdr_log_read_back() {
    use base64::{engine::general_purpose::STANDARD, Engine as _};
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    let s = serve(standard_docroot(), SERVER);
    let dir = TempDir::new("load-hdr");
    let log = dir.join("latency.hlog");
    let (ok, out, err) = load(&[
        &format!("http://{}/file.txt", s.addr),
        &format!("http://{}/missing.txt", s.addr),
        "-c",
        "2",
        "-n",
        "400",
        "--hdr-out",
        log.to_str().unwrap(),
        "--json",
    ]);
    assert!(ok, "{err}");
    let j = json(&out);
    let codes = j["status_codes"].as_object().unwrap();
    assert_eq!(codes.len(), 2, "{codes:?}");
    let n = |c: &str| codes[c].as_u64().unwrap();
    assert_eq!(n("200") + n("404"), 400);
    assert!(n("200") > 100 && n("404") > 100, "{codes:?}");
    assert_eq!(j["status"]["4xx"].as_u64(), Some(n("404")));
    assert_eq!(j["errors"]["status"].as_u64(), Some(n("404")));
    // The interval log: per-second histograms (untagged) and the run's (tagged "all").
    let bytes = std::fs::read(&log).unwrap();
    let mut de = hdrhistogram::serialization::Deserializer::new();
    let (mut per_second, mut all, mut start_time) = (0u64, None, false);
    for entry in IntervalLogIterator::new(&bytes) {
        let interval = match entry.expect("a valid interval log") {
            LogEntry::Interval(i) => i,
            LogEntry::StartTime(_) => {
                start_time = true;
                continue;
            }
            LogEntry::BaseTime(_) => continue,
        };
        let raw = STANDARD.decode(interval.encoded_histogram()).unwrap();
        let h: hdrhistogram::Histogram<u64> = de.deserialize(&mut &raw[..]).unwrap();
        match interval.tag() {
            None => per_second += h.len(),
            Some(t) => {
                assert_eq!(t.as_str(), "all");
                assert_eq!(
                    h.value_at_quantile(0.5),
                    j["latency_us"]["p50"].as_u64().unwrap()
                );
                all = Some(h.len());
            }
        }
    }
    assert!(start_time);
    assert_eq!(per_second, 400);
    assert_eq!(all, Some(400));
}

#[test]
fn https_keep_alive_and_pipelining_over_one_tls_connection() {
    let tls = TlsServer::start();
    let url = tls.url("127.0.0.1", "/");
    let (ok, out, err) = load(&[&url, "--insecure", "-c", "1", "-n", "50", "--json"]);
    assert!(ok, "{err}");
    let j = json(&out);
    assert_eq!(j["ok"], 50, "{out}");
    assert_eq!(j["connections_opened"], 1);
    assert_eq!(j["tls_handshakes"], 1);
    assert_eq!(j["timing_us"]["tls_handshake"]["count"], 1);
    assert_eq!(j["timing_us"]["first_byte"]["count"], 50);
    assert_eq!(tls.accepted.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(tls.requests.load(std::sync::atomic::Ordering::SeqCst), 50);
    // Pipelined, with bodies, on two connections.
    let (ok, out, err) = load(&[
        &url, "-k", "-c", "2", "-p", "4", "-n", "400", "-m", "POST", "--body", "x=1", "--json",
    ]);
    assert!(ok, "{err}");
    let j = json(&out);
    assert_eq!(j["ok"], 400, "{out}");
    assert_eq!(j["connections_opened"], 2);
    assert_eq!(tls.accepted.load(std::sync::atomic::Ordering::SeqCst), 3);
    assert_eq!(tls.requests.load(std::sync::atomic::Ordering::SeqCst), 450);
    // An IP address is no SNI name: none was sent; ALPN asked for http/1.1.
    let hellos = tls.hellos.lock().unwrap();
    assert_eq!(hellos.len(), 3);
    assert!(hellos.iter().all(|h| *h
        == Hello {
            sni: None,
            alpn: Some(b"http/1.1".to_vec())
        }));
}

#[test]
fn https_verification_cacert_and_insecure() {
    let tls = TlsServer::start();
    let url = tls.url("localhost", "/v");
    // Not signed by a known CA: refused, said in one line, non-zero exit.
    let (ok, out, err) = load(&[&url, "-c", "2", "-n", "10"]);
    assert!(!ok, "{out}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("invalid peer certificate") && err.contains("--insecure"),
        "{err}"
    );
    assert!(out.contains("errors    tls 10"), "{out}");
    assert!(out.contains("tls error https://localhost:"), "{out}");
    // Trusting the test CA: verified, SNI localhost.
    let dir = TempDir::new("load-ca");
    let ca = dir.write("ca.pem", &tls.ca_pem);
    let (ok, out, err) = load(&[
        &url,
        "--cacert",
        ca.to_str().unwrap(),
        "-c",
        "2",
        "-n",
        "10",
        "--json",
    ]);
    assert!(ok, "{err}");
    assert_eq!(json(&out)["ok"], 10, "{out}");
    assert!(tls
        .hellos
        .lock()
        .unwrap()
        .iter()
        .any(|h| h.sni.as_deref() == Some("localhost")));
    // --insecure: no verification at all.
    let (ok, out, err) = load(&[&url, "--insecure", "-n", "5", "--json"]);
    assert!(ok, "{err}");
    assert_eq!(json(&out)["ok"], 5, "{out}");
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
        (
            vec!["ftp://127.0.0.1:1/".into()],
            "only http:// and https://",
        ),
        (
            vec![
                "http://127.0.0.1:1/".into(),
                "--urls".into(),
                missing.to_str().unwrap().into(),
            ],
            "--urls",
        ),
        (
            vec![
                "http://127.0.0.1:1/".into(),
                "--body-file".into(),
                missing.to_str().unwrap().into(),
            ],
            "--body-file",
        ),
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
        (
            vec![
                "http://127.0.0.1:1/".into(),
                "--hdr-out".into(),
                "/dev/null/x".into(),
            ],
            "--hdr-out /dev/null/x",
        ),
        (
            vec![
                "https://127.0.0.1:1/".into(),
                "--cacert".into(),
                missing.to_str().unwrap().into(),
            ],
            "--cacert",
        ),
        (
            vec![
                "http://127.0.0.1:1/".into(),
                "-H".into(),
                "Content-Length: 3".into(),
            ],
            "frames the body itself",
        ),
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

//! The command line, environment and TOML configuration: banner, --check-config, one-line
//! errors, precedence (CLI > env > file > defaults) and options that change behaviour.

mod common;

use common::*;
use std::net::TcpListener;
use std::time::{Duration, Instant};

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn banner_names_dir_address_engine_and_workers() {
    let root = standard_docroot();
    let dir = root.str();
    let s = serve(root, &["--workers", "3", "--engine", "event"]);
    assert_eq!(
        s.banner,
        format!(
            "gearshift: serving {dir} on http://127.0.0.1:{}/ (engine event, 3 workers, listing directories)",
            s.port
        )
    );
    assert_ne!(s.port, 0, "the real port must be printed");
    assert_eq!(s.get("/file.txt").status, 200);
}

#[test]
fn check_config_accepts_a_valid_configuration() {
    let root = standard_docroot();
    let (cfg, path) = config_file(
        "listen = \"127.0.0.1:0\"\nworkers = 2\nshutdown_timeout_ms = 100\n\
         [http]\nmax_body = 10\nkeepalive_timeout_ms = 1000\n\
         [static]\nindex = [\"index.html\", \"index.htm\"]\nlisting = true\ncache_control = \"no-cache\"\n\
         [cache]\nenabled = true\nmax_file_size = 1000\n[log]\naccess = \"off\"\nformat = \"json\"\n",
    );
    let args = strings(&["serve", &root.str(), "--config", &path, "--check-config"]);
    let (st, out, err) = run_to_exit(command(&args, &[], None));
    assert!(st.success(), "exit {st:?}, stderr: {err}");
    assert!(
        out.lines().any(|l| l.trim() == "configuration ok"),
        "stdout: {out:?}"
    );
    drop(cfg);
}

/// Each case: (name, args after `serve`, config file text or "", env, words the error names,
/// any of them, separated by `|`).
type BadCase = (
    &'static str,
    Vec<String>,
    &'static str,
    Vec<(&'static str, String)>,
    &'static str,
);

fn bad_cases(root: &TempDir) -> Vec<BadCase> {
    let r = root.str();
    let file = root.write("plain-file", "x").to_str().unwrap().to_string();
    vec![
        (
            "unknown key",
            vec![r.clone()],
            "[http]\nmax_heda = 5\n",
            vec![],
            "max_heda",
        ),
        (
            "unknown top-level key",
            vec![r.clone()],
            "colour = \"red\"\n",
            vec![],
            "colour",
        ),
        (
            "bad value type",
            vec![r.clone()],
            "workers = \"many\"\n",
            vec![],
            "workers|line 1",
        ),
        ("TOML syntax", vec![r.clone()], "[http\n", vec![], ""),
        (
            "missing root (cli)",
            vec!["/definitely/not/here".into()],
            "",
            vec![],
            "/definitely/not/here",
        ),
        (
            "missing root (file)",
            vec![],
            "root = \"/definitely/not/here\"\n",
            vec![],
            "/definitely/not/here",
        ),
        ("root is a file", vec![file], "", vec![], "root"),
        (
            "bad listen",
            vec![r.clone(), "--listen".into(), "nonsense".into()],
            "",
            vec![],
            "listen",
        ),
        (
            "bad listen (env)",
            vec![r.clone()],
            "",
            vec![("GEARSHIFT_LISTEN", "localhost".into())],
            "listen",
        ),
        (
            "unknown engine",
            vec![r.clone(), "--engine".into(), "warp".into()],
            "",
            vec![],
            "engine",
        ),
        (
            "zero max_head",
            vec![r.clone()],
            "[http]\nmax_head = 0\n",
            vec![],
            "max_head",
        ),
        (
            "missing config file",
            vec![
                r.clone(),
                "--config".into(),
                "/no/such/gearshift.toml".into(),
            ],
            "",
            vec![],
            "/no/such/gearshift.toml",
        ),
    ]
}

fn check_bad(check_config: bool) {
    let root = standard_docroot();
    let mut failures = Vec::new();
    for (name, mut args, toml, env, word) in bad_cases(&root) {
        let _cfg = if toml.is_empty() {
            None
        } else {
            let (d, p) = config_file(toml);
            args.push("--config".into());
            args.push(p);
            Some(d)
        };
        let mut full = vec!["serve".to_string()];
        full.extend(args);
        if check_config {
            full.push("--check-config".into());
        } else if !full.iter().any(|a| a == "--listen")
            && !env.iter().any(|(k, _)| *k == "GEARSHIFT_LISTEN")
        {
            full.extend(strings(&["--listen", "127.0.0.1:0"]));
        }
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let (st, out, err) = run_to_exit(command(&full, &env, None));
        let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        if st.success() {
            failures.push(format!("[{name}] exit 0 (stdout {out:?})"));
        } else if lines.len() != 1 {
            failures.push(format!("[{name}] stderr is not one line: {err:?}"));
        } else if !word.split('|').any(|w| lines[0].contains(w)) {
            failures.push(format!("[{name}] error does not name {word:?}: {err:?}"));
        }
        if out.contains("configuration ok") || out.contains("serving") {
            failures.push(format!("[{name}] printed success: {out:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn check_config_rejects_bad_configurations_in_one_line() {
    check_bad(true);
}

#[test]
fn bad_configurations_fail_the_start_in_one_line() {
    check_bad(false);
}

#[test]
fn port_in_use_fails_in_one_line() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let root = standard_docroot();
    let args = strings(&["serve", &root.str(), "--listen", &addr]);
    let (st, _out, err) = run_to_exit(command(&args, &[], None));
    assert!(!st.success());
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "stderr: {err:?}");
    assert!(
        lines[0].contains(&addr) || lines[0].to_lowercase().contains("in use"),
        "{err:?}"
    );
}

fn dir_of(banner: &str) -> String {
    let rest = banner
        .strip_prefix("gearshift: serving ")
        .expect("banner prefix");
    rest[..rest.find(" on http://").expect("banner ' on http://'")].to_string()
}

fn workers_of(banner: &str) -> String {
    banner
        .rsplit(", ")
        .next()
        .unwrap()
        .trim_end_matches(')')
        .to_string()
}

#[test]
fn root_precedence_cli_env_file_default() {
    let (a, b, c, d) = (
        TempDir::new("a"),
        TempDir::new("b"),
        TempDir::new("c"),
        TempDir::new("d"),
    );
    let (cfgdir, cfg) = config_file(&format!(
        "root = \"{}\"\nlisten = \"127.0.0.1:0\"\n",
        a.str()
    ));
    let start = |args: &[&str], env: &[(&str, &str)]| {
        let mut full = strings(&["serve"]);
        full.extend(strings(args));
        let s = launch(&full, env, Some(d.path())).unwrap_or_else(|e| panic!("{e:?}"));
        dir_of(&s.banner)
    };
    let benv = b.str();
    let env = [("GEARSHIFT_ROOT", benv.as_str())];
    assert_eq!(
        start(&[&c.str(), "--config", &cfg], &env),
        c.str(),
        "CLI beats env"
    );
    assert_eq!(start(&["--config", &cfg], &env), b.str(), "env beats file");
    assert_eq!(
        start(&["--config", &cfg], &[]),
        a.str(),
        "file beats default"
    );
    assert_eq!(start(&[], &[]), d.str(), "default is the working directory");
    let genv = [("GEARSHIFT_CONFIG", cfg.as_str())];
    assert_eq!(
        start(&[], &genv),
        a.str(),
        "GEARSHIFT_CONFIG names the file"
    );
    drop(cfgdir);
}

#[test]
fn workers_and_listen_precedence() {
    let root = standard_docroot();
    let (cfgdir, cfg) = config_file("workers = 3\nlisten = \"127.0.0.2:0\"\n");
    let r = root.str();
    let start = |args: &[&str], env: &[(&str, &str)]| {
        let mut full = strings(&["serve", &r, "--config", &cfg, "--engine", "event"]);
        full.extend(strings(args));
        let s = launch(&full, env, None).unwrap_or_else(|e| panic!("{e:?}"));
        s.banner.clone()
    };
    let env = [
        ("GEARSHIFT_WORKERS", "2"),
        ("GEARSHIFT_LISTEN", "127.0.0.3:0"),
    ];
    let b = start(&["--workers", "1", "--listen", "127.0.0.4:0"], &env);
    assert_eq!(workers_of(&b), "1 workers", "{b}");
    assert_eq!(
        banner_addr(&b).unwrap().ip().to_string(),
        "127.0.0.4",
        "{b}"
    );
    let b = start(&[], &env);
    assert_eq!(workers_of(&b), "2 workers", "{b}");
    assert_eq!(
        banner_addr(&b).unwrap().ip().to_string(),
        "127.0.0.3",
        "{b}"
    );
    let b = start(&[], &[]);
    assert_eq!(workers_of(&b), "3 workers", "{b}");
    assert_eq!(
        banner_addr(&b).unwrap().ip().to_string(),
        "127.0.0.2",
        "{b}"
    );
    drop(cfgdir);
}

#[test]
fn default_workers_is_one_per_core() {
    let root = standard_docroot();
    let args = strings(&[
        "serve",
        &root.str(),
        "--listen",
        "127.0.0.1:0",
        "--access-log",
        "off",
    ]);
    // `command` adds `--workers 1` only when no GEARSHIFT_WORKERS is given; give an empty
    // config instead so no default is added.
    let (cfgdir, cfg) = config_file("");
    let mut full = args.clone();
    full.extend(strings(&["--config", &cfg, "--engine", "event"]));
    let s = launch(&full, &[], None).unwrap_or_else(|e| panic!("{e:?}"));
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(
        workers_of(&s.banner),
        format!("{cores} workers"),
        "{}",
        s.banner
    );
    drop(cfgdir);
}

#[test]
fn static_options_from_the_config_file() {
    let root = standard_docroot();
    root.write("home/home.htm", "<p>home.htm</p>\n");
    let (cfg, path) = config_file(
        "[static]\nindex = [\"home.htm\", \"index.html\"]\nlisting = true\nhidden = true\n\
         cache_control = \"max-age=5\"\n",
    );
    let mut s = serve(root, &["--config", &path, "--listen", "127.0.0.1:0"]);
    s.keep.push(cfg);
    assert_eq!(s.get("/home/").text(), "<p>home.htm</p>\n");
    assert_eq!(s.get("/").status, 200);
    assert_eq!(s.get("/nolisting/").status, 200);
    assert_eq!(s.get("/.env").status, 200);
    assert_eq!(
        s.get("/file.txt").header("cache-control"),
        Some("max-age=5")
    );
}

#[test]
fn cli_flags_override_the_config_file() {
    let (cfg, path) =
        config_file("[static]\ncache_control = \"max-age=5\"\n[http]\nmax_body = 5\n");
    let mut s = serve(
        standard_docroot(),
        &[
            "--config",
            &path,
            "--listen",
            "127.0.0.1:0",
            "--cache-control",
            "no-store",
        ],
    );
    s.keep.push(cfg);
    assert_eq!(s.get("/file.txt").header("cache-control"), Some("no-store"));
    let r = s.request("GET /file.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 6\r\n\r\nabcdef");
    assert_eq!(r.status, 413, "max_body from the file still applies");
}

#[test]
fn no_cache_serves_changes_immediately() {
    let root = standard_docroot();
    let p = root.write("live.txt", "one\n");
    let s = serve(root, &["--no-cache"]);
    for i in 0..5 {
        let body = format!("change {i}\n");
        std::fs::write(&p, &body).unwrap();
        let start = Instant::now();
        assert_eq!(s.get("/live.txt").text(), body);
        assert!(start.elapsed() < Duration::from_millis(500));
    }
}

#[test]
fn cache_disabled_in_config_serves_changes_immediately() {
    let root = standard_docroot();
    let p = root.write("live.txt", "one\n");
    let (cfg, path) = config_file("[cache]\nenabled = false\n");
    let mut s = serve(root, &["--config", &path, "--listen", "127.0.0.1:0"]);
    s.keep.push(cfg);
    assert_eq!(s.get("/live.txt").text(), "one\n");
    std::fs::write(&p, "two\n").unwrap();
    assert_eq!(s.get("/live.txt").text(), "two\n");
}

#[test]
fn max_ranges_from_config() {
    let (cfg, path) = config_file("[static]\nmax_ranges = 2\n");
    let mut s = serve(
        standard_docroot(),
        &["--config", &path, "--listen", "127.0.0.1:0"],
    );
    s.keep.push(cfg);
    let r = s.get_with("/data.bin", &[("Range", "bytes=0-1,5-6")]);
    assert_eq!(r.status, 206);
    let r = s.get_with("/data.bin", &[("Range", "bytes=0-1,5-6,10-11")]);
    assert!(
        [200, 416].contains(&r.status),
        "over max_ranges: {}",
        r.status
    );
}

#[test]
fn help_lists_the_options() {
    let (st, out, _) = run_to_exit(command(&strings(&["serve", "--help"]), &[], None));
    assert!(st.success());
    for flag in [
        "--listen",
        "--engine",
        "--workers",
        "--config",
        "--check-config",
        "--access-log",
        "--log-format",
        "--listing",
        "--hidden",
        "--cache-control",
        "--no-cache",
        "--compress",
    ] {
        assert!(out.contains(flag), "serve --help lacks {flag}");
    }
}

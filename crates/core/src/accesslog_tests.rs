use super::*;
use proptest::prelude::*;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

/// 2000-10-10T13:55:36Z
const T0: u64 = 971_186_136;

fn rec<'a>() -> Record<'a> {
    Record {
        remote: "127.0.0.1:54321".parse().unwrap(),
        time_unix: T0,
        method: b"GET",
        target: b"/apache_pb.gif?x=1",
        version: "HTTP/1.1",
        status: 200,
        bytes: 2326,
        referer: Some(b"http://www.example.com/start.html"),
        user_agent: Some(b"Mozilla/4.08 [en] (Win98; I ;Nav)"),
        duration_us: 1234,
        site: None,
    }
}

fn line(fmt: LogFormat, r: &Record) -> String {
    let mut buf = Vec::new();
    format(&mut buf, fmt, r);
    String::from_utf8(buf).expect("log lines are UTF-8")
}

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "gearshift-accesslog-{}-{name}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn read(path: &Path) -> String {
    String::from_utf8(std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn common_format() {
    assert_eq!(
        line(LogFormat::Common, &rec()),
        "127.0.0.1 - - [10/Oct/2000:13:55:36 +0000] \"GET /apache_pb.gif?x=1 HTTP/1.1\" 200 2326\n"
    );
    let r = Record {
        bytes: 0,
        status: 304,
        ..rec()
    };
    assert_eq!(
        line(LogFormat::Common, &r),
        "127.0.0.1 - - [10/Oct/2000:13:55:36 +0000] \"GET /apache_pb.gif?x=1 HTTP/1.1\" 304 -\n"
    );
}

#[test]
fn combined_format() {
    assert_eq!(
        line(LogFormat::Combined, &rec()),
        "127.0.0.1 - - [10/Oct/2000:13:55:36 +0000] \"GET /apache_pb.gif?x=1 HTTP/1.1\" 200 2326 \
         \"http://www.example.com/start.html\" \"Mozilla/4.08 [en] (Win98; I ;Nav)\"\n"
    );
    let r = Record {
        referer: None,
        user_agent: None,
        ..rec()
    };
    assert_eq!(
        line(LogFormat::Combined, &r),
        "127.0.0.1 - - [10/Oct/2000:13:55:36 +0000] \"GET /apache_pb.gif?x=1 HTTP/1.1\" 200 2326 \"-\" \"-\"\n"
    );
}

#[test]
fn the_site_is_logged_first_in_vhost_combined_and_as_a_json_field() {
    let r = Record {
        site: Some("a.example"),
        ..rec()
    };
    assert_eq!(
        line(LogFormat::VhostCombined, &r),
        "a.example 127.0.0.1 - - [10/Oct/2000:13:55:36 +0000] \"GET /apache_pb.gif?x=1 HTTP/1.1\" \
         200 2326 \"http://www.example.com/start.html\" \"Mozilla/4.08 [en] (Win98; I ;Nav)\"\n"
    );
    assert!(line(LogFormat::VhostCombined, &rec()).starts_with("- 127.0.0.1 "));
    assert!(line(LogFormat::Json, &r).ends_with(",\"site\":\"a.example\",\"duration_us\":1234}\n"));
    assert!(!line(LogFormat::Json, &rec()).contains("site"));
    assert!(!line(LogFormat::Combined, &r).contains("a.example"));
}

#[test]
fn json_format() {
    assert_eq!(
        line(LogFormat::Json, &rec()),
        "{\"time\":\"2000-10-10T13:55:36Z\",\"remote\":\"127.0.0.1\",\"method\":\"GET\",\
         \"target\":\"/apache_pb.gif?x=1\",\"version\":\"HTTP/1.1\",\"status\":200,\"bytes\":2326,\
         \"referer\":\"http://www.example.com/start.html\",\
         \"user_agent\":\"Mozilla/4.08 [en] (Win98; I ;Nav)\",\"duration_us\":1234}\n"
    );
    let r = Record {
        referer: None,
        user_agent: None,
        bytes: 0,
        ..rec()
    };
    let l = line(LogFormat::Json, &r);
    let v: serde_json::Value = serde_json::from_str(&l).unwrap();
    assert_eq!(v["referer"], serde_json::Value::Null);
    assert_eq!(v["user_agent"], serde_json::Value::Null);
    assert_eq!(v["bytes"], 0);
    assert_eq!(v["status"], 200);
    assert_eq!(v["duration_us"], 1234);
    assert_eq!(v["time"], "2000-10-10T13:55:36Z");
    assert_eq!(v.as_object().unwrap().len(), 10);
}

#[test]
fn ipv6_remotes() {
    let r = Record {
        remote: "[2001:db8::1]:443".parse().unwrap(),
        ..rec()
    };
    assert!(line(LogFormat::Common, &r).starts_with("2001:db8::1 - - ["));
    assert!(line(LogFormat::Json, &r).contains("\"remote\":\"2001:db8::1\""));
    let mapped = Record {
        remote: "[::ffff:192.0.2.7]:1".parse().unwrap(),
        ..rec()
    };
    assert!(line(LogFormat::Common, &mapped).starts_with("192.0.2.7 - - ["));
}

#[test]
fn timestamps() {
    let at = |t| {
        let r = Record {
            time_unix: t,
            ..rec()
        };
        let clf = line(LogFormat::Common, &r);
        let start = clf.find('[').unwrap() + 1;
        let end = clf.find(']').unwrap();
        let json: serde_json::Value = serde_json::from_str(&line(LogFormat::Json, &r)).unwrap();
        (
            clf[start..end].to_owned(),
            json["time"].as_str().unwrap().to_owned(),
        )
    };
    assert_eq!(
        at(0),
        (
            "01/Jan/1970:00:00:00 +0000".into(),
            "1970-01-01T00:00:00Z".into()
        )
    );
    assert_eq!(
        at(946_684_799),
        (
            "31/Dec/1999:23:59:59 +0000".into(),
            "1999-12-31T23:59:59Z".into()
        )
    );
    assert_eq!(
        at(1_709_251_199),
        (
            "29/Feb/2024:23:59:59 +0000".into(),
            "2024-02-29T23:59:59Z".into()
        )
    );
    // Absurd values do not panic.
    let _ = at(u64::MAX);
}

#[test]
fn time_cache_follows_the_clock() {
    let mut cache = TimeCache::default();
    let mut buf = Vec::new();
    for t in [T0, T0, T0 + 1, T0, T0 + 86_400] {
        let r = Record {
            time_unix: t,
            ..rec()
        };
        buf.clear();
        format_with(&mut buf, LogFormat::Common, &r, &mut cache);
        assert_eq!(buf, line(LogFormat::Common, &r).as_bytes());
    }
}

#[test]
fn clf_injection_is_escaped() {
    let r = Record {
        target: b"/a\" 200 1\n127.0.0.1 - - [10/Oct/2000:13:55:36 +0000] \"GET /forged HTTP/1.1",
        user_agent: Some(b"evil\"\r\n\\x\t\x1b[31m\x7f\xc3\xa9\xff"),
        referer: Some(b"\""),
        method: b"G\x00T",
        ..rec()
    };
    let l = line(LogFormat::Combined, &r);
    assert_eq!(
        l,
        "127.0.0.1 - - [10/Oct/2000:13:55:36 +0000] \"G\\x00T /a\\\" 200 1\\x0a127.0.0.1 - - \
         [10/Oct/2000:13:55:36 +0000] \\\"GET /forged HTTP/1.1 HTTP/1.1\" 200 2326 \"\\\"\" \
         \"evil\\\"\\x0d\\x0a\\\\x\\x09\\x1b[31m\\x7f\\xc3\\xa9\\xff\"\n"
    );
    assert_eq!(l.matches('\n').count(), 1);
}

#[test]
fn json_injection_is_escaped() {
    let r = Record {
        target: b"/a\",\"status\":999,\"x\":\"\n{\"forged\":1}",
        user_agent: Some(b"ua\\\"\r\n\t\x00\x1f\x7f caf\xc3\xa9 \xff"),
        method: b"P\"OST",
        ..rec()
    };
    let l = line(LogFormat::Json, &r);
    assert_eq!(l.matches('\n').count(), 1);
    assert!(l.ends_with("}\n"));
    let v: serde_json::Value = serde_json::from_str(&l).unwrap();
    assert_eq!(v["status"], 200);
    assert_eq!(v["target"], "/a\",\"status\":999,\"x\":\"\n{\"forged\":1}");
    assert_eq!(
        v["user_agent"],
        "ua\\\"\r\n\t\u{0}\u{1f}\u{7f} café \u{fffd}"
    );
    assert_eq!(v["method"], "P\"OST");
    assert!(v.get("forged").is_none() && v.get("x").is_none());
}

#[test]
fn log_format_names() {
    for (name, fmt) in [
        ("common", LogFormat::Common),
        ("combined", LogFormat::Combined),
        ("json", LogFormat::Json),
    ] {
        let json = format!("\"{name}\"");
        assert_eq!(serde_json::from_str::<LogFormat>(&json).unwrap(), fmt);
        assert_eq!(serde_json::to_string(&fmt).unwrap(), json);
    }
    assert!(serde_json::from_str::<LogFormat>("\"Common\"").is_err());
}

#[test]
fn file_sink_flags_and_mode() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("flags");
    let path = dir.path("access.log");
    let sink = Sink::open(Destination::File(path.clone())).unwrap();
    sink.write_all(b"one\n").unwrap();
    sink.write_all(b"").unwrap();
    sink.write_all(b"two\n").unwrap();
    assert_eq!(read(&path), "one\ntwo\n");

    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode & !0o644, 0, "mode {mode:o}");
    let file = sink.file.load_full();
    let fd_flags = rustix::io::fcntl_getfd(&*file).unwrap();
    assert!(fd_flags.contains(rustix::io::FdFlags::CLOEXEC));
    let fl_flags = rustix::fs::fcntl_getfl(&*file).unwrap();
    assert!(fl_flags.contains(rustix::fs::OFlags::APPEND));
    drop(file);

    // An existing file is appended to, not truncated.
    drop(sink);
    let sink = Sink::open(Destination::File(path.clone())).unwrap();
    sink.write_all(b"three\n").unwrap();
    assert_eq!(read(&path), "one\ntwo\nthree\n");
}

#[test]
fn open_errors_are_returned() {
    let dir = TempDir::new("err");
    let missing = dir.path("no/such/dir/access.log");
    assert!(Sink::open(Destination::File(missing)).is_err());
}

#[test]
fn stdout_sink() {
    let sink = Sink::open(Destination::Stdout).unwrap();
    sink.reopen().unwrap();
    sink.write_all(b"").unwrap();
    assert!(format!("{sink:?}").contains("None"));
}

#[test]
fn reopen_after_rotation() {
    let dir = TempDir::new("reopen");
    let path = dir.path("access.log");
    let rotated = dir.path("access.log.1");
    let sink = Arc::new(Sink::open(Destination::File(path.clone())).unwrap());
    let mut buf = Buffer::new(sink.clone(), LogFormat::Common);

    buf.log(&Record {
        target: b"/first",
        ..rec()
    });
    buf.flush();
    std::fs::rename(&path, &rotated).unwrap();
    sink.reopen().unwrap();
    buf.log(&Record {
        target: b"/second",
        ..rec()
    });
    buf.flush();

    let old = read(&rotated);
    let new = read(&path);
    assert_eq!(old.lines().count(), 1);
    assert!(old.contains("/first"));
    assert_eq!(new.lines().count(), 1);
    assert!(new.contains("/second"));
}

#[test]
fn reopen_failure_keeps_the_old_file() {
    let dir = TempDir::new("reopen-fail");
    let sub = dir.path("sub");
    std::fs::create_dir(&sub).unwrap();
    let path = sub.join("access.log");
    let sink = Sink::open(Destination::File(path.clone())).unwrap();
    sink.write_all(b"a\n").unwrap();
    let moved = dir.path("moved");
    std::fs::rename(&sub, &moved).unwrap();
    assert!(sink.reopen().is_err());
    sink.write_all(b"b\n").unwrap();
    assert_eq!(read(&moved.join("access.log")), "a\nb\n");
}

#[test]
fn flush_on_drop() {
    let dir = TempDir::new("drop");
    let path = dir.path("access.log");
    let sink = Arc::new(Sink::open(Destination::File(path.clone())).unwrap());
    let mut buf = Buffer::new(sink, LogFormat::Json);
    buf.log(&rec());
    buf.log(&rec());
    assert_eq!(read(&path), "", "nothing written before flush");
    drop(buf);
    let text = read(&path);
    assert_eq!(text.lines().count(), 2);
    for l in text.lines() {
        serde_json::from_str::<serde_json::Value>(l).unwrap();
    }
}

#[test]
fn flush_threshold() {
    let dir = TempDir::new("threshold");
    let path = dir.path("access.log");
    let sink = Arc::new(Sink::open(Destination::File(path.clone())).unwrap());
    let mut buf = Buffer::new(sink, LogFormat::Common);
    let one = line(LogFormat::Common, &rec()).len();
    let below = FLUSH_THRESHOLD / one; // lines that still fit
    for _ in 0..below {
        buf.log(&rec());
    }
    assert!(buf.buf.len() <= FLUSH_THRESHOLD);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);

    buf.log(&rec()); // crosses the threshold
    assert!(buf.buf.is_empty());
    let written = std::fs::metadata(&path).unwrap().len();
    assert_eq!(written, ((below + 1) * one) as u64);
    assert!(written > FLUSH_THRESHOLD as u64);

    buf.log(&rec());
    assert_eq!(std::fs::metadata(&path).unwrap().len(), written);
    buf.flush();
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        written + one as u64
    );
}

#[test]
fn huge_line_is_flushed_at_once() {
    let dir = TempDir::new("huge");
    let path = dir.path("access.log");
    let sink = Arc::new(Sink::open(Destination::File(path.clone())).unwrap());
    let mut buf = Buffer::new(sink, LogFormat::Common);
    let target = vec![b'a'; 1 << 20];
    buf.log(&Record {
        target: &target,
        ..rec()
    });
    assert!(buf.buf.is_empty());
    assert!(buf.buf.capacity() <= 4 * FLUSH_THRESHOLD);
    assert_eq!(read(&path).lines().count(), 1);
}

#[test]
fn set_format_applies_to_later_lines() {
    let dir = TempDir::new("setfmt");
    let path = dir.path("access.log");
    let sink = Arc::new(Sink::open(Destination::File(path.clone())).unwrap());
    let mut buf = Buffer::new(sink, LogFormat::Common);
    buf.log(&rec());
    buf.set_format(LogFormat::Json);
    buf.log(&rec());
    buf.set_format(LogFormat::Combined);
    buf.log(&rec());
    buf.flush();
    let want = [
        line(LogFormat::Common, &rec()),
        line(LogFormat::Json, &rec()),
        line(LogFormat::Combined, &rec()),
    ]
    .concat();
    assert_eq!(read(&path), want);
}

#[test]
fn write_errors_are_dropped_without_panicking() {
    let path = Path::new("/dev/full");
    if !path.exists() {
        return;
    }
    let sink = Arc::new(Sink::open(Destination::File(path.to_path_buf())).unwrap());
    assert!(sink.write_all(b"x\n").is_err());
    let mut buf = Buffer::new(sink, LogFormat::Common);
    buf.log(&rec());
    buf.flush();
    assert!(buf.failing);
    assert!(buf.buf.is_empty());
    buf.log(&rec());
    buf.flush();
    assert!(buf.buf.is_empty());
    drop(buf);
}

#[test]
fn concurrent_writers_and_reopens_lose_nothing() {
    let dir = TempDir::new("concurrent");
    let path = dir.path("access.log");
    let sink = Arc::new(Sink::open(Destination::File(path.clone())).unwrap());
    const THREADS: usize = 4;
    const LINES: usize = 2000;
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let sink = sink.clone();
            std::thread::spawn(move || {
                let mut buf = Buffer::new(sink, LogFormat::Combined);
                for i in 0..LINES {
                    let target = format!("/t{t}/{i}");
                    buf.log(&Record {
                        target: target.as_bytes(),
                        ..rec()
                    });
                    if i % 100 == 0 {
                        buf.flush();
                    }
                }
            })
        })
        .collect();
    let mut rotated = Vec::new();
    for n in 0..20 {
        let to = dir.path(&format!("access.log.{n}"));
        if std::fs::rename(&path, &to).is_ok() {
            rotated.push(to);
        }
        sink.reopen().unwrap();
        std::thread::yield_now();
    }
    for w in workers {
        w.join().unwrap();
    }
    rotated.push(path);
    let want_tail = line(LogFormat::Combined, &rec());
    let want_tail = &want_tail[want_tail.find(" HTTP/1.1\"").unwrap()..];
    let mut total = 0;
    for p in &rotated {
        for l in read(p).lines() {
            assert!(
                l.starts_with("127.0.0.1 - - [10/Oct/2000:13:55:36 +0000] \"GET /t"),
                "{l}"
            );
            assert!(format!("{l}\n").ends_with(want_tail), "{l}");
            total += 1;
        }
    }
    assert_eq!(total, THREADS * LINES);
}

fn check_lines(r: &Record) {
    let clf = line(LogFormat::Combined, r);
    let body = clf.strip_suffix('\n').expect("ends with a newline");
    assert!(body.bytes().all(|b| (0x20..0x7f).contains(&b)), "{clf:?}");
    // Every '"' inside a field is escaped: exactly 6 unescaped quotes.
    let mut quotes = 0;
    let mut escaped = false;
    for b in body.bytes() {
        match (escaped, b) {
            (true, _) => escaped = false,
            (false, b'\\') => escaped = true,
            (false, b'"') => quotes += 1,
            _ => {}
        }
    }
    assert_eq!(quotes, 6, "{clf:?}");

    let json = line(LogFormat::Json, r);
    assert_eq!(json.matches('\n').count(), 1);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let lossy = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    assert_eq!(v["method"], lossy(r.method));
    assert_eq!(v["target"], lossy(r.target));
    assert_eq!(v["version"], r.version);
    assert_eq!(v["referer"], serde_json::json!(r.referer.map(lossy)));
    assert_eq!(v["user_agent"], serde_json::json!(r.user_agent.map(lossy)));
    assert_eq!(v["status"], r.status);
    assert_eq!(v["bytes"], r.bytes);
    assert_eq!(v["duration_us"], r.duration_us);
}

proptest! {
    #[test]
    fn arbitrary_requests_give_one_safe_line(
        method in prop::collection::vec(any::<u8>(), 0..8),
        target in prop::collection::vec(any::<u8>(), 0..48),
        version in ".{0,10}",
        referer in prop::option::of(prop::collection::vec(any::<u8>(), 0..24)),
        user_agent in prop::option::of(prop::collection::vec(any::<u8>(), 0..24)),
        status in any::<u16>(),
        bytes in any::<u64>(),
        time_unix in any::<u64>(),
        duration_us in any::<u64>(),
        port in any::<u16>(),
        v6 in any::<bool>(),
        ip in any::<[u8; 16]>(),
    ) {
        let remote = if v6 {
            SocketAddr::from((ip, port))
        } else {
            SocketAddr::from(([ip[0], ip[1], ip[2], ip[3]], port))
        };
        let r = Record {
            remote,
            time_unix,
            method: &method,
            target: &target,
            version: &version,
            status,
            bytes,
            referer: referer.as_deref(),
            user_agent: user_agent.as_deref(),
            duration_us,
            site: None,
        };
        check_lines(&r);
    }
}

//! Unit tests of the access log's formats: Common, Combined, vhost Combined and JSON lines,
//! timestamps, and that hostile request bytes are escaped into one safe line (a property
//! test). The sink and buffer tests (files, reopening, flushing) are in
//! `accesslog_sink_tests.rs`.

use super::*;
use proptest::prelude::*;

/// 2000-10-10T13:55:36Z
const T0: u64 = 971_186_136;

pub(super) fn rec<'a>() -> Record<'a> {
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

pub(super) fn line(fmt: LogFormat, r: &Record) -> String {
    let mut buf = Vec::new();
    format(&mut buf, fmt, r);
    String::from_utf8(buf).expect("log lines are UTF-8")
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

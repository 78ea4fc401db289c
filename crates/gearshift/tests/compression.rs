//! On-the-fly compression (issue 19) end to end: Accept-Encoding q-values (q=0 refuses,
//! identity, `*`), `Vary: Accept-Encoding` on every compressible response, an ETag per
//! encoding and 304 for the encoded one, Range requests answered with identity bytes,
//! HEAD agreeing with GET, bodies that decompress to the file, precompressed siblings still
//! preferred, types and sizes left alone, off by default, and a hot file compressed once
//! (the metrics say so).

mod common;

use common::*;
use std::io::Read;

/// A text file large enough to compress (about 24 KB of varied lines).
fn text() -> String {
    (0..1000)
        .map(|i| format!("line {i}: the quick brown fox {} jumps\n", i * 7919 % 1000))
        .collect()
}

fn docroot() -> TempDir {
    let d = TempDir::new("compress");
    d.write("page.html", text());
    d.write("data.json", format!("{{\"k\": \"{}\"}}", "v".repeat(5000)));
    d.write("small.txt", "tiny\n");
    d.write("photo.png", pattern(8000, 3));
    d.write("pre.css", text());
    d.write("pre.css.gz", b"PRECOMPRESSED-GZ".as_slice());
    d
}

fn server(extra: &str, args: &[&str]) -> Server {
    let (cfg, path) = config_file(&format!(
        "listen = \"127.0.0.1:0\"\nworkers = 1\n[compression]\nenabled = true\n{extra}"
    ));
    let mut full = vec!["--config", path.as_str()];
    full.extend_from_slice(args);
    let mut s = serve(docroot(), &full);
    s.keep.push(cfg);
    s
}

fn gunzip(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(b)
        .read_to_end(&mut out)
        .expect("valid gzip");
    out
}

fn unbrotli(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    brotli::Decompressor::new(b, 4096)
        .read_to_end(&mut out)
        .expect("valid brotli");
    out
}

fn get_ae(s: &Server, path: &str, ae: &str) -> Response {
    s.get_with(path, &[("Accept-Encoding", ae)])
}

#[test]
fn q_values_choose_the_coding_and_bodies_decompress_to_the_file() {
    let s = server("", &[]);
    let want = text().into_bytes();
    for (ae, coding) in [
        ("gzip", Some("gzip")),
        ("br", Some("br")),
        ("gzip, br", Some("br")),
        ("br;q=0.5, gzip;q=0.9", Some("gzip")),
        ("x-gzip", Some("gzip")),
        ("*", Some("br")),
        ("*;q=0.5, br;q=0", Some("gzip")),
        ("gzip;q=0, br;q=0", None),
        ("identity", None),
        ("identity;q=1, gzip;q=0.5", None),
        ("deflate", None),
        ("", None),
    ] {
        let r = get_ae(&s, "/page.html", ae);
        assert_eq!(r.status, 200, "{ae}");
        assert_eq!(
            r.header("content-encoding"),
            coding,
            "{ae}: {}",
            show(&r.raw_head)
        );
        assert!(r.has_token("vary", "accept-encoding"), "{ae}: no Vary");
        assert_eq!(r.content_length(), Some(r.body.len() as u64), "{ae}");
        let body = match coding {
            Some("gzip") => gunzip(&r.body),
            Some("br") => unbrotli(&r.body),
            _ => r.body.clone(),
        };
        assert_eq!(body, want, "{ae}");
        if coding.is_some() {
            assert!(
                r.body.len() < want.len() / 2,
                "{ae}: {} bytes",
                r.body.len()
            );
        }
    }
    // No Accept-Encoding at all: identity, still with Vary.
    let r = s.get("/page.html");
    assert!(r.header("content-encoding").is_none() && r.body == want);
    assert!(r.has_token("vary", "accept-encoding"));
    // JSON too.
    let r = get_ae(&s, "/data.json", "gzip");
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    assert_eq!(
        gunzip(&r.body),
        std::fs::read(s.root().join("data.json")).unwrap()
    );
}

#[test]
fn etags_differ_per_encoding_and_the_encoded_one_gives_304() {
    let s = server("", &[]);
    let id = s.get("/page.html").must("etag").to_string();
    let gz = get_ae(&s, "/page.html", "gzip").must("etag").to_string();
    let br = get_ae(&s, "/page.html", "br").must("etag").to_string();
    assert_eq!(gz, format!("{}-gzip\"", &id[..id.len() - 1]));
    assert_eq!(br, format!("{}-br\"", &id[..id.len() - 1]));
    for (ae, tag, status) in [
        ("gzip", &gz, 304),
        ("br", &br, 304),
        ("", &id, 304),
        // Another encoding's tag does not match: the full answer in the client's coding.
        ("gzip", &id, 200),
        ("br", &gz, 200),
        ("", &gz, 200),
    ] {
        let r = s.get_with(
            "/page.html",
            &[("Accept-Encoding", ae), ("If-None-Match", tag)],
        );
        assert_eq!(r.status, status, "{ae} {tag}");
        if status == 304 {
            assert!(r.body.is_empty());
            assert_eq!(r.header("etag"), Some(tag.as_str()));
            assert!(r.has_token("vary", "accept-encoding"), "304 without Vary");
        }
    }
}

#[test]
fn ranges_are_never_compressed() {
    let s = server("", &[]);
    let want = text().into_bytes();
    let r = s.get_with(
        "/page.html",
        &[("Accept-Encoding", "gzip, br"), ("Range", "bytes=10-29")],
    );
    assert_eq!(r.status, 206);
    assert!(
        r.header("content-encoding").is_none(),
        "{}",
        show(&r.raw_head)
    );
    assert_eq!(r.body, &want[10..30]);
    assert!(r.has_token("vary", "accept-encoding"));
    // If-Range with the gzip ETag does not match the identity representation: all of it,
    // still identity (a Range request is never compressed).
    let gz = get_ae(&s, "/page.html", "gzip").must("etag").to_string();
    let r = s.get_with(
        "/page.html",
        &[
            ("Accept-Encoding", "gzip"),
            ("Range", "bytes=0-9"),
            ("If-Range", &gz),
        ],
    );
    assert_eq!(r.status, 200);
    assert!(r.header("content-encoding").is_none());
    assert_eq!(r.body, want);
}

#[test]
fn head_matches_get() {
    let s = server("", &[]);
    for ae in ["gzip", "br", "identity"] {
        let h = s.head("/page.html", &[("Accept-Encoding", ae)]);
        let g = get_ae(&s, "/page.html", ae);
        for name in [
            "content-encoding",
            "content-length",
            "etag",
            "vary",
            "content-type",
        ] {
            assert_eq!(h.header(name), g.header(name), "{ae} {name}");
        }
        assert!(h.body.is_empty());
    }
}

#[test]
fn small_files_other_types_and_precompressed_siblings_are_left_alone() {
    let s = server("", &[]);
    let r = get_ae(&s, "/small.txt", "gzip, br");
    assert!(r.header("content-encoding").is_none() && r.text() == "tiny\n");
    assert!(r.header("vary").is_none(), "a small file never varies");
    let r = get_ae(&s, "/photo.png", "gzip, br");
    assert!(r.header("content-encoding").is_none() && r.header("vary").is_none());
    assert_eq!(r.body, pattern(8000, 3));
    // The .gz sibling wins over compressing on the fly for a gzip client...
    let r = get_ae(&s, "/pre.css", "gzip");
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    assert_eq!(r.body, b"PRECOMPRESSED-GZ");
    // ... even when br is preferred (the sibling is acceptable, and already made).
    let r = get_ae(&s, "/pre.css", "br, gzip;q=0.9");
    assert_eq!(r.body, b"PRECOMPRESSED-GZ");
    // A client refusing gzip gets br made on the fly.
    let r = get_ae(&s, "/pre.css", "br, gzip;q=0");
    assert_eq!(r.header("content-encoding"), Some("br"));
    assert_eq!(unbrotli(&r.body), text().into_bytes());
}

#[test]
fn configured_types_and_codings_and_off_by_default() {
    let s = server("brotli = false\ntypes = [\"application/json\"]\n", &[]);
    let r = get_ae(&s, "/page.html", "gzip, br");
    assert!(r.header("content-encoding").is_none() && r.header("vary").is_none());
    let r = get_ae(&s, "/data.json", "br, gzip");
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    // Without [compression] enabled (or --compress) nothing is compressed, nor varies.
    let plain = serve(docroot(), &[]);
    let r = get_ae(&plain, "/page.html", "gzip, br");
    assert!(r.header("content-encoding").is_none() && r.header("vary").is_none());
    let on = serve(docroot(), &["--compress"]);
    let r = get_ae(&on, "/page.html", "gzip");
    assert_eq!(r.header("content-encoding"), Some("gzip"));
}

#[test]
fn a_hot_file_is_compressed_once_and_the_metrics_count_it() {
    let s = server("", &["--admin", "127.0.0.1:0"]);
    let admin = admin_of(&s);
    let len = text().len() as u64;
    let mut c = s.conn();
    let mut sent = 0;
    for _ in 0..20 {
        c.send(&req("GET", "/page.html", &[("Accept-Encoding", "gzip")]));
        let r = c.response();
        assert_eq!(gunzip(&r.body), text().into_bytes());
        sent += r.body.len() as u64;
    }
    let metrics = ctl_ok(&admin, &["metrics"]);
    let value = |name: &str| {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("{name} in {metrics}"))
    };
    assert_eq!(value("gearshift_compressions_total"), 1, "{metrics}");
    assert_eq!(value("gearshift_compressed_responses_total"), 20);
    assert_eq!(
        value("gearshift_compression_saved_bytes_total"),
        20 * len - sent
    );
}

//! Unit tests of the access log's output side: the file sink (flags, mode, errors,
//! reopening after rotation), the per-worker buffer's flushing, and concurrent writers and
//! reopens losing no line. Apart from the format tests (`accesslog_tests.rs`), which need
//! no files.

use super::tests::{line, rec};
use super::*;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

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

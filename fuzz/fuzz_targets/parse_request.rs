//! Fuzz target: arbitrary bytes through `parse_head` and through `Conn::poll` (the whole
//! input, then again fed in two pieces), checking that nothing panics and that the byte
//! accounting invariants hold. Run with `cargo +nightly fuzz run parse_request`.
#![no_main]

use gearshift_http::{parse::parse_head, Conn, Event, Limits, Timeouts};
use libfuzzer_sys::fuzz_target;

/// Small limits reach the 414/431/413 paths with short inputs.
const SMALL: Limits = Limits {
    max_request_line: 64,
    max_head: 256,
    max_headers: 8,
    max_body: 512,
};

fn check_parse(data: &[u8], limits: &Limits) {
    if let Ok(Some(head)) = parse_head(data, limits) {
        assert!(head.head_len <= data.len());
        assert!(head.head_len <= limits.max_head);
        assert!(!head.target.is_empty());
    }
}

/// Drive a connection like an engine: the buffer keeps unconsumed bytes, pieces arrive at
/// `cut`. Stops on an error or when no progress is possible.
fn drive(data: &[u8], cut: usize, limits: Limits) {
    let mut conn = Conn::new(limits, Timeouts::default(), 0);
    let mut buf: Vec<u8> = Vec::with_capacity(data.len());
    for (now, piece) in [&data[..cut], &data[cut..]].into_iter().enumerate() {
        buf.extend_from_slice(piece);
        loop {
            let (consumed, event) = conn.poll(&buf, now as u64);
            assert!(consumed <= buf.len(), "consumed past the input");
            match event {
                Event::Head(head) => {
                    assert_eq!(consumed, head.head_len);
                    assert!(head.head_len <= buf.len());
                }
                Event::BodyData(d) => assert!(!d.is_empty() && d.len() <= consumed),
                Event::Error(_) => return,
                Event::NeedMore if consumed == 0 => {
                    buf.drain(..consumed);
                    break;
                }
                Event::NeedMore | Event::BodyEnd => {}
            }
            buf.drain(..consumed);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    check_parse(data, &Limits::default());
    check_parse(data, &SMALL);
    drive(data, data.len(), Limits::default());
    // The first byte picks where the input is split in two.
    let cut = data
        .first()
        .map_or(0, |&b| usize::from(b) % (data.len() + 1));
    drive(data, cut, SMALL);
});

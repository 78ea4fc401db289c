//! Unit and property tests of `body`: Content-Length and chunked decoding, limits and
//! malformed input, fed in arbitrary pieces.

use super::*;
use proptest::prelude::*;

const MAX: u64 = 1 << 20;

/// Feed `input` in pieces of the given sizes (cycled; the network buffer keeps unconsumed
/// bytes), returning the decoded body and the bytes consumed in total, or the error.
fn feed(
    framing: Framing,
    max: u64,
    input: &[u8],
    pieces: &[usize],
) -> Result<(Vec<u8>, usize), BodyError> {
    let mut dec = BodyDecoder::new(framing, max);
    let mut buf: Vec<u8> = Vec::new();
    let (mut fed, mut used, mut out) = (0, 0, Vec::new());
    let mut sizes = pieces.iter().copied().cycle();
    loop {
        loop {
            let d = dec.decode(&buf)?;
            // Zero copy: the data is a sub-slice of what was passed in.
            let range = buf.as_ptr_range();
            assert!(d.data.is_empty() || range.contains(&d.data.as_ptr()));
            assert!(d.consumed <= buf.len());
            out.extend_from_slice(d.data);
            let (consumed, done) = (d.consumed, d.done);
            buf.drain(..consumed);
            used += consumed;
            if done {
                assert!(dec.is_done());
                return Ok((out, used));
            }
            if consumed == 0 {
                break;
            }
        }
        if fed == input.len() {
            return Err(BodyError::Malformed("truncated"));
        }
        let n = sizes.next().unwrap_or(1).max(1).min(input.len() - fed);
        buf.extend_from_slice(&input[fed..fed + n]);
        fed += n;
    }
}

fn whole(framing: Framing, input: &[u8]) -> Result<(Vec<u8>, usize), BodyError> {
    feed(framing, MAX, input, &[usize::MAX])
}

#[test]
fn none_is_done_immediately() {
    let mut d = BodyDecoder::new(Framing::None, MAX);
    assert!(d.is_done());
    assert_eq!(
        d.decode(b"GET"),
        Ok(Decoded {
            consumed: 0,
            data: b"",
            done: true
        })
    );
}

#[test]
fn content_length() {
    let input = b"hello worldGET / HTTP/1.1";
    assert_eq!(
        whole(Framing::Length(11), input),
        Ok((b"hello world".to_vec(), 11))
    );
    assert_eq!(
        feed(Framing::Length(11), MAX, input, &[1]),
        Ok((b"hello world".to_vec(), 11))
    );
    let mut d = BodyDecoder::new(Framing::Length(5), MAX);
    assert_eq!(
        d.decode(b"he"),
        Ok(Decoded {
            consumed: 2,
            data: b"he",
            done: false
        })
    );
    assert_eq!(
        d.decode(b""),
        Ok(Decoded {
            consumed: 0,
            data: b"",
            done: false
        })
    );
    assert_eq!(
        d.decode(b"lloXX"),
        Ok(Decoded {
            consumed: 3,
            data: b"llo",
            done: true
        })
    );
    assert_eq!(
        d.decode(b"XX"),
        Ok(Decoded {
            consumed: 0,
            data: b"",
            done: true
        })
    );
    let mut big = BodyDecoder::new(Framing::Length(MAX + 1), MAX);
    assert_eq!(big.decode(b"x"), Err(BodyError::TooLarge));
}

#[test]
fn chunked_good() {
    let cases: &[(&[u8], &[u8])] = &[
        (b"5\r\nhello\r\n0\r\n\r\n", b"hello"),
        (b"0\r\n\r\n", b""),
        (b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", b"hello world"),
        (
            b"A\r\n0123456789\r\na\r\nabcdefghij\r\n0\r\n\r\n",
            b"0123456789abcdefghij",
        ),
        (b"0005\r\nhello\r\n0000\r\n\r\n", b"hello"),
        (
            b"000000000000000f\r\n0123456789abcde\r\n0\r\n\r\n",
            b"0123456789abcde",
        ),
        (b"5;name=value\r\nhello\r\n0;last\r\n\r\n", b"hello"),
        (b"5 ;a=\"q v\";b\r\nhello\r\n0\t;x\r\n\r\n", b"hello"),
        (
            b"5\r\nhello\r\n0\r\nTrailer: x\r\nOther-One:\tv\xff \r\n\r\n",
            b"hello",
        ),
        (b"3\r\n\r\n\n\r\n0\r\n\r\n", b"\r\n\n"),
    ];
    for &(input, want) in cases {
        let name = String::from_utf8_lossy(input);
        let mut with_next = input.to_vec();
        with_next.extend_from_slice(b"GET / HTTP/1.1\r\n");
        assert_eq!(
            whole(Framing::Chunked, &with_next),
            Ok((want.to_vec(), input.len())),
            "{name}"
        );
        assert_eq!(
            feed(Framing::Chunked, MAX, &with_next, &[1]),
            Ok((want.to_vec(), input.len())),
            "{name}"
        );
        assert_eq!(
            feed(Framing::Chunked, MAX, &with_next, &[2, 3, 7]),
            Ok((want.to_vec(), input.len())),
            "{name}"
        );
    }
}

#[test]
fn chunked_one_call_gives_data_then_done() {
    let mut d = BodyDecoder::new(Framing::Chunked, MAX);
    let input = b"5\r\nhello\r\n3\r\nabc\r\n0\r\n\r\n";
    let a = d.decode(input).unwrap();
    assert_eq!((a.consumed, a.data, a.done), (13, &b"hello"[..], false));
    let b = d.decode(&input[13..]).unwrap();
    assert_eq!(
        (b.consumed, b.data, b.done),
        (input.len() - 13, &b"abc"[..], true)
    );
}

#[test]
fn chunked_malformed() {
    let ext = format!("1;{}\r\nx\r\n0\r\n\r\n", "e".repeat(MAX_CHUNK_LINE));
    let ext_ok = format!("1;{}\r\nx\r\n0\r\n\r\n", "e".repeat(MAX_CHUNK_LINE - 2));
    let trailer = format!("0\r\nT: {}\r\n\r\n", "v".repeat(MAX_TRAILERS));
    let trailer_ok = format!("0\r\nT: {}\r\n\r\n", "v".repeat(MAX_TRAILERS - 7));
    assert!(whole(Framing::Chunked, ext_ok.as_bytes()).is_ok());
    assert!(whole(Framing::Chunked, trailer_ok.as_bytes()).is_ok());
    let cases: &[(&str, &[u8])] = &[
        ("bare lf after size", b"5\nhello\r\n0\r\n\r\n"),
        ("bare lf after data", b"5\r\nhello\n0\r\n\r\n"),
        ("bare cr after size", b"5\rhello\r\n0\r\n\r\n"),
        ("data too long", b"5\r\nhelloX\r\n0\r\n\r\n"),
        ("no crlf after data", b"5\r\nhello0\r\n\r\n"),
        ("no digits", b"\r\nhello\r\n0\r\n\r\n"),
        ("ext without size", b";a\r\nhello\r\n0\r\n\r\n"),
        ("non-hex", b"g\r\nhello\r\n0\r\n\r\n"),
        ("0x prefix", b"0x5\r\nhello\r\n0\r\n\r\n"),
        ("negative", b"-5\r\nhello\r\n0\r\n\r\n"),
        ("leading space", b" 5\r\nhello\r\n0\r\n\r\n"),
        ("trailing space", b"5 \r\nhello\r\n0\r\n\r\n"),
        ("17 digits", b"00000000000000005\r\nhello\r\n0\r\n\r\n"),
        ("ext bare lf", b"5;a\nhello\r\n0\r\n\r\n"),
        ("ext nul", b"5;a\x00\r\nhello\r\n0\r\n\r\n"),
        ("ext too long", ext.as_bytes()),
        ("last bare lf", b"0\r\n\n"),
        ("last lf only", b"0\n\n"),
        ("trailer bare lf", b"0\r\nT: v\n\r\n"),
        ("trailer obs-fold", b"0\r\nT: v\r\n w\r\n\r\n"),
        ("trailer no colon", b"0\r\nTv\r\n\r\n"),
        ("trailer space before colon", b"0\r\nT : v\r\n\r\n"),
        ("trailer ctl", b"0\r\nT: \x01\r\n\r\n"),
        ("trailer too large", trailer.as_bytes()),
        ("final not crlf", b"0\r\n\rX"),
    ];
    // 17 significant digits overflow a u64: malformed even without a body limit.
    let overflow = feed(Framing::Chunked, u64::MAX, b"10000000000000000\r\n", &[1]);
    assert!(matches!(overflow, Err(BodyError::Malformed(_))));
    for &(name, input) in cases {
        assert!(
            matches!(whole(Framing::Chunked, input), Err(BodyError::Malformed(_))),
            "{name}"
        );
        assert!(
            matches!(
                feed(Framing::Chunked, MAX, input, &[1]),
                Err(BodyError::Malformed(_))
            ),
            "{name}"
        );
    }
}

#[test]
fn chunked_too_large_when_its_size_line_ends() {
    let mut d = BodyDecoder::new(Framing::Chunked, 100);
    // "65" = 101: refused when the size line ends, before any data arrives; an overlong
    // size is malformed instead (see chunked_malformed).
    assert_eq!(
        d.decode(b"65"),
        Ok(Decoded {
            consumed: 2,
            data: b"",
            done: false
        })
    );
    assert_eq!(d.decode(b"\r\n"), Err(BodyError::TooLarge));
    assert_eq!(
        d.decode(b"x"),
        Err(BodyError::TooLarge),
        "errors are sticky"
    );
}

/// Encode `chunks` as a chunked body with optional extensions and trailers.
fn encode(chunks: &[Vec<u8>], ext: bool, trailers: &[(String, String)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, c) in chunks.iter().filter(|c| !c.is_empty()).enumerate() {
        if i % 2 == 0 {
            out.extend_from_slice(format!("{:x}", c.len()).as_bytes());
        } else {
            out.extend_from_slice(format!("{:04X}", c.len()).as_bytes());
        }
        if ext {
            out.extend_from_slice(b";ext=\"v\"");
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(c);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n");
    for (n, v) in trailers {
        out.extend_from_slice(format!("{n}: {v}\r\n").as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// Found by fuzzing (fuzz/regressions/upstream_response/): chunk sizes summing past
/// u64::MAX overflowed the running total (a panic in debug builds, a wrapped total in
/// release) when there is no limit, as for the proxy's upstream bodies; now 413-style.
#[test]
fn chunk_sizes_summing_past_u64_max_are_too_large_not_an_overflow() {
    let mut d = BodyDecoder::new(Framing::Chunked, u64::MAX);
    let input = b"5\r\nhello\r\nffffffffffffffff\r\n";
    let mut rest = &input[..];
    let err = loop {
        match d.decode(rest) {
            Ok(step) if step.consumed > 0 => rest = &rest[step.consumed..],
            Ok(step) => panic!("stuck: {step:?}"),
            Err(e) => break e,
        }
    };
    assert_eq!(err, BodyError::TooLarge);
    let mut one = BodyDecoder::new(Framing::Chunked, u64::MAX);
    let whole = one.decode(b"ffffffffffffffff\r\n").unwrap();
    assert!(!whole.done, "one chunk of u64::MAX bytes is still allowed");
}

proptest! {
    #[test]
    fn chunked_split_anywhere_gives_same_data(
        chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..8),
        ext in any::<bool>(),
        trailers in proptest::collection::vec(("[A-Za-z-]{1,10}", "[ -~]{0,10}"), 0..3),
        pieces in proptest::collection::vec(1usize..12, 1..10),
    ) {
        let trailers: Vec<(String, String)> =
            trailers.into_iter().map(|(n, v)| (n, v.trim().to_string())).collect();
        let encoded = encode(&chunks, ext, &trailers);
        let want: Vec<u8> = chunks.concat();
        let mut input = encoded.clone();
        input.extend_from_slice(b"NEXT");
        prop_assert_eq!(feed(Framing::Chunked, MAX, &input, &pieces), Ok((want.clone(), encoded.len())));
        prop_assert_eq!(feed(Framing::Chunked, MAX, &input, &[1]), Ok((want, encoded.len())));
    }

    #[test]
    fn decoder_never_panics(input in proptest::collection::vec(any::<u8>(), 0..200), cut in 0usize..200) {
        let mut d = BodyDecoder::new(Framing::Chunked, 1000);
        let cut = cut.min(input.len());
        for part in [&input[..cut], &input[cut..]] {
            if let Ok(r) = d.decode(part) {
                prop_assert!(r.consumed <= part.len());
            }
        }
    }
}

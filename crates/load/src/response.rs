//! Incremental HTTP/1.x response framing for the load generator: it finds where each response
//! ends (Content-Length, chunked, or end of connection), counts the bytes and skips bodies
//! without copying them. Heads are parsed with `httparse` straight from the read buffer; only a
//! head split across reads is copied into a small per-connection buffer.

use std::mem::MaybeUninit;

/// Largest response head accepted.
pub const MAX_HEAD: usize = 64 * 1024;

/// A complete response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    /// Bytes on the wire: head (and any interim 1xx heads) plus body and chunk framing.
    pub bytes: u64,
    /// The server will close the connection after this response.
    pub close: bool,
}

/// What an end of stream means for the response in progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Eof {
    /// Nothing of a response had arrived.
    Clean,
    /// A body delimited by the end of the connection is now complete.
    Complete(Response),
    /// The stream ended inside a head.
    InHead,
    /// The stream ended inside a body (Content-Length or chunked).
    ShortBody,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Chunk {
    /// Reading a size line; `digits` seen so far, `ext` once past them.
    Size {
        size: u64,
        digits: u32,
        ext: bool,
    },
    Data(u64),
    /// The CRLF after chunk data.
    DataEnd,
    /// Trailer section; `line` = bytes on the current line (CR not counted).
    Trailer {
        line: u32,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Head,
    Body(u64),
    Chunked(Chunk),
    UntilClose,
}

#[derive(Debug)]
pub struct Parser {
    state: State,
    head: Vec<u8>,
    bytes: u64,
    status: u16,
    close: bool,
}

impl Default for Parser {
    fn default() -> Self {
        Parser::new()
    }
}

impl Parser {
    pub fn new() -> Parser {
        Parser {
            state: State::Head,
            head: Vec::new(),
            bytes: 0,
            status: 0,
            close: false,
        }
    }

    /// Forget any response in progress (the connection was closed).
    pub fn reset(&mut self) {
        self.state = State::Head;
        self.head.clear();
        self.bytes = 0;
        self.status = 0;
        self.close = false;
    }

    /// True when some bytes of a response have arrived and it is not complete.
    pub fn in_progress(&self) -> bool {
        self.state != State::Head || !self.head.is_empty() || self.bytes > 0
    }

    /// Consumes a prefix of `buf`. Returns the bytes consumed and the response completed by
    /// them, if any; call again with the rest. `head_request` says the request was HEAD.
    pub fn feed(
        &mut self,
        buf: &[u8],
        head_request: bool,
    ) -> Result<(usize, Option<Response>), &'static str> {
        let n = match self.state {
            State::Head => return self.feed_head(buf, head_request),
            State::Body(left) => {
                let n = (left.min(buf.len() as u64)) as usize;
                self.state = State::Body(left - n as u64);
                n
            }
            State::UntilClose => buf.len(),
            State::Chunked(_) => self.feed_chunked(buf)?,
        };
        self.bytes += n as u64;
        let done = match self.state {
            State::Body(0) => Some(self.finish()),
            State::Chunked(Chunk::Trailer { line: u32::MAX }) => Some(self.finish()),
            _ => None,
        };
        Ok((n, done))
    }

    /// The peer closed the stream.
    pub fn eof(&mut self) -> Eof {
        let r = match self.state {
            State::Head if self.head.is_empty() && self.bytes == 0 => Eof::Clean,
            State::Head => Eof::InHead,
            State::UntilClose => Eof::Complete(self.finish()),
            State::Body(_) | State::Chunked(_) => Eof::ShortBody,
        };
        self.reset();
        r
    }

    fn finish(&mut self) -> Response {
        let r = Response {
            status: self.status,
            bytes: self.bytes,
            close: self.close,
        };
        self.state = State::Head;
        self.bytes = 0;
        self.status = 0;
        self.close = false;
        r
    }

    fn feed_head(
        &mut self,
        buf: &[u8],
        head_request: bool,
    ) -> Result<(usize, Option<Response>), &'static str> {
        // Uninitialised header slots: httparse fills what it uses, and this runs once per
        // response, so the 2 KiB of zeroing that `EMPTY_HEADER`s would cost is skipped.
        let mut headers = [const { MaybeUninit::<httparse::Header>::uninit() }; 64];
        let mut resp = httparse::Response::new(&mut []);
        let config = httparse::ParserConfig::default();
        let old = self.head.len();
        let parsed = if old == 0 {
            config.parse_response_with_uninit_headers(&mut resp, buf, &mut headers)
        } else {
            let take = buf.len().min(MAX_HEAD + 1 - old.min(MAX_HEAD));
            self.head.extend_from_slice(&buf[..take]);
            config.parse_response_with_uninit_headers(&mut resp, &self.head, &mut headers)
        };
        let len = match parsed {
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) => {
                if old == 0 {
                    if buf.len() > MAX_HEAD {
                        return Err("response head too large");
                    }
                    self.head.extend_from_slice(buf);
                } else if self.head.len() > MAX_HEAD {
                    return Err("response head too large");
                }
                self.bytes += buf.len() as u64;
                return Ok((buf.len(), None));
            }
            Err(_) => return Err("malformed response head"),
        };
        let consumed = len - old;
        let status = resp.code.unwrap_or(0);
        let http10 = resp.version == Some(0);
        let mut close = http10;
        let mut length: Option<u64> = None;
        let mut chunked = false;
        for h in resp.headers.iter() {
            if h.name.eq_ignore_ascii_case("content-length") {
                let v = std::str::from_utf8(h.value).map_err(|_| "bad Content-Length")?;
                let v: u64 = v.trim().parse().map_err(|_| "bad Content-Length")?;
                if length.is_some_and(|l| l != v) {
                    return Err("conflicting Content-Length");
                }
                length = Some(v);
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = h
                    .value
                    .split(|&b| b == b',')
                    .next_back()
                    .is_some_and(|t| t.trim_ascii().eq_ignore_ascii_case(b"chunked"));
            } else if h.name.eq_ignore_ascii_case("connection") {
                for token in h.value.split(|&b| b == b',') {
                    let t = token.trim_ascii();
                    if t.eq_ignore_ascii_case(b"close") {
                        close = true;
                    } else if t.eq_ignore_ascii_case(b"keep-alive") && http10 {
                        close = false;
                    }
                }
            }
        }
        self.head.clear();
        self.bytes += consumed as u64;
        if (100..200).contains(&status) && status != 101 {
            // Interim response: its bytes count towards the final one.
            return Ok((consumed, None));
        }
        self.status = status;
        self.close = close || status == 101;
        if head_request || status == 204 || status == 304 || status == 101 {
            return Ok((consumed, Some(self.finish())));
        }
        if chunked {
            self.state = State::Chunked(Chunk::Size {
                size: 0,
                digits: 0,
                ext: false,
            });
        } else if let Some(len) = length {
            if len == 0 {
                return Ok((consumed, Some(self.finish())));
            }
            self.state = State::Body(len);
        } else {
            self.close = true;
            self.state = State::UntilClose;
        }
        Ok((consumed, None))
    }

    /// Advances the chunked decoder over `buf`; stops after the final trailer line, leaving
    /// `Trailer { line: u32::MAX }` as the completion marker.
    fn feed_chunked(&mut self, buf: &[u8]) -> Result<usize, &'static str> {
        let State::Chunked(mut c) = self.state else {
            unreachable!()
        };
        let mut i = 0;
        while i < buf.len() {
            match c {
                Chunk::Data(left) => {
                    let n = (left.min((buf.len() - i) as u64)) as usize;
                    i += n;
                    c = if left == n as u64 {
                        Chunk::DataEnd
                    } else {
                        Chunk::Data(left - n as u64)
                    };
                    continue;
                }
                Chunk::Size { size, digits, ext } => {
                    let b = buf[i];
                    i += 1;
                    c = match b {
                        b'\n' if digits == 0 => return Err("empty chunk size"),
                        b'\n' if size == 0 => Chunk::Trailer { line: 0 },
                        b'\n' => Chunk::Data(size),
                        _ if ext || b == b'\r' => Chunk::Size {
                            size,
                            digits,
                            ext: true,
                        },
                        b';' | b' ' | b'\t' if digits > 0 => Chunk::Size {
                            size,
                            digits,
                            ext: true,
                        },
                        _ => {
                            let d = (b as char).to_digit(16).ok_or("bad chunk size")?;
                            if digits >= 15 {
                                return Err("chunk size too large");
                            }
                            Chunk::Size {
                                size: size * 16 + d as u64,
                                digits: digits + 1,
                                ext: false,
                            }
                        }
                    };
                }
                Chunk::DataEnd => {
                    let b = buf[i];
                    i += 1;
                    c = match b {
                        b'\r' => Chunk::DataEnd,
                        b'\n' => Chunk::Size {
                            size: 0,
                            digits: 0,
                            ext: false,
                        },
                        _ => return Err("missing CRLF after chunk data"),
                    };
                }
                Chunk::Trailer { line } => {
                    let b = buf[i];
                    i += 1;
                    c = match b {
                        b'\r' => Chunk::Trailer { line },
                        b'\n' if line == 0 => {
                            self.state = State::Chunked(Chunk::Trailer { line: u32::MAX });
                            return Ok(i);
                        }
                        b'\n' => Chunk::Trailer { line: 0 },
                        _ => Chunk::Trailer {
                            line: line.saturating_add(1).min(u32::MAX - 1),
                        },
                    };
                }
            }
        }
        self.state = State::Chunked(c);
        Ok(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `input` in pieces of `step` bytes; returns the responses and the final parser.
    fn run(input: &[u8], step: usize, head: bool) -> (Vec<Response>, Parser) {
        let mut p = Parser::new();
        let mut out = Vec::new();
        for piece in input.chunks(step) {
            let mut off = 0;
            while off < piece.len() {
                let (n, r) = p.feed(&piece[off..], head).expect("parse");
                off += n;
                out.extend(r);
                assert!(n > 0 || off == piece.len());
            }
        }
        (out, p)
    }

    #[test]
    fn content_length_pipelined_any_split() {
        let one = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
        let two = b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n";
        let mut all = one.to_vec();
        all.extend_from_slice(two);
        all.extend_from_slice(one);
        for step in [1, 2, 3, 7, 40, 1000] {
            let (rs, p) = run(&all, step, false);
            assert_eq!(rs.len(), 3, "step {step}");
            assert_eq!(rs[0].status, 200);
            assert_eq!(rs[0].bytes, one.len() as u64);
            assert_eq!(rs[1].status, 404);
            assert_eq!(rs[1].bytes, two.len() as u64);
            assert!(!rs[0].close);
            assert!(!p.in_progress());
        }
    }

    #[test]
    fn chunked_with_extensions_and_trailers() {
        let r = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n";
        for step in [1, 4, 9, 1000] {
            let (rs, _) = run(r, step, false);
            assert_eq!(rs.len(), 2, "step {step}");
            assert_eq!(rs[0].status, 200);
            assert_eq!(rs[1].status, 204);
            assert_eq!(rs[0].bytes + rs[1].bytes, r.len() as u64);
        }
        let mut p = Parser::new();
        let bad = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
        let (n, _) = p.feed(bad, false).unwrap();
        assert!(p.feed(&bad[n..], false).is_err());
    }

    #[test]
    fn close_delimited_and_connection_semantics() {
        let (rs, mut p) = run(b"HTTP/1.0 200 OK\r\n\r\nabc", 2, false);
        assert!(rs.is_empty());
        match p.eof() {
            Eof::Complete(r) => {
                assert_eq!(r.status, 200);
                assert_eq!(r.bytes, 22);
                assert!(r.close);
            }
            e => panic!("{e:?}"),
        }
        let (rs, _) = run(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", 5, false);
        assert!(rs[0].close, "HTTP/1.0 closes by default");
        let (rs, _) = run(
            b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n",
            5,
            false,
        );
        assert!(!rs[0].close);
        let (rs, _) = run(
            b"HTTP/1.1 200 OK\r\nConnection: Close\r\nContent-Length: 0\r\n\r\n",
            5,
            false,
        );
        assert!(rs[0].close);
    }

    #[test]
    fn head_requests_and_interim_responses() {
        let (rs, _) = run(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", 3, true);
        assert_eq!(rs.len(), 1);
        let r = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        let (rs, _) = run(r, 5, false);
        assert_eq!(rs.len(), 1);
        assert_eq!(rs[0].status, 200);
        assert_eq!(rs[0].bytes, r.len() as u64);
    }

    #[test]
    fn eof_kinds() {
        let mut p = Parser::new();
        assert_eq!(p.eof(), Eof::Clean);
        p.feed(b"HTTP/1.1 200", false).unwrap();
        assert!(p.in_progress());
        assert_eq!(p.eof(), Eof::InHead);
        let (n, _) = p
            .feed(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", false)
            .unwrap();
        p.feed(
            &b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"[n..],
            false,
        )
        .unwrap();
        assert_eq!(p.eof(), Eof::ShortBody);
        assert!(!p.in_progress());
    }

    #[test]
    fn malformed_and_oversized() {
        let mut p = Parser::new();
        assert!(p.feed(b"garbage\r\n\r\n", false).is_err());
        let mut p = Parser::new();
        assert!(p
            .feed(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", false)
            .is_err());
        let mut p = Parser::new();
        let mut big = b"HTTP/1.1 200 OK\r\nX: ".to_vec();
        big.resize(MAX_HEAD + 10, b'a');
        let mut res = Ok((0, None));
        for piece in big.chunks(4096) {
            res = p.feed(piece, false);
            if res.is_err() {
                break;
            }
        }
        assert!(res.is_err());
    }
}

//! Request body framing and decoding (RFC 9112 §6-7): Content-Length and chunked, consumed
//! incrementally from whatever bytes have arrived so a connection stays in sync.
//! STUB: signatures fixed; bodies to be implemented.

/// How a message body is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// No body.
    None,
    /// Exactly this many bytes (never 0: a zero Content-Length is `None`).
    Length(u64),
    /// Transfer-Encoding: chunked.
    Chunked,
}

/// A body-decoding failure; both mean: answer the status and close.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyError {
    /// 400: bad chunk size, missing CRLF, oversize chunk extension or trailer section.
    Malformed(&'static str),
    /// 413: the decoded body exceeds the limit.
    TooLarge,
}

/// One step of decoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decoded<'b> {
    /// Input bytes consumed by this step.
    pub consumed: usize,
    /// Body data found in this step (a sub-slice of the input; may be empty).
    pub data: &'b [u8],
    /// The body is complete (the final chunk and trailers, or the last byte, consumed).
    pub done: bool,
}

/// Incremental decoder: feed it the unconsumed input repeatedly.
#[derive(Clone, Debug)]
pub struct BodyDecoder {
    _private: (),
}

impl BodyDecoder {
    pub fn new(framing: Framing, max_body: u64) -> BodyDecoder {
        let _ = (framing, max_body);
        todo!()
    }

    /// Decode as much as possible from `input`: returns at most one contiguous data slice per
    /// call. Callers loop while `consumed > 0 && !done`.
    pub fn decode<'b>(&mut self, input: &'b [u8]) -> Result<Decoded<'b>, BodyError> {
        let _ = input;
        todo!()
    }

    pub fn is_done(&self) -> bool {
        todo!()
    }
}

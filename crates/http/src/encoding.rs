//! Content-coding negotiation (RFC 9110 §12.5.3) for precompressed siblings: parse
//! Accept-Encoding with q-values and pick among the codings that exist on disk.
//! STUB: signatures fixed; bodies to be implemented.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coding {
    Br,
    Gzip,
    Identity,
}

impl Coding {
    /// Value for Content-Encoding (None for identity).
    pub fn header_value(self) -> Option<&'static str> {
        match self {
            Coding::Br => Some("br"),
            Coding::Gzip => Some("gzip"),
            Coding::Identity => None,
        }
    }
    /// File-name suffix of the precompressed sibling.
    pub fn suffix(self) -> &'static str {
        match self {
            Coding::Br => ".br",
            Coding::Gzip => ".gz",
            Coding::Identity => "",
        }
    }
}

/// Pick the coding to serve. `accept` is the Accept-Encoding value (None: header absent,
/// meaning identity only is safe to assume). `have_br`/`have_gzip` say which siblings exist.
/// Highest q wins; q=0 excludes; `*` covers codings not listed; on equal q prefer br, then
/// gzip, then identity (smaller first). `x-gzip` counts as gzip. Identity is the fallback even
/// if excluded (a 406 is never useful for static files).
pub fn negotiate(accept: Option<&[u8]>, have_br: bool, have_gzip: bool) -> Coding {
    let _ = (accept, have_br, have_gzip);
    todo!()
}

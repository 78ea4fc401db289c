//! Content-coding negotiation (RFC 9110 §12.5.3) for precompressed siblings: parse
//! Accept-Encoding with q-values and pick among the codings that exist on disk.
//!
//! Why this module exists: gearshift serves `foo.js.br` / `foo.js.gz` next to `foo.js` instead
//! of compressing on the fly, and which one a client gets depends on its Accept-Encoding. A
//! wrong answer either wastes bandwidth or, worse, sends a coding the client cannot decode, so
//! the decision is taken here, sans-IO and identically for every engine.
//!
//! Parsing is lenient where it is harmless and strict where it is not: OWS, empty list
//! elements, case-insensitive coding names and parameter names, and parameters other than `q`
//! are tolerated (ignored); an element whose coding is not a token or whose `q` is malformed
//! (not `0[.ddd]` / `1[.000]`, or given twice) is ignored as a whole. A coding listed several
//! times gets the lowest of its q-values (an explicit refusal is never overridden).
//!
//! Choices a server author must know: without Accept-Encoding, or with an empty one, identity
//! is served (RFC 9110 would allow any coding when the header is absent, but old clients and
//! proxies that strip the header are better served uncompressed). Identity not listed (and not
//! covered by `*`) ranks below every acceptable coding but is always the fallback: this module
//! never asks for a 406. The caller must send `Vary: Accept-Encoding` whenever a sibling
//! exists, whatever was chosen.

use crate::parse::trim_ows;

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

/// A q-value in thousandths: `0..=1000`.
pub type Qvalue = u16;

/// The q-values an Accept-Encoding value gives to the codings gearshift knows, `None` where
/// the coding is not listed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AcceptEncoding {
    pub br: Option<Qvalue>,
    pub gzip: Option<Qvalue>,
    pub identity: Option<Qvalue>,
    pub star: Option<Qvalue>,
}

/// RFC 9110 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Split `s` at `sep` bytes that are not inside a quoted-string (so that an ignored parameter
/// like `;x="a,b"` does not split a list element).
fn split_unquoted(s: &[u8], sep: u8) -> impl Iterator<Item = &[u8]> {
    let mut rest = Some(s);
    std::iter::from_fn(move || {
        let s = rest?;
        let (mut quoted, mut escaped) = (false, false);
        for (i, &b) in s.iter().enumerate() {
            if escaped {
                escaped = false;
            } else if quoted {
                match b {
                    b'\\' => escaped = true,
                    b'"' => quoted = false,
                    _ => {}
                }
            } else if b == b'"' {
                quoted = true;
            } else if b == sep {
                rest = Some(&s[i + 1..]);
                return Some(&s[..i]);
            }
        }
        rest = None;
        Some(s)
    })
}

/// RFC 9110 §12.4.2 `qvalue`: `0[.ddd]` or `1[.000]` (up to three decimals), in thousandths.
pub fn parse_qvalue(s: &[u8]) -> Option<Qvalue> {
    let (int, frac) = match s {
        [d, b'.', frac @ ..] => (*d, frac),
        [d] => (*d, &[][..]),
        _ => return None,
    };
    if frac.len() > 3 || !frac.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut thousandths: Qvalue = 0;
    for (i, &d) in frac.iter().enumerate() {
        thousandths += Qvalue::from(d - b'0') * [100, 10, 1][i];
    }
    match int {
        b'0' => Some(thousandths),
        b'1' if thousandths == 0 => Some(1000),
        _ => None,
    }
}

/// One list element: `(coding name, q)`, or `None` to ignore the element.
fn parse_element(elem: &[u8]) -> Option<(&[u8], Qvalue)> {
    let mut pieces = split_unquoted(elem, b';');
    let name = trim_ows(pieces.next()?);
    if name.is_empty() || !name.iter().all(|&b| is_tchar(b)) {
        return None;
    }
    let mut q = None;
    for param in pieces {
        let param = trim_ows(param);
        let (pname, pvalue) = match memchr::memchr(b'=', param) {
            Some(eq) => (trim_ows(&param[..eq]), Some(trim_ows(&param[eq + 1..]))),
            None => (param, None),
        };
        if pname.eq_ignore_ascii_case(b"q") {
            if q.is_some() {
                return None;
            }
            q = Some(parse_qvalue(pvalue?)?);
        }
        // Other parameters (and empty ones from `;;`) are ignored.
    }
    Some((name, q.unwrap_or(1000)))
}

/// Parse an Accept-Encoding value. Unknown codings are skipped.
pub fn parse_accept_encoding(value: &[u8]) -> AcceptEncoding {
    let mut acc = AcceptEncoding::default();
    for elem in split_unquoted(value, b',') {
        if trim_ows(elem).is_empty() {
            continue;
        }
        let Some((name, q)) = parse_element(elem) else {
            continue;
        };
        let slot = if name.eq_ignore_ascii_case(b"br") {
            &mut acc.br
        } else if name.eq_ignore_ascii_case(b"gzip") || name.eq_ignore_ascii_case(b"x-gzip") {
            &mut acc.gzip
        } else if name.eq_ignore_ascii_case(b"identity") {
            &mut acc.identity
        } else if name == b"*" {
            &mut acc.star
        } else {
            continue;
        };
        *slot = Some(slot.map_or(q, |old| old.min(q)));
    }
    acc
}

impl AcceptEncoding {
    /// The choice among the available siblings; see [`negotiate`].
    pub fn choose(&self, have_br: bool, have_gzip: bool) -> Coding {
        let q = |listed: Option<Qvalue>, have: bool| match have {
            true => listed.or(self.star).unwrap_or(0),
            false => 0,
        };
        let (br, gzip) = (q(self.br, have_br), q(self.gzip, have_gzip));
        let best = if br > 0 && br >= gzip {
            (Coding::Br, br)
        } else if gzip > 0 {
            (Coding::Gzip, gzip)
        } else {
            return Coding::Identity;
        };
        // Identity listed (or covered by `*`) wins only with a strictly higher q; unlisted,
        // it ranks below every acceptable coding.
        match self.identity.or(self.star) {
            Some(identity) if identity > best.1 => Coding::Identity,
            _ => best.0,
        }
    }
}

/// Pick the coding to serve. `accept` is the Accept-Encoding value (None: header absent,
/// meaning identity only is safe to assume). `have_br`/`have_gzip` say which siblings exist.
/// Highest q wins; q=0 excludes; `*` covers codings not listed; on equal q prefer br, then
/// gzip, then identity (smaller first). `x-gzip` counts as gzip. Identity is the fallback even
/// if excluded (a 406 is never useful for static files).
pub fn negotiate(accept: Option<&[u8]>, have_br: bool, have_gzip: bool) -> Coding {
    match accept {
        None => Coding::Identity,
        Some(value) => parse_accept_encoding(value).choose(have_br, have_gzip),
    }
}

#[cfg(test)]
#[path = "encoding_tests.rs"]
mod tests;

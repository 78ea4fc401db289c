//! Conditional requests (RFC 9110 §13): If-Match, If-None-Match, If-Modified-Since,
//! If-Unmodified-Since evaluated in the §13.2.2 order, and If-Range.
//!
//! Why this module exists: revalidation (304 Not Modified) is what makes a static file server
//! cheap for caches and browsers, and If-Match/If-Unmodified-Since/If-Range protect clients
//! from mixing two versions of a file (lost updates, corrupt resumed downloads). The order in
//! which the four preconditions are evaluated and the two entity-tag comparisons are easy to
//! get subtly wrong, so every engine takes its decision from here, sans-IO: raw header bytes
//! and the representation's validators in, an [`Outcome`] out.
//!
//! Choices a server author must know:
//! - A representation always exists here (the caller evaluates preconditions only for an
//!   existing file), so `If-Match: *` is true and `If-None-Match: *` is a match.
//! - A malformed entity-tag list never matches: a malformed If-Match gives 412, a malformed
//!   If-None-Match is "no match" (so the request proceeds and If-Modified-Since is still
//!   ignored, as If-None-Match was present). An empty list matches nothing.
//! - Dates that are not valid HTTP-dates are ignored (as if the field were absent).
//! - If-Range with a date is honoured when exactly equal to Last-Modified; this module has no
//!   clock, so the RFC's "Last-Modified is strong" check (at least a second before Date) is
//!   the caller's business if it cares.

use crate::date;
use crate::parse::trim_ows;

/// The selected representation's validators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Validators<'a> {
    /// Entity tag including its quotes (and `W/` if weak), e.g. `"5f3a-400"`.
    pub etag: &'a [u8],
    /// Last modification, Unix seconds.
    pub last_modified: u64,
}

/// The request's precondition header values (raw), if present.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Preconditions<'a> {
    pub if_match: Option<&'a [u8]>,
    pub if_none_match: Option<&'a [u8]>,
    pub if_modified_since: Option<&'a [u8]>,
    pub if_unmodified_since: Option<&'a [u8]>,
}

/// What the preconditions decide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Go on (and then look at Range/If-Range).
    Proceed,
    /// 304 Not Modified (only for GET/HEAD).
    NotModified,
    /// 412 Precondition Failed.
    PreconditionFailed,
}

/// A parsed entity tag (RFC 9110 §8.8.3): `[W/]"opaque"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntityTag<'a> {
    /// Whether the tag carried the (case-sensitive) `W/` prefix.
    pub weak: bool,
    /// The opaque-tag including its double quotes.
    pub opaque: &'a [u8],
}

impl EntityTag<'_> {
    /// Strong comparison (§8.8.3.2): both strong and the opaque tags are equal.
    pub fn strong_eq(&self, other: &EntityTag) -> bool {
        !self.weak && !other.weak && self.opaque == other.opaque
    }

    /// Weak comparison (§8.8.3.2): the opaque tags are equal, `W/` ignored.
    pub fn weak_eq(&self, other: &EntityTag) -> bool {
        self.opaque == other.opaque
    }
}

fn trim_start_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    s
}

/// `etagc = %x21 / %x23-7E / obs-text`.
fn is_etagc(b: u8) -> bool {
    b == 0x21 || (0x23..=0x7e).contains(&b) || b >= 0x80
}

/// Parse one entity tag at the start of `s`; returns it and what follows it.
fn parse_tag_prefix(s: &[u8]) -> Option<(EntityTag<'_>, &[u8])> {
    let (weak, s) = match s.strip_prefix(b"W/") {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    if s.first() != Some(&b'"') {
        return None;
    }
    let close = 1 + s[1..].iter().position(|&b| !is_etagc(b))?;
    if s[close] != b'"' {
        return None;
    }
    Some((
        EntityTag {
            weak,
            opaque: &s[..=close],
        },
        &s[close + 1..],
    ))
}

/// Parse a single entity tag (surrounding OWS allowed), e.g. an ETag or If-Range value.
pub fn parse_entity_tag(value: &[u8]) -> Option<EntityTag<'_>> {
    match parse_tag_prefix(trim_ows(value))? {
        (tag, []) => Some(tag),
        _ => None,
    }
}

/// Whether an If-Match / If-None-Match value (`*` or a comma-separated list of entity tags,
/// OWS and empty elements tolerated) matches `current` with the strong (`strong == true`) or
/// weak comparison. `None` if the value is malformed. `*` matches whenever a representation
/// exists (`current` may be `None` for a representation without a usable ETag).
pub fn list_matches(value: &[u8], current: Option<&EntityTag>, strong: bool) -> Option<bool> {
    let mut rest = trim_ows(value);
    if rest == b"*" {
        return Some(true);
    }
    let mut found = false;
    loop {
        // Skip OWS and empty list elements.
        while let [b' ' | b'\t' | b',', tail @ ..] = rest {
            rest = tail;
        }
        if rest.is_empty() {
            return Some(found);
        }
        let (tag, tail) = parse_tag_prefix(rest)?;
        if let Some(cur) = current {
            found |= if strong {
                tag.strong_eq(cur)
            } else {
                tag.weak_eq(cur)
            };
        }
        // After a tag: OWS, then a comma or the end.
        rest = trim_start_ows(tail);
        if !(rest.is_empty() || rest[0] == b',') {
            return None;
        }
    }
}

/// Evaluate in RFC 9110 §13.2.2 order. `get_or_head` says whether the method is GET or
/// HEAD (a failed If-None-Match gives 304 for those, 412 otherwise). If-Match uses the strong
/// comparison, If-None-Match the weak one; `*` matches any current representation; lists are
/// comma-separated; invalid dates are ignored.
///
/// The steps: (1) If-Match present and false (or malformed): 412; (2) otherwise
/// If-Unmodified-Since a valid date earlier than Last-Modified: 412; (3) If-None-Match present
/// and matching: 304 for GET/HEAD, 412 otherwise; (4) otherwise, GET/HEAD with
/// If-Modified-Since a valid date not earlier than Last-Modified: 304; (5) Proceed.
pub fn evaluate(get_or_head: bool, pre: &Preconditions, v: &Validators) -> Outcome {
    // The current tag is parsed only for a request that has a tag to compare with (most
    // have none: this is on every static request's path).
    let current = match (pre.if_match, pre.if_none_match) {
        (None, None) => None,
        _ => parse_entity_tag(v.etag),
    };
    let current = current.as_ref();
    if let Some(im) = pre.if_match {
        if list_matches(im, current, true) != Some(true) {
            return Outcome::PreconditionFailed;
        }
    } else if let Some(date) = pre.if_unmodified_since.and_then(date::parse) {
        if v.last_modified > date {
            return Outcome::PreconditionFailed;
        }
    }
    if let Some(inm) = pre.if_none_match {
        if list_matches(inm, current, false) == Some(true) {
            return if get_or_head {
                Outcome::NotModified
            } else {
                Outcome::PreconditionFailed
            };
        }
    } else if get_or_head {
        if let Some(date) = pre.if_modified_since.and_then(date::parse) {
            if v.last_modified <= date {
                return Outcome::NotModified;
            }
        }
    }
    Outcome::Proceed
}

/// RFC 9110 §13.1.5: whether a Range request carrying this If-Range value may be honoured
/// (true) or the full representation must be sent (false). An entity tag matches only by
/// the strong comparison; a date only when exactly equal to Last-Modified.
///
/// A value starting with `"` or `W/` is an entity tag (a weak one never matches); anything
/// else must be an HTTP-date; garbage gives false.
pub fn if_range_matches(if_range: &[u8], v: &Validators) -> bool {
    let value = trim_ows(if_range);
    if value.starts_with(b"\"") || value.starts_with(b"W/") {
        match (parse_entity_tag(value), parse_entity_tag(v.etag)) {
            (Some(tag), Some(current)) => tag.strong_eq(&current),
            _ => false,
        }
    } else {
        date::parse(value) == Some(v.last_modified)
    }
}

#[cfg(test)]
#[path = "conditional_tests.rs"]
mod tests;

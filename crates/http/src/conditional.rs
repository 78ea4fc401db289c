//! Conditional requests (RFC 9110 §13): If-Match, If-None-Match, If-Modified-Since,
//! If-Unmodified-Since evaluated in the §13.2.2 order, and If-Range.
//! STUB: signatures fixed; bodies to be implemented.

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

/// Evaluate in RFC 9110 §13.2.2 order. `get_or_head` says whether the method is GET or
/// HEAD (a failed If-None-Match gives 304 for those, 412 otherwise). If-Match uses the strong
/// comparison, If-None-Match the weak one; `*` matches any current representation; lists are
/// comma-separated; invalid dates are ignored.
pub fn evaluate(get_or_head: bool, pre: &Preconditions, v: &Validators) -> Outcome {
    let _ = (get_or_head, pre, v);
    todo!()
}

/// RFC 9110 §13.1.5: whether a Range request carrying this If-Range value may be honoured
/// (true) or the full representation must be sent (false). An entity tag matches only by
/// the strong comparison; a date only when exactly equal to Last-Modified.
pub fn if_range_matches(if_range: &[u8], v: &Validators) -> bool {
    let _ = (if_range, v);
    todo!()
}

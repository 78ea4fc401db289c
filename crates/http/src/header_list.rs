//! The field list of a parsed head (`RequestHead::headers`) reuses one allocation per thread:
//! a keep-alive connection's requests would otherwise each pay a malloc and a free (about
//! 190 instructions, near 4% of a cached static answer by bench/percall). A head its user
//! is done with gives its list back (`RequestHead::recycle`; a plain drop just frees it,
//! so no borrow of the input outlives the head); the next parse on that thread takes it.
//! No I/O and no clock: the parser stays sans-IO, only its scratch memory is kept.

use std::cell::Cell;

/// One header field, borrowed from the input buffer. `name` as sent (case preserved).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header<'b> {
    pub name: &'b [u8],
    pub value: &'b [u8],
}

/// Larger lists are freed rather than kept (a rare head with hundreds of fields should not
/// pin its list on the thread for good).
const KEEP_MAX: usize = 64;

thread_local! {
    static SPARE: Cell<Vec<Header<'static>>> = const { Cell::new(Vec::new()) };
}

/// An empty list with room for `cap` fields, the thread's spare one when it is big enough.
pub(crate) fn take<'b>(cap: usize) -> Vec<Header<'b>> {
    // Vec<Header<'static>> is a Vec<Header<'b>> (covariance): no conversion needed.
    let mut v: Vec<Header<'b>> = SPARE.with(Cell::take);
    v.reserve(cap);
    v
}

/// Keep `v`'s allocation for the next head parsed on this thread.
pub(crate) fn give(mut v: Vec<Header<'_>>) {
    if v.capacity() == 0 || v.capacity() > KEEP_MAX {
        return;
    }
    v.clear();
    // Empty, so the closure never runs: the in-place collect only re-labels the lifetime
    // and keeps the allocation (std reuses it when the layouts match, as here; the test
    // below checks it still does).
    let v: Vec<Header<'static>> = v.into_iter().map(|_| unreachable!()).collect();
    SPARE.with(|s| s.set(v));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_list_is_taken_again_without_a_new_allocation() {
        let buf = b"name".to_vec();
        let mut v = take(4);
        v.push(Header {
            name: &buf,
            value: &buf,
        });
        let (ptr, cap) = (v.as_ptr() as usize, v.capacity());
        give(v);
        let w = take(2);
        assert!(w.is_empty());
        assert_eq!((w.as_ptr() as usize, w.capacity()), (ptr, cap));
        // Taken: the next take allocates its own.
        let x = take(1);
        assert_ne!(x.as_ptr() as usize, ptr);
    }

    #[test]
    fn a_large_list_is_not_kept() {
        give(Vec::with_capacity(KEEP_MAX + 1));
        assert_eq!(take(0).capacity(), 0);
    }
}

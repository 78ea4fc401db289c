//! The event calendar of the discrete-event simulators (`server`, `cluster`): events in
//! time order, ties in the order they were scheduled, so a run is a pure function of its
//! seed. A binary heap of (time, sequence number) — std's `BinaryHeap` is the data
//! structure; this only fixes the ordering of `f64` times (total order) and the tie rule.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

/// Pending events of type `E`, earliest first.
pub(crate) struct Calendar<E> {
    seq: u64,
    events: BinaryHeap<Reverse<At<E>>>,
}

struct At<E>(f64, u64, E);

impl<E> PartialEq for At<E> {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl<E> Eq for At<E> {}
impl<E> PartialOrd for At<E> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<E> Ord for At<E> {
    fn cmp(&self, o: &Self) -> Ordering {
        self.0.total_cmp(&o.0).then(self.1.cmp(&o.1))
    }
}

impl<E> Default for Calendar<E> {
    fn default() -> Self {
        Calendar {
            seq: 0,
            events: BinaryHeap::new(),
        }
    }
}

impl<E> Calendar<E> {
    /// Schedule `e` at time `t`.
    pub(crate) fn push(&mut self, t: f64, e: E) {
        self.seq += 1;
        self.events.push(Reverse(At(t, self.seq, e)));
    }

    /// The earliest event if it is due by `end` (removed), else None.
    pub(crate) fn pop_until(&mut self, end: f64) -> Option<(f64, E)> {
        if self.events.peek()?.0 .0 > end {
            return None;
        }
        self.events.pop().map(|Reverse(At(t, _, e))| (t, e))
    }
}

#[cfg(test)]
mod tests {
    use super::Calendar;

    #[test]
    fn earliest_first_ties_in_scheduling_order_and_nothing_past_the_end() {
        let mut c = Calendar::default();
        c.push(2.0, "late");
        c.push(1.0, "first");
        c.push(1.0, "second");
        c.push(5.0, "past");
        assert_eq!(c.pop_until(3.0), Some((1.0, "first")));
        assert_eq!(c.pop_until(3.0), Some((1.0, "second")));
        assert_eq!(c.pop_until(3.0), Some((2.0, "late")));
        assert_eq!(c.pop_until(3.0), None);
        assert_eq!(c.pop_until(5.0), Some((5.0, "past")));
        assert_eq!(c.pop_until(f64::INFINITY), None);
    }
}

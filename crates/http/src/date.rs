//! The `Date` header value, formatted at most once a second. The caller passes the current
//! Unix time in; this module only formats (with httpdate) and remembers the last second.

use std::time::{Duration, UNIX_EPOCH};

/// IMF-fixdate is always 29 bytes: `Sun, 06 Nov 1994 08:49:37 GMT`.
pub const DATE_LEN: usize = 29;

#[derive(Clone, Debug)]
pub struct DateCache {
    second: u64,
    value: [u8; DATE_LEN],
}

impl DateCache {
    pub fn new(unix_secs: u64) -> DateCache {
        let mut d = DateCache {
            second: u64::MAX,
            value: [b' '; DATE_LEN],
        };
        d.update(unix_secs);
        d
    }

    /// Reformat if the second changed. Returns whether it did.
    pub fn update(&mut self, unix_secs: u64) -> bool {
        if unix_secs == self.second {
            return false;
        }
        self.second = unix_secs;
        let s = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(unix_secs.min(LAST_DATE)));
        self.value.copy_from_slice(&s.as_bytes()[..DATE_LEN]);
        true
    }

    pub fn get(&self) -> &[u8; DATE_LEN] {
        &self.value
    }

    pub fn second(&self) -> u64 {
        self.second
    }
}

/// The last second an HTTP-date can name (9999-12-31T23:59:59Z; httpdate panics beyond).
pub const LAST_DATE: u64 = 253_402_300_799;

/// Format Unix seconds as an HTTP-date (for Last-Modified); later times are written as the
/// last second of year 9999 rather than panicking.
pub fn fmt(unix_secs: u64) -> String {
    httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(unix_secs.min(LAST_DATE)))
}

/// Parse an HTTP-date (any of the three RFC 9110 forms) into Unix seconds.
pub fn parse(value: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(value).ok()?;
    let t = httpdate::parse_http_date(s.trim()).ok()?;
    t.duration_since(UNIX_EPOCH).ok().map(|d| d.as_secs())
}

/// Days since 1970-01-01 to a proleptic Gregorian (year, month, day)
/// (Howard Hinnant's `civil_from_days`, restricted to non-negative days).
pub fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097; // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11], March-based
    let d = doy - (153 * mp + 2) / 5 + 1; // [1, 31]
    let m = if mp < 10 { mp + 3 } else { mp - 9 }; // [1, 12]
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_past_year_9999_do_not_panic() {
        assert_eq!(fmt(LAST_DATE), "Fri, 31 Dec 9999 23:59:59 GMT");
        assert_eq!(fmt(u64::MAX / 2), "Fri, 31 Dec 9999 23:59:59 GMT");
        let mut d = DateCache::new(0);
        d.update(LAST_DATE + 1000);
        assert_eq!(&d.get()[..], b"Fri, 31 Dec 9999 23:59:59 GMT");
    }

    #[test]
    fn formats_imf_fixdate_and_caches_per_second() {
        let mut d = DateCache::new(784111777);
        assert_eq!(d.get(), b"Sun, 06 Nov 1994 08:49:37 GMT");
        assert!(!d.update(784111777));
        assert!(d.update(784111778));
        assert_eq!(d.get(), b"Sun, 06 Nov 1994 08:49:38 GMT");
    }

    #[test]
    fn parses_all_three_forms() {
        assert_eq!(parse(b"Sun, 06 Nov 1994 08:49:37 GMT"), Some(784111777));
        assert_eq!(parse(b"Sunday, 06-Nov-94 08:49:37 GMT"), Some(784111777));
        assert_eq!(parse(b"Sun Nov  6 08:49:37 1994"), Some(784111777));
        assert_eq!(parse(b"yesterday"), None);
    }
}

//! HTTP dates (IMF-fixdate) without dependencies.

use std::time::{SystemTime, UNIX_EPOCH};

// ---------------------------------------------------------------------------------------------
// HTTP dates (IMF-fixdate), for conditional requests and checking Date / Last-Modified.

const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// Unix seconds -> `Sun, 06 Nov 1994 08:49:37 GMT`.
pub fn http_date(secs: i64) -> String {
    let days = secs.div_euclid(86400);
    let rem = secs.rem_euclid(86400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{}, {:02} {} {} {:02}:{:02}:{:02} GMT",
        DAYS[days.rem_euclid(7) as usize],
        d,
        MONTHS[(m - 1) as usize],
        y,
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Strict IMF-fixdate parser -> Unix seconds.
pub fn parse_http_date(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() != 29 || &s[3..5] != ", " || &s[25..] != " GMT" {
        return None;
    }
    let wd = DAYS.iter().position(|d| *d == &s[..3])?;
    let day: i64 = s[5..7].parse().ok()?;
    let mon = MONTHS.iter().position(|m| *m == &s[8..11])? as i64 + 1;
    let year: i64 = s[12..16].parse().ok()?;
    let h: i64 = s[17..19].parse().ok()?;
    let mi: i64 = s[20..22].parse().ok()?;
    let se: i64 = s[23..25].parse().ok()?;
    if &s[7..8] != " " || &s[11..12] != " " || &s[16..17] != " " || &s[19..20] != ":" {
        return None;
    }
    let days = days_from_civil(year, mon, day);
    if days.rem_euclid(7) as usize != wd {
        return None;
    }
    Some(days * 86400 + h * 3600 + mi * 60 + se)
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

pub fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

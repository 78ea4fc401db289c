//! HTML directory listings (on by default for a zero-config `gearshift serve DIR`, off
//! with a configuration file, as nginx's autoindex).
//!
//! When a directory has no index file and listings are enabled, the
//! static-file handler answers with a small self-contained HTML5 page built
//! here, sortable by name, size or date without script: the column headings link to
//! `?C=N|S|M;O=A|D`, Apache mod_autoindex's query, which users and scripts already know. File names come straight from the file system and are hostile
//! input: they are HTML-escaped for display and percent-encoded (by their
//! exact bytes, so non-UTF-8 names still link correctly) for links. Hiding
//! dot-files is the caller's job (it filters the entries by its policy).

use super::path::encode_path;
use gearshift_http::date::civil_from_days;
use std::fmt::Write as _;

/// One entry of a listed directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    /// The raw file name (one path component, any bytes).
    pub name: Vec<u8>,
    /// Whether the entry is a directory (listed with a trailing `/`).
    pub is_dir: bool,
    /// Size in bytes (not shown for directories).
    pub size: u64,
    /// Modification time, seconds since the Unix epoch.
    pub mtime: u64,
}

/// The column a listing is sorted by, and the direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sort {
    pub key: SortKey,
    pub descending: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortKey {
    Name,
    Size,
    Modified,
}

impl Default for Sort {
    fn default() -> Sort {
        Sort {
            key: SortKey::Name,
            descending: false,
        }
    }
}

impl Sort {
    /// From a query like `C=S;O=D` (`;` or `&` between the pairs, unknown pairs ignored,
    /// anything malformed gives the default order).
    pub fn from_query(query: Option<&[u8]>) -> Sort {
        let mut sort = Sort::default();
        for pair in query.unwrap_or_default().split(|&b| b == b';' || b == b'&') {
            match pair {
                b"C=N" => sort.key = SortKey::Name,
                b"C=S" => sort.key = SortKey::Size,
                b"C=M" => sort.key = SortKey::Modified,
                b"O=A" => sort.descending = false,
                b"O=D" => sort.descending = true,
                _ => {}
            }
        }
        sort
    }

    /// The query of a heading's link: its column ascending, or descending when the page
    /// is already sorted ascending by it.
    fn link(self, key: SortKey) -> &'static str {
        let desc = self.key == key && !self.descending;
        match (key, desc) {
            (SortKey::Name, false) => "?C=N;O=A",
            (SortKey::Name, true) => "?C=N;O=D",
            (SortKey::Size, false) => "?C=S;O=A",
            (SortKey::Size, true) => "?C=S;O=D",
            (SortKey::Modified, false) => "?C=M;O=A",
            (SortKey::Modified, true) => "?C=M;O=D",
        }
    }
}

/// Renders the listing page for the directory at `url_path` (the decoded URL
/// path, shown in the title). Sorts `entries` in place: directories first, then by the
/// `sort` column (ties by name), bytewise for names. Entries named `.` or `..` are
/// skipped (the page has its own parent link, shown unless `url_path` is `/`).
pub fn render(url_path: &str, entries: &mut [DirEntry], sort: Sort) -> String {
    entries.sort_by(|a, b| {
        let by = match sort.key {
            SortKey::Name => a.name.cmp(&b.name),
            SortKey::Size => a.size.cmp(&b.size).then_with(|| a.name.cmp(&b.name)),
            SortKey::Modified => a.mtime.cmp(&b.mtime).then_with(|| a.name.cmp(&b.name)),
        };
        let by = if sort.descending { by.reverse() } else { by };
        b.is_dir.cmp(&a.is_dir).then(by)
    });

    let title = escape_html(url_path);
    let mut out = String::with_capacity(1024 + entries.len() * 160);
    out.push_str("<!doctype html>\n<html>\n<head>\n<meta charset=\"utf-8\">\n");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    let _ = writeln!(out, "<title>Index of {title}</title>");
    out.push_str(
        "<style>\
         body{font-family:system-ui,sans-serif;margin:2em}\
         table{border-collapse:collapse}\
         th,td{padding:.2em 1em .2em 0;text-align:left}\
         td.s{text-align:right;font-variant-numeric:tabular-nums}\
         </style>\n",
    );
    out.push_str("</head>\n<body>\n");
    let _ = writeln!(out, "<h1>Index of {title}</h1>");
    let _ = writeln!(
        out,
        "<table>\n<thead><tr><th><a href=\"{}\">Name</a></th><th><a href=\"{}\">Size</a></th>\
         <th><a href=\"{}\">Modified (UTC)</a></th></tr></thead>\n<tbody>",
        sort.link(SortKey::Name),
        sort.link(SortKey::Size),
        sort.link(SortKey::Modified)
    );
    if url_path != "/" {
        out.push_str("<tr><td><a href=\"../\">../</a></td><td class=\"s\">-</td><td></td></tr>\n");
    }
    for e in entries.iter() {
        if e.name.is_empty() || e.name == b"." || e.name == b".." {
            continue;
        }
        // A leading "./" keeps a name like "a:b" from reading as a scheme
        // (encode_path already escapes ':', this is belt and braces). A name
        // is one path component: a '/' in it (never from readdir) is encoded.
        let href = e
            .name
            .split(|&b| b == b'/')
            .map(encode_path)
            .collect::<Vec<_>>()
            .join("%2F");
        let text = escape_html(&String::from_utf8_lossy(&e.name));
        let (slash, size) = if e.is_dir {
            ("/", "-".to_owned())
        } else {
            ("", human_size(e.size))
        };
        let _ = writeln!(
            out,
            "<tr><td><a href=\"./{href}{slash}\">{text}{slash}</a></td>\
             <td class=\"s\">{size}</td><td>{}</td></tr>",
            format_mtime(e.mtime)
        );
    }
    out.push_str("</tbody>\n</table>\n</body>\n</html>\n");
    out
}

/// Escapes `& < > " '` for HTML text and attribute values.
fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Bytes below 1 KiB exactly (`512 B`), larger sizes with one decimal in
/// binary units (`1.5 KiB`, `20.0 MiB`).
fn human_size(n: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let n = u128::from(n);
    let mut unit = 0;
    let mut div: u128 = 1024;
    // Move up while the rounded value would reach 1024 of this unit.
    while unit + 1 < UNITS.len() && (n * 10 + div / 2) / div >= 10 * 1024 {
        unit += 1;
        div *= 1024;
    }
    let tenths = (n * 10 + div / 2) / div;
    format!("{}.{} {}", tenths / 10, tenths % 10, UNITS[unit])
}

/// `YYYY-MM-DD HH:MM` in UTC.
fn format_mtime(secs: u64) -> String {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &[u8], size: u64) -> DirEntry {
        DirEntry {
            name: name.to_vec(),
            is_dir: false,
            size,
            mtime: 0,
        }
    }

    fn dir(name: &[u8]) -> DirEntry {
        DirEntry {
            name: name.to_vec(),
            is_dir: true,
            size: 4096,
            mtime: 0,
        }
    }

    #[test]
    fn page_skeleton_and_parent_link() {
        let page = render("/docs/", &mut [], Sort::default());
        assert!(page.starts_with("<!doctype html>\n"));
        assert!(page.contains("<meta charset=\"utf-8\">"));
        assert!(page.contains("<title>Index of /docs/</title>"));
        assert!(page.contains("<a href=\"../\">../</a>"));
        assert!(page.ends_with("</html>\n"));

        let root = render("/", &mut [], Sort::default());
        assert!(root.contains("<title>Index of /</title>"));
        assert!(!root.contains("href=\"../\""));
    }

    #[test]
    fn title_is_escaped() {
        let page = render("/<b>&\"'/", &mut [], Sort::default());
        assert!(page.contains("<title>Index of /&lt;b&gt;&amp;&quot;&#39;/</title>"));
        assert!(!page.contains("<b>"));
    }

    #[test]
    fn hostile_names_are_escaped() {
        let mut entries = vec![
            file(b"<script>alert(1)</script>.html", 1),
            file(b"a\"b&c'd.txt", 2),
            file(b"javascript:alert(1)", 3),
            file(b"\"><img src=x onerror=alert(1)>", 4),
        ];
        let page = render("/x/", &mut entries, Sort::default());
        assert!(!page.contains("<script>"), "{page}");
        assert!(!page.contains("<img"), "{page}");
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;.html</a>"));
        assert!(page.contains("href=\"./%3Cscript%3Ealert%281%29%3C%2Fscript%3E.html\""));
        assert!(page.contains(">a&quot;b&amp;c&#39;d.txt</a>"));
        assert!(page.contains("href=\"./a%22b%26c%27d.txt\""));
        assert!(page.contains("href=\"./javascript%3Aalert%281%29\""));
        assert!(page.contains("&quot;&gt;&lt;img src=x onerror=alert(1)&gt;</a>"));
    }

    #[test]
    fn non_utf8_names_link_by_their_bytes() {
        let mut entries = vec![file(b"caf\xe9.txt", 10), file("naïve.txt".as_bytes(), 1)];
        let page = render("/", &mut entries, Sort::default());
        assert!(page.contains("href=\"./caf%E9.txt\""));
        assert!(page.contains(">caf\u{fffd}.txt</a>"));
        assert!(page.contains("href=\"./na%C3%AFve.txt\""));
        assert!(page.contains(">naïve.txt</a>"));
    }

    #[test]
    fn sort_order_dirs_first_then_bytewise() {
        let mut entries = vec![
            file(b"b.txt", 1),
            dir(b"zeta"),
            file(b"B.txt", 1),
            dir(b"Alpha"),
            file(b"a.txt", 1),
            dir(b"alpha"),
        ];
        let page = render("/", &mut entries, Sort::default());
        let names: Vec<&[u8]> = entries.iter().map(|e| e.name.as_slice()).collect();
        assert_eq!(
            names,
            [
                &b"Alpha"[..],
                b"alpha",
                b"zeta",
                b"B.txt",
                b"a.txt",
                b"b.txt"
            ]
        );
        let pos = |s: &str| page.find(s).unwrap_or(usize::MAX);
        assert!(pos(">Alpha/</a>") < pos(">alpha/</a>"));
        assert!(pos(">alpha/</a>") < pos(">zeta/</a>"));
        assert!(pos(">zeta/</a>") < pos(">B.txt</a>"));
        assert!(pos(">B.txt</a>") < pos(">a.txt</a>"));
        assert!(pos(">a.txt</a>") < pos(">b.txt</a>"));
        assert!(pos(">b.txt</a>") < usize::MAX);
    }

    #[test]
    fn directories_get_trailing_slash_and_no_size() {
        let mut entries = vec![dir(b"sub dir"), file(b"f", 1536)];
        let page = render("/", &mut entries, Sort::default());
        assert!(page.contains(
            "<a href=\"./sub%20dir/\">sub dir/</a></td><td class=\"s\">-</td><td>1970-01-01 00:00</td>"
        ));
        assert!(page.contains("<a href=\"./f\">f</a></td><td class=\"s\">1.5 KiB</td>"));
    }

    #[test]
    fn dot_entries_are_skipped() {
        let mut entries = vec![dir(b"."), dir(b".."), file(b"", 0), file(b"x", 0)];
        let page = render("/d/", &mut entries, Sort::default());
        // Three sort headings, the parent link and x.
        assert_eq!(page.matches("<a ").count(), 5, "{page}");
    }

    #[test]
    fn sizes() {
        assert_eq!(human_size(0), "0 B");
        assert_eq!(human_size(1023), "1023 B");
        assert_eq!(human_size(1024), "1.0 KiB");
        assert_eq!(human_size(1536), "1.5 KiB");
        assert_eq!(human_size(10 * 1024 * 1024), "10.0 MiB");
        assert_eq!(human_size(1024 * 1024 - 1), "1.0 MiB");
        assert_eq!(human_size(3 * 1024 * 1024 * 1024), "3.0 GiB");
        assert_eq!(human_size(u64::MAX), "16.0 EiB");
    }

    #[test]
    fn mtimes() {
        assert_eq!(format_mtime(0), "1970-01-01 00:00");
        assert_eq!(format_mtime(951_782_400), "2000-02-29 00:00");
        assert_eq!(format_mtime(1_709_164_799), "2024-02-28 23:59");
        assert_eq!(format_mtime(1_709_208_000), "2024-02-29 12:00");
        assert_eq!(format_mtime(1_735_689_599), "2024-12-31 23:59");
        assert_eq!(format_mtime(4_102_444_800), "2100-01-01 00:00");
        assert_eq!(format_mtime(253_402_300_799), "9999-12-31 23:59");
        // Absurd values do not panic.
        let _ = format_mtime(u64::MAX);
    }

    #[test]
    fn civil_dates_match_a_day_by_day_walk() {
        let mut date = (1970u64, 1u64, 1u64);
        for days in 0..200_000u64 {
            assert_eq!(civil_from_days(days), date, "day {days}");
            let (y, m, d) = date;
            let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
            let len = match m {
                2 if leap => 29,
                2 => 28,
                4 | 6 | 9 | 11 => 30,
                _ => 31,
            };
            date = if d < len {
                (y, m, d + 1)
            } else if m < 12 {
                (y, m + 1, 1)
            } else {
                (y + 1, 1, 1)
            };
        }
    }

    #[test]
    fn sorts_by_the_queried_column_directories_first_and_links_toggle_the_order() {
        let mut entries = vec![
            DirEntry {
                name: b"b".to_vec(),
                is_dir: false,
                size: 10,
                mtime: 300,
            },
            DirEntry {
                name: b"a".to_vec(),
                is_dir: false,
                size: 30,
                mtime: 100,
            },
            DirEntry {
                name: b"z".to_vec(),
                is_dir: true,
                size: 0,
                mtime: 0,
            },
            DirEntry {
                name: b"c".to_vec(),
                is_dir: false,
                size: 20,
                mtime: 200,
            },
        ];
        let order = |page: &str| -> Vec<char> {
            ["./a\"", "./b\"", "./c\"", "./z/\""]
                .iter()
                .map(|n| (page.find(n).unwrap(), n.chars().nth(2).unwrap()))
                .collect::<std::collections::BTreeMap<_, _>>()
                .into_values()
                .collect()
        };
        let by =
            |q: &[u8], entries: &mut Vec<DirEntry>| render("/", entries, Sort::from_query(Some(q)));
        assert_eq!(order(&by(b"", &mut entries)), ['z', 'a', 'b', 'c']);
        assert_eq!(order(&by(b"C=S;O=A", &mut entries)), ['z', 'b', 'c', 'a']);
        assert_eq!(order(&by(b"C=S&O=D", &mut entries)), ['z', 'a', 'c', 'b']);
        assert_eq!(order(&by(b"C=M;O=D", &mut entries)), ['z', 'b', 'c', 'a']);
        assert_eq!(order(&by(b"C=X;junk", &mut entries)), ['z', 'a', 'b', 'c']);
        // Sorted ascending by size: the Size heading offers descending, the others ascending.
        let page = by(b"C=S;O=A", &mut entries);
        assert!(page.contains("<a href=\"?C=S;O=D\">Size</a>"), "{page}");
        assert!(page.contains("<a href=\"?C=N;O=A\">Name</a>"), "{page}");
        assert!(
            page.contains("<a href=\"?C=M;O=A\">Modified (UTC)</a>"),
            "{page}"
        );
    }
}

//! Charts as inline SVG, written by the lab: axes with units, ticks (linear or log), a
//! legend, lines, markers, error bars, bands, and the papers' numbers as hollow markers
//! labelled "paper, other hardware: compare shape". Our own small writer rather than a
//! plotting crate: the report must render with no external asset and no font files, and
//! plotters' text layout needs a font backend (font-kit and fontconfig) for its labels; what
//! the report needs here is a few hundred lines of SVG text, tested below.

use std::fmt::Write;

/// The label every paper reference carries.
pub const PAPER_LABEL: &str = "paper, other hardware: compare shape";

const PALETTE: [&str; 10] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
    "#7f7f7f", "#bcbd22",
];

#[derive(Clone, Debug, Default)]
pub struct Axis {
    pub label: String,
    pub unit: String,
    pub log: bool,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

impl Axis {
    pub fn new(label: &str, unit: &str) -> Axis {
        Axis {
            label: label.into(),
            unit: unit.into(),
            ..Axis::default()
        }
    }

    pub fn log(mut self) -> Axis {
        self.log = true;
        self
    }

    pub fn from_zero(mut self) -> Axis {
        self.min = Some(0.0);
        self
    }

    fn title(&self) -> String {
        if self.unit.is_empty() {
            self.label.clone()
        } else {
            format!("{} ({})", self.label, self.unit)
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Style {
    /// Line through the points, small filled markers.
    Line,
    /// Filled markers only.
    Markers,
    /// Dashed line (a model or a bound), no markers.
    Dashed,
    /// The paper's numbers: hollow markers, labelled as other hardware.
    Paper,
    /// A shaded band between each point's lo and hi (prediction bands).
    Band,
}

#[derive(Clone, Debug, Default)]
pub struct Pt {
    pub x: f64,
    pub y: f64,
    /// Error bar or band, when given.
    pub lo: Option<f64>,
    pub hi: Option<f64>,
}

impl Pt {
    pub fn new(x: f64, y: f64) -> Pt {
        Pt {
            x,
            y,
            ..Pt::default()
        }
    }

    pub fn range(x: f64, y: f64, lo: f64, hi: f64) -> Pt {
        Pt {
            x,
            y,
            lo: Some(lo),
            hi: Some(hi),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Series {
    pub name: String,
    pub points: Vec<Pt>,
    pub style: Style,
}

impl Series {
    pub fn new(name: impl Into<String>, style: Style, points: Vec<Pt>) -> Series {
        Series {
            name: name.into(),
            points,
            style,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Chart {
    /// Element id suffix (`chart-ID`), unique on its page.
    pub id: String,
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    pub series: Vec<Series>,
}

const W: f64 = 880.0;
const H: f64 = 380.0;
const LEFT: f64 = 72.0;
const RIGHT: f64 = 290.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 52.0;

/// Maps data values to one pixel axis (linear or log10).
#[derive(Clone, Copy, Debug)]
pub struct Scale {
    lo: f64,
    hi: f64,
    p0: f64,
    p1: f64,
    log: bool,
}

impl Scale {
    pub fn new(lo: f64, hi: f64, p0: f64, p1: f64, log: bool) -> Scale {
        let (lo, hi) = if log {
            (lo.log10(), hi.log10())
        } else {
            (lo, hi)
        };
        let hi = if hi > lo { hi } else { lo + 1.0 };
        Scale {
            lo,
            hi,
            p0,
            p1,
            log,
        }
    }

    pub fn map(&self, v: f64) -> f64 {
        let v = if self.log { v.log10() } else { v };
        self.p0 + (v - self.lo) / (self.hi - self.lo) * (self.p1 - self.p0)
    }
}

/// About `n` round linear ticks covering [lo, hi] (steps of 1, 2 or 5 x 10^k).
pub fn linear_ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if hi.is_nan() || lo.is_nan() || hi <= lo || !lo.is_finite() || !hi.is_finite() {
        return vec![lo];
    }
    let raw = (hi - lo) / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).floor() * step;
    let mut t = Vec::new();
    let mut v = first;
    while v <= hi + step * 1e-9 && t.len() < 50 {
        t.push(if v.abs() < step * 1e-9 { 0.0 } else { v });
        v += step;
    }
    if t.last().is_some_and(|&l| l < hi) {
        t.push(v);
    }
    t
}

/// Log ticks over [lo, hi]: each decade, plus 2 and 5 within it when few decades show.
pub fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let (a, b) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let mults: &[f64] = if b - a <= 3 { &[1.0, 2.0, 5.0] } else { &[1.0] };
    let mut t = Vec::new();
    for e in a..=b {
        for m in mults {
            let v = m * 10f64.powi(e);
            if v >= lo * 0.999 && v <= hi * 1.001 {
                t.push(v);
            }
        }
    }
    t
}

/// Compact tick text: 1200 -> "1.2k", 2e6 -> "2M", 0.005 -> "0.005".
pub fn fmt_tick(v: f64) -> String {
    let a = v.abs();
    let trim = |s: String| {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if a >= 1e6 {
        format!("{}M", trim(format!("{:.2}", v / 1e6)))
    } else if a >= 1e4 {
        format!("{}k", trim(format!("{:.1}", v / 1e3)))
    } else if a >= 1.0 || a == 0.0 {
        trim(format!("{v:.2}"))
    } else {
        trim(format!("{v:.4}"))
    }
}

/// Characters per legend line at its font size in the legend's width.
const LEGEND_CHARS: usize = 40;

/// Splits `s` at spaces into lines of at most `width` characters (a longer word stays whole).
pub fn wrap(s: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in s.split_whitespace() {
        match lines.last_mut() {
            Some(l) if l.chars().count() + 1 + word.chars().count() <= width => {
                l.push(' ');
                l.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    if lines.is_empty() {
        lines.push(String::new());
    }
    lines
}

pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

impl Chart {
    pub fn new(id: &str, title: &str, x: Axis, y: Axis) -> Chart {
        Chart {
            id: id.into(),
            title: title.into(),
            x,
            y,
            series: Vec::new(),
        }
    }

    pub fn with(mut self, s: Series) -> Chart {
        if !s.points.is_empty() {
            self.series.push(s);
        }
        self
    }

    fn usable(&self, v: f64, log: bool) -> bool {
        v.is_finite() && (!log || v > 0.0)
    }

    /// Data range of one axis over every series (error bars included on y).
    fn range(&self, ys: bool) -> Option<(f64, f64)> {
        let axis = if ys { &self.y } else { &self.x };
        let vals = self
            .series
            .iter()
            .flat_map(|s| s.points.iter())
            .flat_map(|p| {
                if ys {
                    vec![Some(p.y), p.lo, p.hi]
                } else {
                    vec![Some(p.x)]
                }
            });
        let v: Vec<f64> = vals
            .flatten()
            .filter(|v| self.usable(*v, axis.log))
            .collect();
        let mut lo = axis
            .min
            .unwrap_or_else(|| v.iter().copied().fold(f64::INFINITY, f64::min));
        let mut hi = axis
            .max
            .unwrap_or_else(|| v.iter().copied().fold(f64::NEG_INFINITY, f64::max));
        if !lo.is_finite() || !hi.is_finite() {
            return None;
        }
        if hi <= lo {
            if axis.log {
                (lo, hi) = (lo / 2.0, hi * 2.0);
            } else {
                (lo, hi) = (lo - 1.0, hi + 1.0);
            }
        } else if !axis.log && axis.min.is_none() && lo > 0.0 && lo < hi * 0.3 {
            lo = 0.0;
        }
        Some((lo, hi))
    }

    /// The figure: an inline SVG with a caption-free frame (captions are the page's).
    pub fn render(&self) -> String {
        let points: usize = self.series.iter().map(|s| s.points.len()).sum();
        let mut o = String::new();
        let _ = write!(
            o,
            r#"<figure class="chart" id="chart-{}" data-series="{}" data-points="{points}">"#,
            esc(&self.id),
            self.series.len()
        );
        let _ = write!(
            o,
            r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" aria-label="{}">"#,
            esc(&self.title)
        );
        let _ = write!(
            o,
            r#"<text x="{}" y="18" class="ct">{}</text>"#,
            LEFT,
            esc(&self.title)
        );
        let (Some((x0, x1)), Some((y0, y1))) = (self.range(false), self.range(true)) else {
            let _ = write!(
                o,
                r#"<text x="{}" y="{}" class="empty">no data</text></svg></figure>"#,
                W / 2.0 - 30.0,
                H / 2.0
            );
            return o;
        };
        let (px0, px1, py0, py1) = (LEFT, W - RIGHT, H - BOTTOM, TOP);
        let sx = Scale::new(x0, x1, px0, px1, self.x.log);
        let sy = Scale::new(y0, y1, py0, py1, self.y.log);
        self.axes(&mut o, &sx, &sy, (x0, x1), (y0, y1));
        let mut ly = TOP + 8.0;
        for (i, s) in self.series.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            self.draw(&mut o, s, color, &sx, &sy);
            ly += self.legend_entry(&mut o, ly, s, color);
        }
        o.push_str("</svg></figure>");
        o
    }

    fn axes(&self, o: &mut String, sx: &Scale, sy: &Scale, xr: (f64, f64), yr: (f64, f64)) {
        let (px0, px1, py0, py1) = (LEFT, W - RIGHT, H - BOTTOM, TOP);
        let _ = write!(
            o,
            r#"<rect x="{px0}" y="{py1}" width="{}" height="{}" class="frame"/>"#,
            px1 - px0,
            py0 - py1
        );
        let xt = if self.x.log {
            log_ticks(xr.0, xr.1)
        } else {
            linear_ticks(xr.0, xr.1, 6)
        };
        for t in xt
            .iter()
            .filter(|t| **t >= xr.0 - 1e-9 && **t <= xr.1 * (1.0 + 1e-9) + 1e-9)
        {
            let x = sx.map(*t);
            let _ = write!(
                o,
                r#"<line x1="{x:.1}" y1="{py0}" x2="{x:.1}" y2="{py1}" class="grid"/>"#
            );
            let _ = write!(
                o,
                r#"<text x="{x:.1}" y="{}" class="tx">{}</text>"#,
                py0 + 16.0,
                fmt_tick(*t)
            );
        }
        let yt = if self.y.log {
            log_ticks(yr.0, yr.1)
        } else {
            linear_ticks(yr.0, yr.1, 5)
        };
        for t in yt
            .iter()
            .filter(|t| **t >= yr.0 - 1e-9 && **t <= yr.1 * (1.0 + 1e-9) + 1e-9)
        {
            let y = sy.map(*t);
            let _ = write!(
                o,
                r#"<line x1="{px0}" y1="{y:.1}" x2="{px1}" y2="{y:.1}" class="grid"/>"#
            );
            let _ = write!(
                o,
                r#"<text x="{}" y="{:.1}" class="ty">{}</text>"#,
                px0 - 6.0,
                y + 4.0,
                fmt_tick(*t)
            );
        }
        let log = |a: &Axis| if a.log { ", log scale" } else { "" };
        let _ = write!(
            o,
            r#"<text x="{:.1}" y="{}" class="xl">{}{}</text>"#,
            (px0 + px1) / 2.0,
            H - 10.0,
            esc(&self.x.title()),
            log(&self.x)
        );
        let _ = write!(
            o,
            r#"<text x="16" y="{:.1}" class="yl" transform="rotate(-90 16 {:.1})">{}{}</text>"#,
            (py0 + py1) / 2.0,
            (py0 + py1) / 2.0,
            esc(&self.y.title()),
            log(&self.y)
        );
    }

    fn draw(&self, o: &mut String, s: &Series, color: &str, sx: &Scale, sy: &Scale) {
        let pts: Vec<&Pt> = s
            .points
            .iter()
            .filter(|p| self.usable(p.x, self.x.log) && self.usable(p.y, self.y.log))
            .collect();
        let path = |ys: &dyn Fn(&Pt) -> Option<f64>| -> Vec<String> {
            pts.iter()
                .filter_map(|p| Some(format!("{:.1},{:.1}", sx.map(p.x), sy.map(ys(p)?))))
                .collect()
        };
        match s.style {
            Style::Band => {
                let mut up = path(&|p: &Pt| p.hi.filter(|v| self.usable(*v, self.y.log)));
                let mut down = path(&|p: &Pt| p.lo.filter(|v| self.usable(*v, self.y.log)));
                down.reverse();
                up.extend(down);
                let _ = write!(
                    o,
                    r#"<polygon points="{}" fill="{color}" fill-opacity="0.15" stroke="none"/>"#,
                    up.join(" ")
                );
                return;
            }
            Style::Line | Style::Dashed if pts.len() > 1 => {
                let dash = if s.style == Style::Dashed {
                    r#" stroke-dasharray="6 4""#
                } else {
                    ""
                };
                let _ = write!(
                    o,
                    r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="1.8"{dash}/>"#,
                    path(&|p: &Pt| Some(p.y)).join(" ")
                );
            }
            _ => {}
        }
        for p in &pts {
            let (x, y) = (sx.map(p.x), sy.map(p.y));
            if let (Some(lo), Some(hi)) = (p.lo, p.hi) {
                if self.usable(lo, self.y.log) && self.usable(hi, self.y.log) {
                    let _ = write!(
                        o,
                        r#"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="{color}" stroke-width="1"/>"#,
                        sy.map(lo),
                        sy.map(hi)
                    );
                }
            }
            let tip = format!("{}: x={}, y={}", s.name, fmt_tick(p.x), fmt_tick(p.y));
            match s.style {
                Style::Paper => {
                    let _ = write!(
                        o,
                        r#"<circle cx="{x:.1}" cy="{y:.1}" r="5.5" fill="none" stroke="{color}" stroke-width="2" class="paper"><title>{}</title></circle>"#,
                        esc(&tip)
                    );
                }
                Style::Line | Style::Markers => {
                    let _ = write!(
                        o,
                        r#"<circle cx="{x:.1}" cy="{y:.1}" r="3" fill="{color}"><title>{}</title></circle>"#,
                        esc(&tip)
                    );
                }
                Style::Dashed | Style::Band => {}
            }
        }
    }

    /// One legend entry at height `y`; returns the height it took (names wrap).
    fn legend_entry(&self, o: &mut String, y: f64, s: &Series, color: &str) -> f64 {
        let x = W - RIGHT + 14.0;
        match s.style {
            Style::Paper => {
                let _ = write!(
                    o,
                    r#"<circle cx="{:.1}" cy="{y:.1}" r="5" fill="none" stroke="{color}" stroke-width="2"/>"#,
                    x + 9.0
                );
            }
            Style::Band => {
                let _ = write!(
                    o,
                    r#"<rect x="{x:.1}" y="{:.1}" width="18" height="10" fill="{color}" fill-opacity="0.25"/>"#,
                    y - 5.0
                );
            }
            Style::Dashed => {
                let _ = write!(
                    o,
                    r#"<line x1="{x:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{color}" stroke-width="2" stroke-dasharray="6 4"/>"#,
                    x + 18.0
                );
            }
            _ => {
                let _ = write!(
                    o,
                    r#"<line x1="{x:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{color}" stroke-width="2"/><circle cx="{:.1}" cy="{y:.1}" r="3" fill="{color}"/>"#,
                    x + 18.0,
                    x + 9.0
                );
            }
        }
        let lines = wrap(&s.name, LEGEND_CHARS);
        for (k, line) in lines.iter().enumerate() {
            let _ = write!(
                o,
                r#"<text x="{:.1}" y="{:.1}" class="lg">{}</text>"#,
                x + 24.0,
                y + 4.0 + 13.0 * k as f64,
                esc(line)
            );
        }
        let mut h = 13.0 * lines.len() as f64 + 8.0;
        if s.style == Style::Paper {
            let _ = write!(
                o,
                r#"<text x="{:.1}" y="{:.1}" class="lg2">{PAPER_LABEL}</text>"#,
                x + 24.0,
                y + 2.0 + h
            );
            h += 12.0;
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_linear_ticks() {
        assert_eq!(
            linear_ticks(0.0, 10.0, 5),
            vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
        );
        assert_eq!(
            linear_ticks(0.0, 9.0, 5),
            vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
        );
        let t = linear_ticks(250.0, 19000.0, 6);
        assert_eq!(t.first(), Some(&0.0));
        assert!(
            t.windows(2).all(|w| (w[1] - w[0] - 5000.0).abs() < 1e-6),
            "{t:?}"
        );
        assert!(*t.last().unwrap() >= 19000.0);
        assert_eq!(linear_ticks(3.0, 3.0, 5), vec![3.0]);
    }

    #[test]
    fn log_ticks_by_decade() {
        assert_eq!(
            log_ticks(1.0, 1000.0),
            vec![1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0]
        );
        assert_eq!(
            log_ticks(0.1, 1e5),
            vec![0.1, 1.0, 10.0, 100.0, 1000.0, 10000.0, 100000.0]
        );
        assert_eq!(log_ticks(3.0, 40.0), vec![5.0, 10.0, 20.0]);
    }

    #[test]
    fn legend_names_wrap() {
        assert_eq!(
            wrap("gs-prefork RT = AQT + BL x ST (Eq. 1, server)", 20),
            vec!["gs-prefork RT = AQT", "+ BL x ST (Eq. 1,", "server)"]
        );
        assert_eq!(wrap("short", 20), vec!["short"]);
        assert_eq!(wrap("", 20), vec![""]);
        assert_eq!(
            wrap("averyveryverylongword x", 5),
            vec!["averyveryverylongword", "x"]
        );
    }

    #[test]
    fn tick_text() {
        assert_eq!(fmt_tick(0.0), "0");
        assert_eq!(fmt_tick(250.0), "250");
        assert_eq!(fmt_tick(2.5), "2.5");
        assert_eq!(fmt_tick(12000.0), "12k");
        assert_eq!(fmt_tick(2_000_000.0), "2M");
        assert_eq!(fmt_tick(0.005), "0.005");
    }

    #[test]
    fn scales_map_ends() {
        let s = Scale::new(0.0, 10.0, 100.0, 200.0, false);
        assert_eq!(s.map(0.0), 100.0);
        assert_eq!(s.map(5.0), 150.0);
        let l = Scale::new(1.0, 100.0, 0.0, 200.0, true);
        assert!((l.map(10.0) - 100.0).abs() < 1e-9);
        // y axes run upwards: a larger value maps to a smaller pixel.
        let y = Scale::new(0.0, 1.0, 300.0, 30.0, false);
        assert!(y.map(1.0) < y.map(0.0));
    }

    #[test]
    fn renders_series_legend_and_paper_markers() {
        let c = Chart::new(
            "t1",
            "RPS <vs> c",
            Axis::new("concurrency", "clients"),
            Axis::new("throughput", "req/s").log(),
        )
        .with(Series::new(
            "gs-fork",
            Style::Line,
            vec![Pt::new(1.0, 100.0), Pt::range(2.0, 200.0, 150.0, 250.0)],
        ))
        .with(Series::new(
            "forked",
            Style::Paper,
            vec![Pt::new(20.0, 2030.59)],
        ))
        .with(Series::new("empty", Style::Line, vec![]));
        let svg = c.render();
        assert!(svg.starts_with(
            r#"<figure class="chart" id="chart-t1" data-series="2" data-points="3">"#
        ));
        assert!(svg.contains("RPS &lt;vs&gt; c"));
        assert!(svg.contains("throughput (req/s), log scale"));
        assert!(svg.contains("concurrency (clients)"));
        assert_eq!(svg.matches("<polyline").count(), 1);
        assert!(svg.contains(r##"fill="none" stroke="#d62728" stroke-width="2" class="paper""##));
        assert!(svg.contains(PAPER_LABEL));
        // One error bar (the ranged point).
        assert_eq!(svg.matches(r#"stroke-width="1"/>"#).count(), 1);
        assert!(svg.ends_with("</svg></figure>"));
    }

    #[test]
    fn empty_and_log_safe() {
        let c = Chart::new("e", "nothing", Axis::new("x", ""), Axis::new("y", ""));
        assert!(c.render().contains("no data"));
        // Non-positive values are left out of a log axis instead of breaking it.
        let c =
            Chart::new("l", "log", Axis::new("x", ""), Axis::new("y", "").log()).with(Series::new(
                "s",
                Style::Markers,
                vec![Pt::new(1.0, 0.0), Pt::new(2.0, 10.0)],
            ));
        let svg = c.render();
        assert_eq!(
            svg.matches("<circle").count(),
            2,
            "one point and its legend marker"
        );
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }

    #[test]
    fn bands_are_polygons() {
        let c = Chart::new("b", "band", Axis::new("x", ""), Axis::new("y", "")).with(Series::new(
            "95% band",
            Style::Band,
            vec![Pt::range(1.0, 5.0, 4.0, 6.0), Pt::range(2.0, 6.0, 5.0, 7.0)],
        ));
        let svg = c.render();
        assert!(svg.contains("<polygon points=\""));
    }
}

//! Charts as inline SVG, written by the lab: axes with units, ticks (linear or log), a
//! legend, lines, markers, error bars, bands, and the papers' numbers as hollow markers
//! labelled "paper, other hardware: compare shape". Our own small writer rather than a
//! plotting crate: the report must render with no external asset and no font files, and
//! plotters' text layout needs a font backend (font-kit and fontconfig) for its labels; what
//! the report needs here is a few hundred lines of SVG text, tested in `svg_tests.rs`.

pub use super::scale::{esc, fmt_tick, linear_ticks, log_ticks, wrap, Scale};
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

/// Characters per legend line at its font size in the legend's width.
const LEGEND_CHARS: usize = 40;

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
#[path = "svg_tests.rs"]
mod tests;

//! Tests of the lab's SVG writer (`svg.rs`): ticks, scales, wrapping, escaping and the
//! charts it draws.

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
    assert!(
        svg.starts_with(r#"<figure class="chart" id="chart-t1" data-series="2" data-points="3">"#)
    );
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
    let c = Chart::new("l", "log", Axis::new("x", ""), Axis::new("y", "").log()).with(Series::new(
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

//! `--hdr-out FILE`: the run's latency histograms in HdrHistogram's interval log format (the
//! hdrhistogram crate's V2 + deflate encoding, as HdrHistogram's Java and C libraries write
//! it), so that HdrHistogram's own tools (HistogramLogAnalyzer, hdr-plot, the log
//! processor) plot percentiles over time. One untagged interval per second of the run (its
//! per-second histogram, 2 significant digits), then the whole run's histogram (3 digits)
//! tagged `all`. Values are microseconds; the max column is in milliseconds.

use crate::run::Report;
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;
use std::path::Path;
use std::time::Duration;

/// The tag of the whole-run histogram.
pub const TAG_ALL: &str = "all";

/// The interval log of `report`.
pub fn render(report: &Report) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let mut serializer = V2DeflateSerializer::new();
    let mut log = IntervalLogWriterBuilder::new()
        .add_comment(&format!(
            "gearshift load {}: latency in microseconds (max column in milliseconds)",
            report.config.target.url()
        ))
        .with_start_time(report.started)
        .with_base_time(report.started)
        .with_max_value_divisor(1000.0)
        .begin_log_with(&mut out, &mut serializer)
        .map_err(|e| e.to_string())?;
    let err = |e| format!("{e:?}");
    for (i, sec) in report.stats.series.iter().enumerate() {
        let start = Duration::from_secs(i as u64);
        // The last second may be partial.
        let len = report
            .elapsed
            .saturating_sub(start)
            .min(Duration::from_secs(1));
        log.write_histogram(&sec.latency, start, len, None)
            .map_err(err)?;
    }
    let tag = Tag::new(TAG_ALL).expect("a valid tag");
    log.write_histogram(
        &report.stats.latency,
        Duration::ZERO,
        report.elapsed,
        Some(tag),
    )
    .map_err(err)?;
    drop(log);
    Ok(out)
}

/// Writes the interval log of `report` to `path`.
pub fn write(path: &Path, report: &Report) -> Result<(), String> {
    let bytes = render(report)?;
    std::fs::write(path, bytes).map_err(|e| format!("--hdr-out {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::{engine::general_purpose::STANDARD, Engine as _};
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    use hdrhistogram::serialization::Deserializer;
    use hdrhistogram::Histogram;

    #[test]
    fn round_trips_through_the_log_reader() {
        let cfg = crate::Config::new("http://127.0.0.1:1/").unwrap();
        let mut stats = crate::stats::Stats::new();
        stats.response(100_000_000, 2_000_000, 200, 10);
        stats.response(1_200_000_000, 5_000_000, 200, 10);
        stats.response(1_300_000_000, 7_000_000, 404, 10);
        let report = Report {
            config: cfg,
            stats,
            workers: 1,
            elapsed: Duration::from_millis(1500),
            started: std::time::SystemTime::now(),
        };
        let bytes = render(&report).unwrap();
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(
            text.starts_with("#gearshift load http://127.0.0.1:1/"),
            "{text}"
        );
        let mut de = Deserializer::new();
        let mut untagged = Vec::new();
        let mut all = None;
        for entry in IntervalLogIterator::new(&bytes) {
            let LogEntry::Interval(i) = entry.unwrap() else {
                continue;
            };
            let raw = STANDARD.decode(i.encoded_histogram()).unwrap();
            let h: Histogram<u64> = de.deserialize(&mut &raw[..]).unwrap();
            match i.tag() {
                None => untagged.push((i.start_timestamp(), i.duration(), h.len())),
                Some(t) => {
                    assert_eq!(t.as_str(), TAG_ALL);
                    assert_eq!(h.value_at_quantile(1.0), h.highest_equivalent(7000));
                    all = Some(h.len());
                }
            }
        }
        assert_eq!(
            untagged,
            [
                (Duration::ZERO, Duration::from_secs(1), 1),
                (Duration::from_secs(1), Duration::from_millis(500), 2)
            ]
        );
        assert_eq!(all, Some(3));
    }
}

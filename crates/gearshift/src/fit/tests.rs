//! Unit tests of `ctl fit`: c1, c2 recovered from trajectory lines and `/history` answers.

use super::*;
use serde_json::json;

/// A trajectory line as the sampler writes it, U = 2e-8 W + 1e-3 R exactly on `process`.
fn line(bytes: u64, completions: u64, interval_s: f64) -> Value {
    let (w, r) = (bytes as f64 / interval_s, completions as f64 / interval_s);
    json!({
        "t_s": 1.0, "interval_s": interval_s, "completions": completions,
        "bytes_sent": bytes, "cpu": 0.5 * (2e-8 * w + 1e-3 * r),
        "stages": [
            {"name": "process", "threads": 4, "queue_len": 0.0, "wait_s": 0.0,
             "utilisation": 2e-8 * w + 1e-3 * r},
            {"name": "send", "threads": 4, "queue_len": 0.0, "wait_s": 0.0, "utilisation": 0.0},
        ],
    })
}

fn varied() -> Vec<Value> {
    (1..=8)
        .map(|i| line(i * i * 20_000, 40 + 10 * i, 0.5))
        .chain([line(0, 0, 0.5)])
        .collect()
}

#[test]
fn recovers_the_constants_from_trajectory_lines() {
    let (s, idle, label) = samples(&varied(), &Utilisation::Stage("process".into())).unwrap();
    assert_eq!((s.len(), idle), (8, 1));
    assert!(label.starts_with("stage process"));
    let f = fit(&s, idle, label).unwrap();
    assert!((f.c1 / 2e-8 - 1.0).abs() < 1e-6, "{f:?}");
    assert!((f.c2 / 1e-3 - 1.0).abs() < 1e-6, "{f:?}");
    assert!((f.r2.unwrap() - 1.0).abs() < 1e-9);
    // Pipeline: process carries half the threads, so half of its utilisation.
    let (s, _, label) = samples(&varied(), &Utilisation::Auto).unwrap();
    assert!(label.starts_with("pipeline"), "{label}");
    let f = fit(&s, 1, label).unwrap();
    assert!((f.c1 / 1e-8 - 1.0).abs() < 1e-6, "{f:?}");
    let (s, _, _) = samples(&varied(), &Utilisation::Cpu).unwrap();
    assert!((s[0].u - 0.5 * (2e-8 * 40_000.0 + 1e-3 * 100.0)).abs() < 1e-12);
}

#[test]
fn history_samples_nest_the_measurement() {
    let h = json!({"next": 2, "samples": [
        {"seq": 0, "t_s": 1.0, "knobs": {}, "frozen": false, "sensors": {
            "interval_s": 1.0, "completions": 10, "bytes_sent": 1000, "cpu_util": 0.2, "stages": []}},
        {"seq": 1, "t_s": 2.0, "knobs": {}, "frozen": false, "sensors": {
            "interval_s": 1.0, "completions": 20, "bytes_sent": 5000, "cpu_util": 0.4, "stages": []}},
    ]});
    let recs = history_samples(&h).unwrap();
    let (s, idle, label) = samples(&recs, &Utilisation::Auto).unwrap();
    assert!(label.starts_with("cpu"));
    assert_eq!(idle, 0);
    assert_eq!(
        s[1],
        FitSample {
            w: 5000.0,
            r: 20.0,
            u: 0.4
        }
    );
    assert!(history_samples(&json!({"error": "x"})).is_err());
}

#[test]
fn too_few_degenerate_and_incomplete_samples_are_one_line_errors() {
    let recs = varied();
    let (s, _, l) = samples(&recs, &Utilisation::Auto).unwrap();
    let e = fit(&s[..3], 0, l.clone()).unwrap_err();
    assert!(e.starts_with("fit: 3 loaded intervals"), "{e}");
    // One object size: W = size x R in every interval, W and R cannot be told apart.
    let same: Vec<Value> = (1..=6).map(|i| line(i * 1000, i, 1.0)).collect();
    let (s, _, l) = samples(&same, &Utilisation::Auto).unwrap();
    let e = fit(&s, 0, l.clone()).unwrap_err();
    assert!(e.contains("collinear"), "{e}");
    let zero: Vec<FitSample> = (1..=5)
        .map(|i| FitSample {
            w: i as f64,
            r: (i * i) as f64,
            u: 0.0,
        })
        .collect();
    assert!(fit(&zero, 0, l.clone()).unwrap_err().contains("zero"));
    let e = samples(&[json!({"t_s": 1.0, "rt_s": 0.1})], &Utilisation::Auto).unwrap_err();
    assert!(e.contains("no interval_s"), "{e}");
    let no_stages = [json!({"interval_s": 1.0, "completions": 1, "bytes_sent": 1, "cpu": 0.1})];
    let e = samples(&no_stages, &Utilisation::Pipeline).unwrap_err();
    assert!(e.contains("--utilisation cpu"), "{e}");
    let e = samples(&recs, &Utilisation::Stage("nope".into())).unwrap_err();
    assert!(e.contains("no stage 'nope'"), "{e}");
    assert!("".parse::<Utilisation>().is_err());
    for e in [&e, &l] {
        assert!(!e.contains('\n'));
    }
}

#[test]
fn report_has_a_snippet_the_server_accepts() {
    let (s, idle, l) = samples(&varied(), &Utilisation::Stage("process".into())).unwrap();
    let f = fit(&s, idle, l).unwrap();
    let text = report(&f);
    assert!(text.contains("samples = 8"), "{text}");
    assert!(text.contains("r2 = 1.0000"), "{text}");
    let toml_part = &text[text.find("[control]").unwrap()..];
    let table: toml::Table = toml::from_str(toml_part).unwrap();
    let cfg: gearshift_runtime::live::LiveConfig = table["control"].clone().try_into().unwrap();
    cfg.validate().unwrap();
    assert_eq!(cfg.controller, "keta");
    let c1 = cfg.params.as_ref().unwrap()["c1"].as_float().unwrap();
    assert_eq!(c1, f.c1, "printed with full precision");
}

#[test]
fn r_squared_about_the_mean() {
    let s = [(1.0, 1.0), (2.0, 1.0), (3.0, 2.0)].map(|(w, u)| FitSample { w, r: 1.0, u });
    // Model u = 0 w + 4/3 r (the mean): R² = 0.
    assert!(r_squared(&s, 0.0, 4.0 / 3.0).unwrap().abs() < 1e-12);
    let flat = [1.0, 2.0].map(|w| FitSample { w, r: 1.0, u: 1.0 });
    assert_eq!(r_squared(&flat, 0.0, 1.0), None);
}

//! `gearshift load fileset DIR`: SPECweb99's four size classes, nine files per class per
//! directory, and a mix whose requests go 35/50/14/1 % to the classes.

use gearshift_load::fileset::{self, CLASS_FREQ};
use gearshift_load::mix::{parse_mix, Requests};
use gearshift_load::rng::seeded;
use gearshift_load::{Config, Target};

#[test]
fn writes_the_file_set_and_its_mix() {
    let dir = std::env::temp_dir().join(format!("gs-load-fileset-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let w = fileset::write(&dir, 2).unwrap();
    assert_eq!(w.files, 72);
    for d in 0..2 {
        let sub = dir.join(format!("file_set/dir{d:05}"));
        let mut names: Vec<String> = std::fs::read_dir(&sub)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names.len(), 36);
        for class in 0..4 {
            let in_class: Vec<_> = names
                .iter()
                .filter(|n| n.starts_with(&format!("class{class}_")))
                .collect();
            assert_eq!(in_class.len(), 9, "nine files in class {class}");
            for f in 0..9 {
                let len = std::fs::metadata(sub.join(format!("class{class}_{f}")))
                    .unwrap()
                    .len();
                assert_eq!(len, fileset::file_size(class, f));
                // 0.1-0.9 KB, 1-9 KB, 10-90 KB, 100-900 KB (KB = 1024 bytes).
                let kb = len as f64 / 1024.0;
                let unit = [0.1, 1.0, 10.0, 100.0][class];
                assert!(
                    (kb / unit - (f + 1) as f64).abs() < 0.01,
                    "class {class} file {f}: {kb} KB"
                );
            }
        }
    }
    let total: u64 = (0..4)
        .flat_map(|c| (0..9).map(move |f| fileset::file_size(c, f)))
        .sum();
    assert_eq!(w.bytes, 2 * total);

    // The mix file parses, and sampling it hits the classes 35/50/14/1 %.
    let target = Target::parse("http://127.0.0.1:8080/").unwrap();
    let mix = parse_mix(
        &std::fs::read_to_string(&w.mix_file).unwrap(),
        Some(&target),
    )
    .unwrap();
    assert_eq!(mix.len(), 72);
    let mut cfg = Config::new("http://127.0.0.1:8080/").unwrap();
    cfg.urls = mix.clone();
    let reqs = Requests::build(&cfg).unwrap();
    let mut rng = seeded(99);
    let mut per_class = [0u64; 4];
    let n = 400_000;
    for _ in 0..n {
        let path = &mix[reqs.pick(&mut rng) as usize].0.path;
        let class = path.split("/class").nth(1).unwrap().as_bytes()[0] - b'0';
        per_class[class as usize] += 1;
    }
    for (c, want) in CLASS_FREQ.iter().enumerate() {
        let got = per_class[c] as f64 / n as f64;
        assert!(
            (got - want).abs() < 0.004 + want * 0.05,
            "class {c}: {got} vs {want}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

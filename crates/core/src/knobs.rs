//! The live knobs of a running engine: names, bounds and current values, changed as a whole
//! (all-or-nothing) by the admin interface (and later by controllers) and read by the
//! engine's master, which reconciles its workers towards them. A generation counter lets
//! the master notice a change without comparing values.

use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// One knob's definition.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Spec {
    pub name: &'static str,
    pub min: u64,
    pub max: u64,
    pub help: &'static str,
}

/// A rule across knobs (say, stage threads summing to at most a budget), checked by `set`
/// on the values a change would leave; an `Err` refuses the whole change.
pub type CheckFn = Box<dyn Fn(&BTreeMap<&str, u64>) -> Result<(), String> + Send>;

#[derive(Default)]
pub struct KnobTable {
    inner: Mutex<BTreeMap<&'static str, (Spec, u64)>>,
    generation: AtomicU64,
    check: Mutex<Option<CheckFn>>,
}

impl KnobTable {
    /// Declare a knob with its starting value (clamped to its bounds).
    pub fn define(&self, spec: Spec, value: u64) {
        let v = value.clamp(spec.min, spec.max);
        self.lock().insert(spec.name, (spec, v));
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// Install the engine's cross-knob rule (replacing any earlier one).
    pub fn set_check(&self, check: CheckFn) {
        *self.check.lock().unwrap_or_else(|p| p.into_inner()) = Some(check);
    }

    pub fn get(&self, name: &str) -> Option<u64> {
        self.lock().get(name).map(|(_, v)| *v)
    }

    /// Apply every change or none: unknown names and out-of-range values are refused with
    /// one line naming the knob.
    pub fn set(&self, changes: &[(String, u64)]) -> Result<(), String> {
        let mut map = self.lock();
        for (name, v) in changes {
            match map.get(name.as_str()) {
                None => {
                    let known: Vec<&str> = map.keys().copied().collect();
                    return Err(format!(
                        "unknown knob '{name}' (known: {})",
                        known.join(", ")
                    ));
                }
                Some((s, _)) if *v < s.min || *v > s.max => {
                    return Err(format!("{name}: {v} is outside {}..={}", s.min, s.max));
                }
                Some(_) => {}
            }
        }
        if let Some(check) = &*self.check.lock().unwrap_or_else(|p| p.into_inner()) {
            let mut after: BTreeMap<&str, u64> = map.iter().map(|(k, (_, v))| (*k, *v)).collect();
            for (name, v) in changes {
                after.insert(name.as_str(), *v);
            }
            check(&after)?;
        }
        for (name, v) in changes {
            if let Some(entry) = map.get_mut(name.as_str()) {
                entry.1 = *v;
            }
        }
        drop(map);
        self.generation.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// Current values by name.
    pub fn values(&self) -> BTreeMap<String, u64> {
        self.lock()
            .iter()
            .map(|(k, (_, v))| (k.to_string(), *v))
            .collect()
    }

    pub fn specs(&self) -> Vec<Spec> {
        self.lock().values().map(|(s, _)| s.clone()).collect()
    }

    /// Changes whenever a value (or the set of knobs) changes.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<&'static str, (Spec, u64)>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &'static str) -> Spec {
        Spec {
            name,
            min: 1,
            max: 100,
            help: "",
        }
    }

    #[test]
    fn set_is_all_or_nothing_and_bumps_generation() {
        let k = KnobTable::default();
        k.define(spec("threads"), 10);
        k.define(spec("queue"), 1000);
        assert_eq!(k.get("queue"), Some(100), "clamped to max");
        let g = k.generation();
        let e = k
            .set(&[("threads".into(), 20), ("queue".into(), 0)])
            .unwrap_err();
        assert!(e.starts_with("queue: 0 is outside 1..=100"), "{e}");
        assert_eq!(k.get("threads"), Some(10), "nothing applied");
        assert_eq!(k.generation(), g);
        let e = k.set(&[("nope".into(), 1)]).unwrap_err();
        assert!(
            e.contains("unknown knob 'nope'") && e.contains("threads"),
            "{e}"
        );
        k.set(&[("threads".into(), 20)]).unwrap();
        assert_eq!(k.get("threads"), Some(20));
        assert!(k.generation() > g);
    }

    #[test]
    fn a_cross_knob_check_refuses_the_whole_change() {
        let k = KnobTable::default();
        k.define(spec("a"), 2);
        k.define(spec("b"), 3);
        k.set_check(Box::new(|v| {
            let sum = v["a"] + v["b"];
            if sum > 10 {
                Err(format!("a + b = {sum} above 10"))
            } else {
                Ok(())
            }
        }));
        let g = k.generation();
        let e = k.set(&[("a".into(), 8)]).unwrap_err();
        assert_eq!(e, "a + b = 11 above 10");
        assert_eq!(
            (k.get("a"), k.generation()),
            (Some(2), g),
            "nothing applied"
        );
        // Checked on the values after the change: raising one and lowering the other is fine.
        k.set(&[("a".into(), 8), ("b".into(), 1)]).unwrap();
        assert_eq!((k.get("a"), k.get("b")), (Some(8), Some(1)));
    }
}

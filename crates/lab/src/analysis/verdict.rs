//! Verdicts, assigned by code from fixed criteria (spec section 6): *reproduced* (the
//! criterion holds), *not reproduced* (no effect, or one inside the spread), *differs* (the
//! effect is reversed or outside the stated band), *not tested* (a peer is missing, the point
//! is client-bound, no root for the namespace, or the run was interrupted). A quick run marks
//! every verdict *indicative*. Also the small comparisons several criteria share.

use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Reproduced,
    NotReproduced,
    Differs,
    NotTested,
}

impl Outcome {
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Reproduced => "reproduced",
            Outcome::NotReproduced => "not reproduced",
            Outcome::Differs => "differs",
            Outcome::NotTested => "not tested",
        }
    }

    /// CSS class of the report's cells.
    pub fn class(self) -> &'static str {
        match self {
            Outcome::Reproduced => "ok",
            Outcome::NotReproduced => "no",
            Outcome::Differs => "diff",
            Outcome::NotTested => "nt",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    pub outcome: Outcome,
    pub indicative: bool,
    /// Why (always set for "not tested"; the deciding numbers otherwise).
    pub reason: String,
}

impl Verdict {
    pub fn new(outcome: Outcome, reason: impl Into<String>) -> Verdict {
        Verdict {
            outcome,
            indicative: false,
            reason: reason.into(),
        }
    }

    pub fn not_tested(reason: impl Into<String>) -> Verdict {
        Verdict::new(Outcome::NotTested, reason)
    }

    pub fn label(&self) -> String {
        if self.indicative {
            format!("{} (indicative)", self.outcome.label())
        } else {
            self.outcome.label().to_string()
        }
    }
}

/// One claim of a paper, as the report and summary.json show it.
#[derive(Clone, Debug, Serialize)]
pub struct Claim {
    pub id: String,
    pub text: String,
    pub criterion: String,
    /// The paper's value or shape.
    pub paper: String,
    /// Ours.
    pub ours: String,
    pub verdict: Verdict,
    /// Ids of the runs (rows of runs.csv) the verdict was computed from.
    pub runs: Vec<String>,
    pub notes: String,
}

impl Claim {
    pub fn new(id: &str, text: &str, criterion: &str, paper: &str) -> Claim {
        Claim {
            id: id.into(),
            text: text.into(),
            criterion: criterion.into(),
            paper: paper.into(),
            ours: String::new(),
            verdict: Verdict::not_tested("no data"),
            runs: Vec::new(),
            notes: String::new(),
        }
    }

    pub fn set(mut self, outcome: Outcome, ours: impl Into<String>) -> Claim {
        let ours = ours.into();
        self.verdict = Verdict::new(outcome, ours.clone());
        self.ours = ours;
        self
    }

    pub fn untested(mut self, reason: impl Into<String>) -> Claim {
        self.verdict = Verdict::not_tested(reason);
        self
    }

    pub fn note(mut self, note: impl Into<String>) -> Claim {
        let note = note.into();
        if !note.is_empty() {
            if !self.notes.is_empty() {
                self.notes.push(' ');
            }
            self.notes.push_str(&note);
        }
        self
    }

    pub fn runs(mut self, ids: impl IntoIterator<Item = String>) -> Claim {
        self.runs.extend(ids);
        self
    }
}

/// `hi` is expected above `lo` by more than `gap` (a share): reproduced when it is, differs
/// when `lo` is above `hi` by more than `gap` (a reversal), not reproduced when they are
/// equal within `gap`.
pub fn expect_above(hi: f64, lo: f64, gap: f64) -> Outcome {
    if hi > lo * (1.0 + gap) {
        Outcome::Reproduced
    } else if lo > hi * (1.0 + gap) {
        Outcome::Differs
    } else {
        Outcome::NotReproduced
    }
}

/// A measured ratio against the paper's: reproduced within +-`band` (relative), not
/// reproduced when it is 1 within `flat` (no effect), differs otherwise (the same order at
/// another size, or reversed).
pub fn ratio_in_band(ours: f64, paper: f64, band: f64, flat: f64) -> Outcome {
    if !ours.is_finite() {
        return Outcome::NotTested;
    }
    if (ours / paper - 1.0).abs() <= band {
        Outcome::Reproduced
    } else if (ours - 1.0).abs() <= flat {
        Outcome::NotReproduced
    } else {
        // The same order at another size, or the order reversed: either way it differs.
        Outcome::Differs
    }
}

/// The worst of several outcomes that must all hold: any "not tested" wins, then
/// "differs", then "not reproduced".
pub fn all_of(outcomes: &[Outcome]) -> Outcome {
    use Outcome::*;
    if outcomes.is_empty() || outcomes.contains(&NotTested) {
        NotTested
    } else if outcomes.contains(&Differs) {
        Differs
    } else if outcomes.contains(&NotReproduced) {
        NotReproduced
    } else {
        Reproduced
    }
}

/// Shares of a set of comparisons that go each way: reproduced when at least `share` hold,
/// differs when at least `share` are reversed, not reproduced otherwise.
pub fn by_share(holds: usize, reversed: usize, total: usize, share: f64) -> Outcome {
    if total == 0 {
        Outcome::NotTested
    } else if holds as f64 >= share * total as f64 {
        Outcome::Reproduced
    } else if reversed as f64 >= share * total as f64 {
        Outcome::Differs
    } else {
        Outcome::NotReproduced
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Outcome::*;

    #[test]
    fn above_with_a_gap() {
        assert_eq!(expect_above(120.0, 100.0, 0.10), Reproduced);
        assert_eq!(expect_above(105.0, 100.0, 0.10), NotReproduced);
        assert_eq!(expect_above(100.0, 105.0, 0.10), NotReproduced);
        assert_eq!(expect_above(80.0, 100.0, 0.10), Differs);
    }

    #[test]
    fn ratios_in_a_band() {
        assert_eq!(ratio_in_band(2.5, 2.86, 0.30, 0.05), Reproduced);
        assert_eq!(ratio_in_band(5.0, 2.86, 0.30, 0.05), Differs);
        assert_eq!(ratio_in_band(1.02, 2.86, 0.30, 0.05), NotReproduced);
        assert_eq!(ratio_in_band(0.5, 2.86, 0.30, 0.05), Differs);
        assert_eq!(ratio_in_band(f64::NAN, 2.86, 0.30, 0.05), NotTested);
    }

    #[test]
    fn combining() {
        assert_eq!(all_of(&[Reproduced, Reproduced]), Reproduced);
        assert_eq!(all_of(&[Reproduced, NotReproduced]), NotReproduced);
        assert_eq!(all_of(&[NotReproduced, Differs]), Differs);
        assert_eq!(all_of(&[Differs, NotTested]), NotTested);
        assert_eq!(all_of(&[]), NotTested);
        assert_eq!(by_share(8, 0, 10, 0.8), Reproduced);
        assert_eq!(by_share(5, 5, 10, 0.8), NotReproduced);
        assert_eq!(by_share(1, 9, 10, 0.8), Differs);
        assert_eq!(by_share(0, 0, 0, 0.8), NotTested);
    }

    #[test]
    fn labels() {
        let mut v = Verdict::new(Reproduced, "x");
        assert_eq!(v.label(), "reproduced");
        v.indicative = true;
        assert_eq!(v.label(), "reproduced (indicative)");
        let c = Claim::new("E1", "t", "c", "p")
            .set(Differs, "ours")
            .note("n1")
            .note("n2");
        assert_eq!(c.verdict.outcome, Differs);
        assert_eq!(c.notes, "n1 n2");
        assert_eq!(Claim::new("E1", "", "", "").verdict.outcome, NotTested);
    }
}

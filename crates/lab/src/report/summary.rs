//! summary.json, schema `gearshift-lab/1` (spec section 6): the machine, versions, commit,
//! mode, every run, and every claim with its id, text, criterion, the paper's value, ours,
//! the verdict (and whether it is indicative, and why) and the runs it was computed from.

use super::PaperReport;
use crate::sys::machine::Machine;
use serde_json::{json, Value};

pub const SCHEMA: &str = "gearshift-lab/1";

pub fn summary(r: &PaperReport, m: &Machine) -> Value {
    let claims: Vec<Value> = r
        .claims
        .iter()
        .map(|c| {
            json!({
                "id": c.id,
                "text": c.text,
                "criterion": c.criterion,
                "paper": c.paper,
                "ours": c.ours,
                "verdict": c.verdict.outcome.label(),
                "indicative": c.verdict.indicative,
                "reason": c.verdict.reason,
                "notes": c.notes,
                "runs": c.runs,
            })
        })
        .collect();
    json!({
        "schema": SCHEMA,
        "paper": r.id,
        "title": r.title,
        "file": r.file,
        "mode": r.mode(),
        "started_unix": r.started_unix,
        "wall_s": r.wall_s,
        "interrupted": r.interrupted,
        "machine": m,
        "versions": m.versions,
        "commit": m.commit,
        "pinning": r.pinning,
        "commands": r.commands,
        "runs": r.runs,
        "claims": claims,
        "caveats": r.caveats,
        "notes": r.notes,
        "errors": r.errors,
    })
}

/// Checks a summary against the schema's required shape; Err names the first problem.
pub fn validate(v: &Value) -> Result<(), String> {
    if v["schema"] != SCHEMA {
        return Err(format!("schema is {}, not {SCHEMA}", v["schema"]));
    }
    for k in ["paper", "mode", "commit"] {
        if !v[k].is_string() {
            return Err(format!("{k} is not a string"));
        }
    }
    if !matches!(v["mode"].as_str(), Some("quick" | "full")) {
        return Err("mode is neither quick nor full".into());
    }
    if !v["machine"].is_object() || !v["versions"].is_object() {
        return Err("machine or versions missing".into());
    }
    let runs = v["runs"].as_array().ok_or("runs is not an array")?;
    for r in runs {
        for k in [
            "id", "server", "conc", "issued", "ok", "rps", "mean_ms", "flags",
        ] {
            if r.get(k).is_none() {
                return Err(format!("a run lacks {k}"));
            }
        }
    }
    let claims = v["claims"].as_array().ok_or("claims is not an array")?;
    for c in claims {
        for k in [
            "id",
            "text",
            "criterion",
            "paper",
            "ours",
            "verdict",
            "runs",
        ] {
            if c.get(k).is_none() {
                return Err(format!("claim {} lacks {k}", c["id"]));
            }
        }
        let verdict = c["verdict"].as_str().unwrap_or("");
        if !["reproduced", "not reproduced", "differs", "not tested"].contains(&verdict) {
            return Err(format!("claim {} has verdict '{verdict}'", c["id"]));
        }
        if v["mode"] == "quick" && c["indicative"] != true {
            return Err(format!("quick claim {} is not indicative", c["id"]));
        }
        if verdict == "not tested" && c["reason"].as_str().unwrap_or("").is_empty() {
            return Err(format!("claim {} is not tested without a reason", c["id"]));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::verdict::{Claim, Outcome};

    #[test]
    fn summary_validates() {
        let mut r = PaperReport {
            id: "004".into(),
            quick: true,
            ..PaperReport::default()
        };
        r.runs.push(crate::run::Run {
            id: "r1".into(),
            ..Default::default()
        });
        let mut c = Claim::new("E1", "t", "c", "p").set(Outcome::Reproduced, "o");
        c.verdict.indicative = true;
        r.claims.push(c);
        let m = Machine::default();
        let v = summary(&r, &m);
        validate(&v).unwrap();
        assert_eq!(v["claims"][0]["verdict"], "reproduced");
        let mut bad = v.clone();
        bad["claims"][0]["indicative"] = json!(false);
        assert!(validate(&bad).unwrap_err().contains("not indicative"));
        let mut bad = v.clone();
        bad["schema"] = json!("x");
        assert!(validate(&bad).is_err());
        let mut bad = v;
        bad["claims"][0]["verdict"] = json!("maybe");
        assert!(validate(&bad).is_err());
    }
}

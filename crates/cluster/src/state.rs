//! The state of a running cluster, in `STATE_DIR/state.json` beside the configurations and
//! logs it names: the plan, the pid of every node and of the balancer, and the nodes taken
//! out of the gearshift balancer. Written atomically after every change, so `status`,
//! `down` and `reload` from a later invocation (or after an interrupted one) see what is
//! really there.

use crate::defaults as d;
use crate::plan::Plan;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct State {
    pub plan: Plan,
    /// Node i's pid at index i - 1; None while it is not running.
    pub node_pids: Vec<Option<u32>>,
    pub balancer_pid: Option<u32>,
    /// Nodes left out of the gearshift balancer's configuration (HAProxy keeps its own).
    pub out_of_service: BTreeSet<usize>,
    pub created_unix_s: u64,
}

/// The state directory of cluster `name`.
pub fn dir_of(name: &str, state_dir: Option<&Path>) -> PathBuf {
    match state_dir {
        Some(p) => p.to_path_buf(),
        None => Path::new(d::STATE_ROOT).join(name),
    }
}

fn file(dir: &Path) -> PathBuf {
    dir.join("state.json")
}

impl State {
    pub fn new(plan: Plan) -> State {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        State {
            node_pids: vec![None; plan.nodes],
            plan,
            balancer_pid: None,
            out_of_service: BTreeSet::new(),
            created_unix_s: now,
        }
    }

    pub fn exists(dir: &Path) -> bool {
        file(dir).exists()
    }

    pub fn load(name: &str, dir: &Path) -> Result<State, String> {
        let path = file(dir);
        let text = std::fs::read_to_string(&path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                format!(
                    "no cluster '{name}' ({} not found): start one with `gearshift cluster up`",
                    path.display()
                )
            } else {
                format!("{}: {e}", path.display())
            }
        })?;
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn save(&self) -> Result<(), String> {
        let path = file(&self.plan.state_dir);
        let tmp = path.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())?;
        std::fs::write(&tmp, text).map_err(|e| format!("{}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, &path).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn pid(&self, i: usize) -> Option<u32> {
        self.node_pids.get(i - 1).copied().flatten()
    }

    pub fn set_pid(&mut self, i: usize, pid: Option<u32>) {
        self.node_pids[i - 1] = pid;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::test_plan;

    #[test]
    fn state_round_trips_and_a_missing_cluster_says_how_to_start_one() {
        let dir = std::env::temp_dir().join(format!("gs-state-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut st = State::new(Plan {
            state_dir: dir.clone(),
            ..test_plan()
        });
        st.set_pid(2, Some(42));
        st.out_of_service.insert(3);
        st.save().unwrap();
        let back = State::load("t1", &dir).unwrap();
        assert_eq!(back, st);
        assert_eq!(back.pid(2), Some(42));
        assert_eq!(back.pid(1), None);
        std::fs::remove_dir_all(&dir).unwrap();
        let e = State::load("t1", &dir).unwrap_err();
        assert!(
            e.starts_with("no cluster 't1'") && e.contains("gearshift cluster up"),
            "{e}"
        );
        assert_eq!(dir_of("abc", None), Path::new("/run/gearshift/cluster/abc"));
    }
}

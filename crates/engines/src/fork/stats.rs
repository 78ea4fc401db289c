//! The statistics a process engine (fork, prefork) reports from its scoreboard: whole for
//! `/status` (with the list of children), brief for the once-a-second sampler (without it:
//! building that list every second churned the master's heap, and every page the master
//! writes after a fork becomes private to the children forked before).

use crate::scoreboard::{Scoreboard, State};
use crate::shared::Shared;
use std::sync::Arc;

/// Report the engine `name`'s statistics from its scoreboard: whole for `/status`, without
/// the per-child list for the once-a-second sampler (`Shared::set_engine_brief`).
pub fn report_stats(shared: &Shared, name: &'static str, board: &Arc<Scoreboard>) {
    let (full, brief) = (board.clone(), board.clone());
    shared.set_engine(name, Box::new(move || stats(&full)));
    shared.set_engine_brief(Box::new(move || brief_stats(&brief)));
}

/// Engine statistics for `/status`, from the scoreboard.
pub fn stats(board: &Scoreboard) -> serde_json::Value {
    let mut v = brief_stats(board);
    v["children"] = children(board);
    v
}

/// `stats` without the list of children (`Shared::set_engine_brief`).
pub fn brief_stats(board: &Scoreboard) -> serde_json::Value {
    let c = board.counts();
    serde_json::json!({
        "processes": c.total,
        "starting": c.starting,
        "idle": c.idle,
        "busy": c.busy,
        "dying": c.dying,
        "capacity": board.capacity(),
        "ready": board.header().ready(),
    })
}

fn children(board: &Scoreboard) -> serde_json::Value {
    let now = crate::scoreboard::monotonic_ms();
    let children: Vec<serde_json::Value> = board
        .snapshot()
        .into_iter()
        .map(|(i, v)| {
            serde_json::json!({
                "slot": i,
                "pid": v.pid,
                "state": if v.quit && v.state != State::Busy { "dying" } else { v.state.name() },
                "generation": v.generation,
                "connections": v.connections,
                "requests": v.requests,
                "state_ms": now.saturating_sub(v.changed_ms),
            })
        })
        .collect();
    serde_json::Value::Array(children)
}

#[cfg(test)]
mod tests {
    use super::{brief_stats, stats, Scoreboard};

    #[test]
    fn the_brief_statistics_are_the_full_ones_without_the_children() {
        let board = Scoreboard::new(4).unwrap();
        board.slot(1).claim(0);
        let full = stats(&board);
        let brief = brief_stats(&board);
        assert!(brief.get("children").is_none());
        assert_eq!(full["children"].as_array().map(Vec::len), Some(1));
        let mut without = full.clone();
        without.as_object_mut().unwrap().remove("children");
        assert_eq!(without, brief);
    }
}

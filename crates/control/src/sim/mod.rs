//! The simulated plants controllers are developed and tested on: paper 001's web server as
//! a discrete-event simulation (`server`), its M/M/m/K/N model in closed form (`analytic`),
//! paper 002's staged pipeline (`pipeline`), the closed-loop runner (`plant`) and the
//! scoring of trajectories against the best static setting (`eval`); N such servers behind a
//! load balancer, each with its own controller (`cluster`, `cluster_run`).

pub mod analytic;
pub mod balance;
mod calendar;
pub mod cluster;
pub mod cluster_run;
pub mod dist;
pub mod eval;
pub mod pipeline;
pub mod plant;
pub mod server;

#[cfg(test)]
mod cluster_tests;
#[cfg(test)]
mod tests;

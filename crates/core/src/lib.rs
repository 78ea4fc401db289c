//! gearshift's core: what both the handlers and the engines stand on, and nothing that
//! knows of either. Responses are written into an output `Batch` (`output`, `respond`);
//! the access log, the server-wide request counters (`metrics`, in memory shared with
//! forked children) and the live knob table (`knobs`) are written by engines and read by
//! the runtime; `lifecycle` is the one clock and the drain state every layer reads;
//! `inherit` lists the descriptors a forked child must not keep; `config` holds the HTTP
//! and log sections of the configuration, and `defaults` every default with its source.
//!
//! Layering (each arrow points down; Cargo forbids the reverse):
//! `gearshift` (binary) -> `gearshift-runtime` -> `gearshift-engines` -> `gearshift-handlers`
//! -> `gearshift-core` -> `gearshift-http`.

#![warn(unreachable_pub)]

pub mod accesslog;
pub mod config;
pub mod defaults;
pub mod inherit;
pub mod knobs;
pub mod lifecycle;
pub mod metrics;
pub mod net;
pub mod output;
pub mod pagebuf;
pub mod ratelog;
pub mod respond;
pub mod shm;
pub mod tls;

//! gearshift's HTTP/1.1 protocol core, sans-IO.
//!
//! Why this crate exists: every engine (event loop, prefork, threads, staged...) must speak
//! exactly the same HTTP, and the protocol must be testable and fuzzable without sockets or
//! clocks. Nothing here does I/O or reads a clock: callers pass bytes in and time in
//! (milliseconds of a monotonic clock, or Unix seconds for HTTP dates) and get bytes and
//! decisions out, in the style of quinn-proto and hyper's proto/h1.

mod authority;
pub mod body;
pub mod conditional;
pub mod conn;
pub mod date;
pub mod encoding;
mod header_list;
pub mod limits;
pub mod parse;
pub mod proxied;
pub mod range;
pub mod response;
pub mod shape;
mod target;

pub use body::{BodyDecoder, BodyError, Decoded, Framing};
pub use conn::{Conn, Event, Phase, SlowReason};
pub use limits::{Limits, Timeouts};
pub use parse::{Header, Method, ParseError, RequestHead, Version};

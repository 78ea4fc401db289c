//! The lab's view of the operating system: processes it starts and stops, what it reads from
//! /proc, the machine description, the private network namespace, Debian packages, and a
//! minimal HTTP client for its own checks.

pub mod http;
pub mod install;
pub mod machine;
pub mod netns;
pub mod procs;
pub mod sensors;

//! gearshift's handlers: what answers a request once an engine has read its head. Static
//! files with the object cache (`files`) answer in place into an output batch; CGI,
//! FastCGI, the reverse proxy and the work endpoint are dynamic: they run with blocking
//! I/O on the client socket through `stream` (the request body in, the response out,
//! every wait bounded by a timeout and the drain deadline). `Service` is one configuration
//! generation of all of them and routes a request to its handler; `dispatch` runs a
//! dynamic one.
//!
//! A handler owns its configuration section (`files::config`, `cgi::config`, ...) with its
//! `validate`, and sees only the core's clock and drain state: never an engine, a
//! connection session or the root configuration (the runtime assembles a
//! `ServiceConfig` from the sections it holds).

#![warn(unreachable_pub)]

pub mod cgi;
pub mod dispatch;
pub mod fastcgi;
pub mod files;
#[doc(hidden)]
pub mod fuzzing;
pub mod proxy;
pub mod scripts;
pub mod service;
pub mod sites;
pub mod stream;
pub mod work;

pub use dispatch::{Peers, Route};
pub use service::{Service, ServiceConfig};

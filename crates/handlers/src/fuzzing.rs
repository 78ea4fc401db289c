//! Entry points for the fuzz targets in `fuzz/` (and for their corpus replay on stable Rust):
//! each runs one of this crate's parsers of untrusted bytes (a CGI script's header section,
//! FastCGI records from an application, an upstream's response head) on arbitrary input and
//! asserts the parser's invariants; a panic is a finding. The parsers stay crate-private:
//! these functions are their only door, hidden from the documentation.

pub use crate::cgi::fuzzing::cgi_head;
pub use crate::fastcgi::fuzzing::fastcgi_records;
pub use crate::proxy::fuzzing::upstream_response;

//! gearshift's fuzz targets: one function per parser that reads untrusted bytes, each
//! asserting the parser's invariants (a parsed thing written out again parses the same,
//! an encoded body decodes to itself, a result lies inside its input), not only that
//! nothing panics. The same functions run three ways:
//!
//! - under libFuzzer, one binary per target in `fuzz_targets/` (`cargo +nightly fuzz run
//!   NAME`, see `scripts/fuzz`): coverage-guided, needs a nightly toolchain and cargo-fuzz;
//! - as a corpus replay on stable Rust (`crates/runtime/tests/fuzz_corpus.rs` includes this
//!   file): every seed in `fuzz/seeds/NAME/` and every crash kept in
//!   `fuzz/regressions/NAME/`;
//! - under `explore::run`, a small stable mutation loop (not coverage-guided) for a bounded
//!   time, for machines without nightly (CI's), `GEARSHIFT_FUZZ_SECS=N` in that test.
//!
//! Parsers private to the handlers crate are reached through its hidden `fuzzing` module,
//! which holds their invariants.

pub mod explore;
pub mod http;
pub mod runtime;

/// A target: arbitrary bytes in, a panic when an invariant breaks.
pub type Target = fn(&[u8]);

/// Every target: its name (= the libFuzzer binary and the seed folder) and its function.
pub const TARGETS: &[(&str, Target)] = &[
    ("request_head", http::request_head),
    ("chunked", http::chunked),
    ("range", http::range),
    ("conditional", http::conditional),
    ("proxy_protocol", http::proxy_protocol),
    ("cgi_head", gearshift_handlers::fuzzing::cgi_head),
    (
        "fastcgi_records",
        gearshift_handlers::fuzzing::fastcgi_records,
    ),
    (
        "upstream_response",
        gearshift_handlers::fuzzing::upstream_response,
    ),
    ("config_toml", runtime::config_toml),
    ("admin_json", runtime::admin_json),
];

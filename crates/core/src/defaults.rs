//! Every default gearshift takes from a paper or a peer, in one place, each with its source.
//! Protocol limits and timeouts live in `gearshift_http::limits` (sans-IO crate) and are
//! re-exported here so this file stays the single index of defaults.

pub use gearshift_http::limits::{Limits, Timeouts};

/// `gearshift serve` with no arguments listens here, like `python3 -m http.server`
/// (which binds 0.0.0.0:8000); we bind loopback only so a bare start exposes nothing.
pub const LISTEN: &str = "127.0.0.1:8080";

/// Index files tried for a directory. nginx `index index.html`.
pub const INDEX: &[&str] = &["index.html"];

/// Accept backlog. nginx `listen ... backlog=511` on Linux (NGX_LISTEN_BACKLOG).
pub const BACKLOG: i32 = 511;

/// Connections the server holds at once, all workers together, before new ones are left
/// in the listen backlog: nginx's `worker_connections` (512 in its source, 768 in Debian's
/// nginx.conf) is per worker process; Apache's MaxRequestWorkers 400 plus ListenBacklog 511
/// per server. Ours is larger because a connection waiting for its head costs a few hundred
/// bytes here (no worker): 16,384, and never more than the descriptor limit allows
/// (`limits::connection_cap`).
pub const MAX_CONNECTIONS: usize = 16_384;
/// Descriptors kept for the server itself (listener, epoll sets, wakers, log files, CGI
/// pipes; at most half of a small limit) when the connection cap is sized against
/// RLIMIT_NOFILE; the cache's open files (`CACHE_MAX_FDS`) are kept on top. Ours.
pub const RESERVED_FDS: usize = 64;
/// Accepting stops this long after accept(2) fails for want of descriptors (EMFILE, ENFILE)
/// or memory: nginx disables accept for 500 ms (`ngx_event_accept`).
pub const ACCEPT_BACKOFF_MS: u64 = 500;
/// TCP_DEFER_ACCEPT: the kernel holds a connection until its first data (or this many
/// seconds). nginx `listen ... deferred` uses 1 s; Apache `AcceptFilter http data` 30 s;
/// ours: 10 s, longer than nginx so a silent flood costs nothing, shorter than Apache so a
/// client that speaks first only after a delay (not HTTP, but possible) is not held long.
pub const DEFER_ACCEPT_S: u32 = 10;
/// Diagnostic lines one kind of client-caused condition may write per second; beyond it
/// repeats are counted and summarised once a second. nginx and Apache log each occurrence
/// but rate-limit the repeated `accept() failed` (nginx) or `server reached
/// MaxRequestWorkers` (Apache, once) messages; ours: 5 a second per kind.
pub const LOG_LINES_PER_S: u32 = 5;

/// Most ranges honoured in one request before serving 200. Apache `MaxRanges 200`.
pub const MAX_RANGES: usize = 200;

/// Requests served on one keep-alive connection. nginx `keepalive_requests 1000`.
pub const KEEPALIVE_REQUESTS: u64 = 1000;

/// Object cache (paper 002's data cache): total bytes held in memory.
pub const CACHE_MAX_BYTES: u64 = 64 * 1024 * 1024;
/// Object cache: entries. nginx examples use `open_file_cache max=1000`; we allow more,
/// entries are small.
pub const CACHE_MAX_ENTRIES: usize = 10_000;
/// Object cache: open descriptors of large files it keeps (each counts against
/// RLIMIT_NOFILE). nginx's example `open_file_cache max=1000` bounds them by entries; we
/// bound them apart, at 256 and never more than an eighth of the descriptor limit, so a
/// crawl of large files cannot take the descriptors connections need.
pub const CACHE_MAX_FDS: usize = 256;
/// Files up to this size are held in memory with their headers; larger ones are sent with
/// sendfile from a cached descriptor. Paper 002 caches "small" objects; SPECweb99's file
/// classes top out at 900 KiB; we keep bodies that fit a few TCP segments' worth of writev.
pub const CACHE_MAX_FILE: u64 = 256 * 1024;
/// Revalidate a cached entry with stat at most this often. nginx `open_file_cache_valid 60s`
/// is far laxer; issue 3 asks for at most once a second.
pub const CACHE_REVALIDATE_MS: u64 = 1000;

/// File mode of a Unix-socket admin listener: the owner's alone. The admin socket changes
/// the running server, as Docker's `/var/run/docker.sock` does (0660, group `docker`) and
/// php-fpm's `listen.mode` (0660); with no group to name, the owner only.
pub const ADMIN_SOCKET_MODE: u32 = 0o600;

/// Shortest admin bearer token accepted (characters): 16 random characters of the token
/// alphabet are about 96 bits, beyond guessing through a listener answering one request
/// per connection (OWASP ASVS 2.9: at least 64 bits of entropy for secrets).
pub const ADMIN_TOKEN_MIN_LEN: usize = 16;

/// Longest a TLS handshake may take from the connection's accept before it is closed.
/// nginx has no handshake timeout of its own: the handshake runs under
/// `client_header_timeout` (60 s by default), which we follow.
pub const TLS_HANDSHAKE_TIMEOUT_MS: u64 = 60_000;

/// Drain period on SIGTERM/SIGINT before remaining connections are closed.
/// nginx has no limit by default (`worker_shutdown_timeout` unset); Apache's graceful-stop
/// `GracefulShutdownTimeout` defaults to 0 (none). We bound it: 10 s.
pub const SHUTDOWN_TIMEOUT_MS: u64 = 10_000;

/// Per-read buffer of an event-loop worker (shared by all its connections; idle connections
/// hold none). nginx `client_header_buffer_size 1k` grows to 8k; one 64 KiB scratch per worker
/// reads a pipelined burst in one call.
pub const READ_BUF: usize = 64 * 1024;

/// Server header value.
pub const SERVER: &str = "gearshift";

/// `threads` engine: most connection threads at once. Apache 2.4 MaxRequestWorkers for
/// threaded MPMs = ServerLimit 16 x ThreadsPerChild 25 = 400.
pub const MAX_THREADS: usize = 400;

/// `pool` engine: worker threads. Apache 2.4 ThreadsPerChild default 25.
pub const POOL_THREADS: usize = 25;

/// `pool` engine: connections queued between acceptor and workers. Apache's worker MPM
/// queues at most one connection per idle thread; we allow a listen backlog's worth.
pub const POOL_QUEUE: usize = BACKLOG as usize;

/// `fork` engine: most live children (one per connection). Apache prefork's
/// MaxRequestWorkers default 256 bounds the same thing there.
pub const FORK_MAX_CHILDREN: usize = 256;

/// Apache 2.4 mpm_prefork defaults (httpd docs, "prefork" and "mpm_common").
pub mod prefork {
    pub const START_SERVERS: usize = 5;
    pub const MIN_SPARE_SERVERS: usize = 5;
    pub const MAX_SPARE_SERVERS: usize = 10;
    pub const MAX_REQUEST_WORKERS: usize = 256;
    /// 0 = unlimited (MaxConnectionsPerChild default).
    pub const MAX_CONNECTIONS_PER_CHILD: u64 = 0;
}

/// Apache 2.4 mpm_worker / mpm_event defaults (httpd docs, "worker" and "mpm_common").
pub mod worker {
    pub const START_SERVERS: usize = 3;
    pub const SERVER_LIMIT: usize = 16;
    pub const THREADS_PER_CHILD: usize = 25;
    pub const THREAD_LIMIT: usize = 64;
    pub const MIN_SPARE_THREADS: usize = 75;
    pub const MAX_SPARE_THREADS: usize = 250;
    pub const MAX_REQUEST_WORKERS: usize = 400;
    pub const MAX_CONNECTIONS_PER_CHILD: u64 = 0;
    /// Apache KeepAliveTimeout default 5 s.
    pub const KEEPALIVE_TIMEOUT_MS: u64 = 5000;
}

/// Apache's idle-server maintenance (server/mpm/*/: once a second; spawn rate doubles up to
/// MAX_SPAWN_RATE per cycle; one idle process or thread retired per cycle).
pub mod maintenance {
    pub const INTERVAL_MS: u64 = 1000;
    pub const MAX_SPAWN_RATE: usize = 32;
}

/// `staged` engine (paper 002, KETA): threads per stage and the total budget M.
pub mod staged {
    pub const ACCEPT_THREADS: usize = 1;
    pub const RECEIVE_THREADS: usize = 2;
    pub const PROCESS_THREADS: usize = 4;
    pub const SEND_THREADS: usize = 2;
    /// Total threads M the allocator may distribute among stages.
    pub const MAX_THREADS: usize = 16;
    /// Bound of each inter-stage queue.
    pub const QUEUE: usize = 1024;
    /// Longest a connection with a dynamic request may wait for a process thread before it
    /// is answered 503 (`Retry-After`); as the event engine's `dynamic::QUEUE_TIMEOUT_MS`.
    pub const PROCESS_QUEUE_TIMEOUT_MS: u64 = super::dynamic::QUEUE_TIMEOUT_MS;
}

/// Dynamic hand-off of the event engine: the thread pool that runs blocking exchanges (CGI,
/// the work endpoint) off the event loops. nginx `thread_pool default threads=32
/// max_queue=65536` (ngx_thread_pool_module's defaults).
pub mod dynamic {
    pub const THREADS: usize = 32;
    pub const QUEUE: usize = 65536;
    /// Longest a dynamic exchange may wait in the queue before it is answered 503 with
    /// `Retry-After` instead of run (issue 17: a queue without a deadline turns a backlog
    /// into minutes of latency). nginx's thread pool has no such bound; HAProxy's
    /// `timeout queue` defaults to its `timeout connect` (5 s in its shipped configuration),
    /// which we take.
    pub const QUEUE_TIMEOUT_MS: u64 = 5_000;
    /// `Retry-After` (seconds) sent with a 503 for a full or timed-out queue (RFC 9110
    /// 10.2.3); ours: one second, as a backlog clears in about that.
    pub const RETRY_AFTER_S: u64 = 1;
}

/// Buffering between slow clients and dynamic backends (CGI, FastCGI, proxy), nginx's
/// ngx_http_proxy_module / ngx_http_fastcgi_module defaults on x86-64.
pub mod buffering {
    /// `proxy_request_buffering on` / `fastcgi_request_buffering on`: the body is read
    /// whole before the backend is involved.
    pub const REQUEST: bool = true;
    /// `proxy_buffering on` / `fastcgi_buffering on`.
    pub const RESPONSE: bool = true;
    /// `client_body_buffer_size 16k` (two pages): a larger body goes to a temporary file.
    pub const REQUEST_BUFFER_BYTES: u64 = 16 * 1024;
    /// `proxy_buffers 8 8k`: 64 KiB of a response in memory before a temporary file.
    pub const RESPONSE_BUFFER_BYTES: u64 = 64 * 1024;
    /// `proxy_max_temp_file_size 1024m`: past it the response is passed on as the client
    /// reads (the backend waits for it again).
    pub const MAX_TEMP_FILE_BYTES: u64 = 1024 * 1024 * 1024;
    /// `proxy_request_buffering off` / `fastcgi_request_buffering off` in an event loop:
    /// bytes of a streaming body read from the client at a time, and framed bytes waiting
    /// for the backend beyond which the client is not read (each half the blocking path's
    /// 64 KiB transfer buffer, `proxy::CHUNK`, so an upload costs the loop about what it
    /// costs a pool thread's buffer; nginx reads such a body into its
    /// `client_body_buffer_size` buffer, 16k, but then issues a syscall per 16 KiB).
    pub const STREAMED_BODY_WINDOW: usize = 32 * 1024;
}

/// CGI (RFC 3875).
pub mod cgi {
    /// Inactivity timeout on a script's output, after which its process group is killed
    /// (504 before the head). Apache `Timeout 60` (mod_cgi waits on the script with it).
    pub const TIMEOUT_MS: u64 = 60_000;
    /// Most CGI processes at once. Apache has no separate limit: scripts are bounded by the
    /// request workers, MaxRequestWorkers 400 for the threaded MPMs; we take the same number.
    pub const MAX_PROCESSES: usize = 400;
    /// Largest response header section a script may print. Apache reads CGI headers with
    /// `LimitRequestFieldSize`-sized lines (8190 bytes); we bound the whole section at 8 KiB.
    pub const MAX_HEADER: usize = 8 * 1024;
    /// Internal (local) redirects followed before answering 500. Apache
    /// `LimitInternalRecursion 10`.
    pub const MAX_REDIRECTS: usize = 10;
    /// PATH given to scripts: Debian's default `ENV_PATH` for login shells' non-root users.
    pub const PATH: &str = "/usr/local/bin:/usr/bin:/bin";
}

/// FastCGI client (php-fpm behind gearshift).
pub mod fastcgi {
    use std::time::Duration;
    /// nginx `fastcgi_connect_timeout 60s`.
    pub const CONNECT_TIMEOUT_MS: u64 = 60_000;
    /// nginx `fastcgi_read_timeout 60s` (between two reads, not for the whole answer).
    pub const READ_TIMEOUT_MS: u64 = 60_000;
    /// nginx `fastcgi_send_timeout 60s`.
    pub const SEND_TIMEOUT_MS: u64 = 60_000;
    /// Requests in flight at the backend. nginx's upstream `max_conns` is unlimited by
    /// default; we take CGI's cap (MaxRequestWorkers 400 of Apache's threaded MPMs).
    pub const MAX_CONNECTIONS: usize = 400;
    /// Idle connections kept per process for reuse: none, as nginx (`fastcgi_keep_conn
    /// off` unless told). php-fpm ties one worker to every connection, idle ones too, and
    /// does not say how many workers it has (its FCGI_GET_VALUES answer names only
    /// FCGI_MPXS_CONNS), so idle connections kept by default could hold every worker of a
    /// small pool (Debian's `www` pool: pm.max_children = 5) while requests on further
    /// connections wait in its backlog until the read timeout. Set `keepalive` (nginx's
    /// documentation example: 8) below php-fpm's pm.max_children divided by the server's
    /// processes (event loops, or children of fork/prefork/worker).
    pub const KEEPALIVE: usize = 0;
    /// How long an idle connection is kept. nginx upstream `keepalive_timeout 60s`.
    pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(60);
    /// Requests on one backend connection before it is closed. nginx upstream
    /// `keepalive_requests 1000`.
    pub const KEEPALIVE_REQUESTS: u64 = 1000;
    /// A script found beneath the root is trusted this long before it is opened again:
    /// once a second, as the object cache revalidates (`CACHE_REVALIDATE_MS`, issue 3);
    /// nginx's `open_file_cache_valid` is 60 s.
    pub const SCRIPT_CHECK_MS: u64 = super::CACHE_REVALIDATE_MS;
    /// Wait for the answer to FCGI_GET_VALUES (ours: it only informs; php-fpm answers at
    /// once, an application that ignores management records should not hold a request).
    pub const PROBE_TIMEOUT: Duration = Duration::from_millis(500);
    /// Multiplexing (`multiplex = "auto"`): used when the backend's FCGI_GET_VALUES answer
    /// says FCGI_MPXS_CONNS=1 (FastCGI 1.0 specification, section 4.1).
    pub const MULTIPLEX: &str = "auto";
    /// Requests in flight on one multiplexed connection when the backend does not announce
    /// FCGI_MAX_REQS, and the bound on what it announces: 50, the example value the
    /// FastCGI 1.0 specification gives for FCGI_MAX_REQS (section 4.1).
    pub const MUX_REQUESTS: usize = 50;
    /// Multiplexed connections per process, per event loop on the event engine (fewer if
    /// the backend announces a lower FCGI_MAX_CONNS): 10, the specification's example value
    /// for FCGI_MAX_CONNS (4.1).
    pub const MUX_CONNECTIONS: usize = 10;
    /// Bytes of one multiplexed request's answer held in memory while its client is slower
    /// than the backend: nginx's `fastcgi_buffers 8 8k` (64 KiB per request).
    pub const MUX_BUFFER: usize = 64 * 1024;
    /// Beyond that, spooled to a temporary file up to nginx's `fastcgi_max_temp_file_size
    /// 1024m`; past it the request is given up (FCGI_ABORT_REQUEST, answer cut).
    pub const MUX_MAX_SPILL: u64 = 1024 * 1024 * 1024;
}

/// Synthetic work endpoint (no peer has one; bounds are ours): a single request may burn at
/// most 1 s of CPU, sleep 10 s, allocate 64 MiB and ask for a 64 MiB body, so it cannot pin a
/// worker or the machine for long.
pub mod work {
    pub const PATH: &str = "/_work";
    pub const MAX_CPU_US: u64 = 1_000_000;
    pub const MAX_SLEEP_MS: u64 = 10_000;
    pub const MAX_BYTES: u64 = 64 * 1024 * 1024;
    pub const MAX_ALLOC_KB: u64 = 64 * 1024;
}
/// Sampling interval of the sensors and the online controller. Issue 7 ("per sampling
/// interval, configurable, default 1 s"); paper 001's controllers decide per interval too.
pub const CONTROL_INTERVAL_MS: u64 = 1000;
/// Shortest sampling interval accepted: below it /proc reads and TCP_INFO dominate the
/// master's time and an interval holds too few requests to mean anything.
pub const CONTROL_MIN_INTERVAL_MS: u64 = 50;
/// How far back `GET /history` (the status page's charts, `gearshift ctl fit`) reaches.
/// Issue 7 asks for charts "over the last minutes"; ours: ten of them.
pub const HISTORY_WINDOW_S: u64 = 600;
/// Most samples the history keeps whatever the interval (at the 50 ms minimum, the window
/// shrinks to 3 minutes): about 1 KB each, a few MB at most. Ours.
pub const HISTORY_MAX_SAMPLES: usize = 3600;

/// Reverse proxy (`[[proxy.upstream]]`), nginx's ngx_http_proxy_module and
/// ngx_http_upstream_module defaults unless said otherwise.
pub mod proxy {
    /// `proxy_connect_timeout 60s`.
    pub const CONNECT_TIMEOUT_MS: u64 = 60_000;
    /// `proxy_read_timeout 60s` (also used for sending, like `proxy_send_timeout 60s`).
    pub const READ_TIMEOUT_MS: u64 = 60_000;
    /// Idle connections cached per server: nginx's `keepalive` has no default (off); its
    /// documentation's example uses `keepalive 32`, which we take so reuse is on.
    pub const KEEPALIVE: usize = 32;
    /// `keepalive_timeout 60s` (upstream block).
    pub const KEEPALIVE_TIMEOUT_MS: u64 = 60_000;
    /// `server ... max_fails=1 fail_timeout=10s`.
    pub const MAX_FAILS: u32 = 1;
    pub const FAIL_TIMEOUT_MS: u64 = 10_000;
    /// Active checks (nginx Plus `health_check`'s default `interval=5`): every 5 s.
    pub const HEALTH_INTERVAL_MS: u64 = 5_000;
    /// Largest upstream response head; nginx `proxy_buffer_size` is one page (4k/8k) and a
    /// larger head is a 502. We allow 16 KiB.
    pub const MAX_RESPONSE_HEAD: usize = 16 * 1024;
    /// Bytes moved per read in either direction (nginx `proxy_buffers 8 8k` hold 64 KiB).
    pub const CHUNK: usize = 64 * 1024;
    /// Add `Via` to forwarded requests and responses: RFC 9110 §7.6.3, "A proxy MUST send
    /// an appropriate Via header field". (nginx sends none unless told; Apache's `ProxyVia`
    /// is Off by default.)
    pub const VIA: bool = true;
    /// Forward header names with `_`: no, as nginx (`underscores_in_headers off`, and
    /// `ignore_invalid_headers on` drops them) and Apache 2.4 for CGI: `Content_Length`
    /// and `Content-Length` are one variable to CGI-style upstreams.
    pub const UNDERSCORES_IN_HEADERS: bool = false;
}

/// On-the-fly compression of static files (`[compression]`, issue 19).
pub mod compression {
    /// Off unless asked for: nginx's `gzip off` and Caddy's file server without `encode`
    /// send identity; so do the benchmarks against them.
    pub const ENABLED: bool = false;
    /// zlib's default level (Z_DEFAULT_COMPRESSION = 6), Apache mod_deflate's
    /// DeflateCompressionLevel default. A variant is compressed once and then cached, so
    /// more than nginx's `gzip_comp_level 1` pays.
    pub const GZIP_LEVEL: u32 = 6;
    /// ngx_brotli's `brotli_comp_level 6` (quality 0-11).
    pub const BROTLI_LEVEL: u32 = 6;
    /// Smaller files are sent as they are: Caddy's `encode` `minimum_length 512` (nginx's
    /// `gzip_min_length 20` compresses even a few bytes, which a gzip header outweighs).
    pub const MIN_LENGTH: u64 = 512;
    /// Larger files are sent identity (with sendfile): a variant is compressed whole in
    /// memory and must fit the object cache's per-shard budget (64 MiB / 16 = 4 MiB) to be
    /// kept, so a miss costs at most one compression of 1 MiB (some 20 ms at level 6). Ours.
    pub const MAX_LENGTH: u64 = 1024 * 1024;
    /// Types compressed (essence; `text/*` covers a top-level type): Caddy `encode`'s
    /// default match list (text/*, JSON, JavaScript, XHTML, Atom, RSS, WASM, SVG) plus XML
    /// and the web manifest. Images, archives and video are compressed already.
    pub const TYPES: &[&str] = &[
        "text/*",
        "application/json",
        "application/javascript",
        "application/xml",
        "application/xhtml+xml",
        "application/atom+xml",
        "application/rss+xml",
        "application/manifest+json",
        "application/wasm",
        "image/svg+xml",
    ];
}

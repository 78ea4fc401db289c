//! A FastCGI backend smaller than the crowd: php-fpm ties one worker to every connection,
//! idle kept-alive ones too, and says nothing of how many workers it has (it answers
//! FCGI_GET_VALUES with FCGI_MPXS_CONNS only). A server that kept idle connections by
//! default held every worker of a small pool (Debian's www pool has pm.max_children = 5),
//! and requests sent on further connections waited in php-fpm's backlog until the read
//! timeout. With the defaults, more concurrent requests than php-fpm has workers must all
//! be answered, only later; an explicit `keepalive` keeps connections as asked.

mod common;
mod fastcgi_peers;

use common::*;
use fastcgi_peers::*;
use std::time::{Duration, Instant};

const NAP_PHP: &str = "<?php\nusleep(200000);\necho 'rested';\n";

fn server(backend: &str, extra: &str) -> Server {
    let root = standard_docroot();
    root.write("nap.php", NAP_PHP);
    let (cfg, path) = config_file(&format!(
        "listen = \"127.0.0.1:0\"\n[fastcgi]\nbackend = \"{backend}\"\nextensions = [\".php\"]\n{extra}"
    ));
    let mut s = serve(root, &["--config", &path]);
    s.keep.push(cfg);
    s
}

/// `n` clients at once, each on its own connection; (answered 200 with the body, slowest).
fn crowd(s: &Server, n: usize) -> (usize, Duration) {
    let addr = s.addr;
    let t = Instant::now();
    let clients: Vec<_> = (0..n)
        .map(|_| {
            std::thread::spawn(move || {
                let mut c = Conn::open(addr);
                c.send(b"GET /nap.php HTTP/1.1\r\nHost: t\r\n\r\n");
                c.try_response(false)
                    .map(|r| r.status == 200 && r.body == b"rested")
                    .unwrap_or(false)
            })
        })
        .collect();
    let ok = clients
        .into_iter()
        .map(|h| h.join().unwrap_or(false))
        .filter(|&ok| ok)
        .count();
    (ok, t.elapsed())
}

#[test]
fn more_clients_than_php_workers_are_all_answered() {
    let Some(bin) = fpm_or_skip("more_clients_than_php_workers_are_all_answered") else {
        return;
    };
    // Two workers, eight clients at once, three times (idle connections of a round would
    // hold both workers in the next).
    let fpm = Fpm::start_with(&bin, true, "static", 2);
    let s = server(&fpm.backend, "");
    for round in 0..3 {
        let (ok, took) = crowd(&s, 8);
        assert_eq!(
            ok,
            8,
            "round {round}: {ok} of 8 answered in {took:?}; php-fpm log: {}",
            fpm.log()
        );
        // 8 naps of 0.2 s on 2 workers take 0.8 s; generous for a loaded machine.
        assert!(took < Duration::from_secs(8), "round {round}: {took:?}");
    }
}

//! The PHP site of the FastCGI end-to-end tests (dynamic_fastcgi.rs,
//! dynamic_fastcgi_errors.rs): the scripts (parameters, a streamed upload hash, a large
//! download, statuses and redirects, a slow one), a gearshift sending `.php` to a backend
//! (php-fpm started per test, or any address), and reading its answers with the server's
//! log on failure.
#![allow(dead_code)]

use super::common::*;
use super::fastcgi_peers::*;

pub const INFO_PHP: &str = r#"<?php
header('X-From: php');
foreach (['REQUEST_METHOD', 'QUERY_STRING', 'SCRIPT_NAME', 'SCRIPT_FILENAME', 'PATH_INFO',
          'DOCUMENT_ROOT', 'DOCUMENT_URI', 'REQUEST_URI', 'REMOTE_ADDR', 'SERVER_PORT',
          'SERVER_PROTOCOL', 'GATEWAY_INTERFACE', 'HTTP_X_CUSTOM', 'HTTP_PROXY',
          'CONTENT_TYPE', 'CONTENT_LENGTH'] as $k) {
    echo $k, '=', $_SERVER[$k] ?? '-', "\n";
}
echo 'get_a=', $_GET['a'] ?? '-', "\n";
error_log('info-php-was-here');
"#;

/// Streams php://input through crc32b: length and checksum, without holding the body.
pub const HASH_PHP: &str = r#"<?php
$in = fopen('php://input', 'rb');
$h = hash_init('crc32b');
$n = 0;
while (!feof($in)) { $d = fread($in, 65536); if ($d === false) break; $n += strlen($d); hash_update($h, $d); }
header('Content-Type: text/plain');
echo $n, ' ', hash_final($h);
"#;

pub const BIG_PHP: &str = r#"<?php
header('Content-Type: application/octet-stream');
$block = str_repeat('0123456789abcdef', 4096);
$n = intval($_GET['mb'] ?? '1') * 16;
for ($i = 0; $i < $n; $i++) { echo $block; flush(); }
"#;

pub const STATUS_PHP: &str = r#"<?php
if (isset($_GET['to'])) { header('Location: ' . $_GET['to']); exit; }
http_response_code(201);
header('Content-Type: text/plain');
echo 'created';
"#;

pub const SLOW_PHP: &str = "<?php\nsleep(intval($_GET['s'] ?? '5'));\necho 'late';\n";

/// php-fpm (TCP, or a Unix socket) and a gearshift sending `.php` to it, with `extra`
/// added to the `[fastcgi]` section.
pub fn setup(fpm_bin: &str, unix: bool, extra: &str) -> (Fpm, Server) {
    let fpm = Fpm::start(fpm_bin, unix);
    let s = php_server(&fpm.backend, extra);
    (fpm, s)
}

pub fn php_server(backend: &str, extra: &str) -> Server {
    let root = standard_docroot();
    for (name, src) in [
        ("info.php", INFO_PHP),
        ("hash.php", HASH_PHP),
        ("big.php", BIG_PHP),
        ("status.php", STATUS_PHP),
        ("slow.php", SLOW_PHP),
    ] {
        root.write(name, src);
    }
    let (cfg, path) = config_file(&format!(
        "listen = \"127.0.0.1:0\"\n[http]\nmax_body = 100000000\n[fastcgi]\nbackend = \"{backend}\"\nextensions = [\".php\"]\n{extra}"
    ));
    let mut s = serve(root, &["--config", &path]);
    s.keep.push(cfg);
    s
}

/// The next response on `c`, or a panic showing the server's error log.
pub fn answer(c: &mut Conn, s: &Server) -> Response {
    c.try_response(false)
        .unwrap_or_else(|e| panic!("{e}; server log:\n{}", s.stderr_text()))
}

pub fn lines(r: &Response) -> Vec<String> {
    r.text().lines().map(str::to_string).collect()
}

//! Unit tests of the listen options: `listen` and `tls.listen` as a string or an array,
//! IPv6 literals, the errors, `[[site]] listen` and the sites' certificates.

use crate::config::{Config, Listen};
use std::net::SocketAddr;

fn with_root(text: &str) -> Config {
    let mut c = Config::from_toml(text).unwrap();
    c.root = std::env::temp_dir();
    c
}

#[test]
fn listen_is_a_string_or_an_array() {
    let one = with_root("listen = \"0.0.0.0:80\"\n");
    assert_eq!(one.listen, Listen::one("0.0.0.0:80"));
    assert_eq!(one.listen_addrs().unwrap().len(), 1);
    let many = with_root("listen = [\"0.0.0.0:80\", \"[::]:80\", \"[::1]:8080\"]\n");
    let addrs = many.listen_addrs().unwrap();
    assert_eq!(addrs[1], "[::]:80".parse::<SocketAddr>().unwrap());
    assert!(addrs[2].is_ipv6() && addrs[2].ip().is_loopback());
    assert_eq!(many.validate(), Ok(()));
    // Each form is written back as it was read.
    for c in [&one, &many] {
        let text = toml::to_string(c).unwrap();
        assert_eq!(&Config::from_toml(&text).unwrap().listen, &c.listen);
    }
    assert!(toml::to_string(&one)
        .unwrap()
        .contains("listen = \"0.0.0.0:80\""));
    let e = Config::from_toml("listen = 80\n").unwrap_err();
    assert!(
        e.starts_with("line 1 (listen = 80):") && e.contains("IP:PORT"),
        "{e}"
    );
}

#[test]
fn bad_addresses_name_the_option() {
    for (text, want) in [
        ("listen = []\n", "listen: at least one address"),
        (
            "listen = [\"127.0.0.1:80\", \"::1:80\"]\n",
            "listen: '::1:80' is not IP:PORT (an IPv6 address goes in brackets",
        ),
        (
            "listen = [\"127.0.0.1:80\", \"127.0.0.1:80\"]\n",
            "listen: 127.0.0.1:80 is listed twice",
        ),
        (
            "listen = \"localhost:80\"\n",
            "listen: 'localhost:80' is not IP:PORT",
        ),
        (
            "[tls]\nlisten = [\"[::1]:443\", \"x\"]\n",
            "tls.listen: 'x' is not IP:PORT",
        ),
    ] {
        let e = with_root(text).validate().unwrap_err();
        assert!(e.starts_with(want), "{text}: {e}");
    }
}

#[test]
fn listeners_are_listen_then_tls_listen_and_never_both() {
    let mut c = with_root("listen = [\"127.0.0.1:80\", \"[::1]:80\"]\n");
    c.tls.listen = Listen(vec!["127.0.0.1:443".into(), "[::1]:443".into()]);
    let l = c.listeners().unwrap();
    let https: Vec<bool> = l.iter().map(|x| x.1).collect();
    assert_eq!(https, [false, false, true, true]);
    c.tls.listen = Listen(vec!["[::1]:80".into()]);
    let e = c.listeners().unwrap_err();
    assert!(
        e.starts_with("tls.listen: [::1]:80 is in listen too"),
        "{e}"
    );
    // Port 0 twice is two listeners (two free ports).
    c.tls.listen = Listen::one("127.0.0.1:0");
    c.listen = Listen::one("127.0.0.1:0");
    assert_eq!(c.listeners().unwrap().len(), 2);
}

#[test]
fn a_site_listens_only_on_the_servers_addresses() {
    let dir = std::env::temp_dir();
    let text = format!(
        "listen = [\"127.0.0.1:80\", \"[::1]:80\"]\n\
         [[site]]\nnames = [\"v6.test\"]\nroot = {dir:?}\nlisten = \"[::1]:80\"\n\
         [[site]]\nnames = [\"both.test\"]\nroot = {dir:?}\nlisten = [\"127.0.0.1:80\", \"[::1]:80\"]\n"
    );
    let mut c = with_root(&text);
    assert_eq!(c.validate(), Ok(()));
    assert_eq!(c.sites[0].listen, Listen::one("[::1]:80"));
    let again = Config::from_toml(&toml::to_string(&c).unwrap()).unwrap();
    assert_eq!(again.sites, c.sites);
    c.sites[0].listen = Listen::one("[::1]:81");
    let e = c.validate().unwrap_err();
    assert!(
        e.starts_with("site v6.test: listen: [::1]:81 is none of the server's"),
        "{e}"
    );
}

#[test]
fn site_certificates_need_tls_and_both_files() {
    let dir = std::env::temp_dir();
    let text = format!(
        "[[site]]\nnames = [\"a.test\"]\nroot = {dir:?}\ntls_cert = \"/nowhere/a.pem\"\ntls_key = \"/nowhere/a.key\"\n"
    );
    let mut c = with_root(&text);
    assert_eq!(c.site_certificates().len(), 1);
    assert_eq!(c.site_certificates()[0].1.names, ["a.test"]);
    let e = c.validate().unwrap_err();
    assert!(
        e.starts_with("site a.test: tls_cert: needs [tls] listen"),
        "{e}"
    );
    c.tls.listen = Listen::one("127.0.0.1:0");
    let e = c.validate().unwrap_err();
    assert!(e.starts_with("site a.test: cert /nowhere/a.pem"), "{e}");
    c.sites[0].tls_key = Default::default();
    let e = c.validate().unwrap_err();
    assert_eq!(
        e,
        "site a.test: tls_cert and tls_key go together (PEM files)"
    );
}

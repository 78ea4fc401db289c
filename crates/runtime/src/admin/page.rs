//! The live status page of the admin listener (`GET /`): one HTML file with its CSS and
//! JavaScript inline, compiled into the binary (no external asset, nothing to install next
//! to it), that polls `/status` and `/history` and draws its own small SVG charts. Its
//! Content-Security-Policy allows nothing but that inline code, marked with a fresh nonce
//! per response, and fetches to the admin listener itself.

/// The page; `{{NONCE}}` marks where each response's nonce goes.
const TEMPLATE: &str = include_str!("status.html");

pub(super) struct Page {
    nonce: String,
}

impl Page {
    pub(super) fn new() -> Page {
        Page { nonce: nonce() }
    }

    pub(super) fn html(&self) -> String {
        TEMPLATE.replace("{{NONCE}}", &self.nonce)
    }

    /// Inline script and style only with this response's nonce; `fetch` to the same origin
    /// only; no frames, forms, plug-ins or base URL; the icon is an empty data: URL.
    pub(super) fn csp(&self) -> String {
        let n = &self.nonce;
        format!(
            "default-src 'none'; script-src 'nonce-{n}'; style-src 'nonce-{n}'; \
             connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; \
             frame-ancestors 'none'"
        )
    }
}

/// 128 random bits, hex. /dev/urandom is always there on Linux; should it fail to open,
/// the clock stands in (the page injects no outside text, so the nonce guards only
/// against what is not there; a weaker one costs nothing real).
fn nonce() -> String {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if read.is_err() {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        bytes = (t ^ u128::from(std::process::id())).to_le_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_inline_block_carries_the_nonce_of_the_policy() {
        let p = Page::new();
        assert_eq!(p.nonce.len(), 32);
        assert_ne!(p.nonce, Page::new().nonce, "fresh per response");
        let html = p.html();
        assert!(!html.contains("{{NONCE}}"));
        for tag in ["<script", "<style"] {
            let n = html.matches(tag).count();
            let marked = html
                .matches(&format!("{tag} nonce=\"{}\"", p.nonce))
                .count();
            assert!(
                n > 0 && n == marked,
                "{tag}: {marked} of {n} carry the nonce"
            );
        }
        assert!(
            !html.contains(" style=\""),
            "inline style attributes break the CSP"
        );
        assert!(!html.contains("src=\"http"), "no external asset");
        let csp = p.csp();
        assert!(csp.contains(&format!("script-src 'nonce-{}'", p.nonce)));
        assert!(csp.starts_with("default-src 'none'"));
    }
}

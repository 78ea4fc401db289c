//! The reading half of the loop's FastCGI exchange (`evented.rs`): records from the
//! backend, split anywhere, turned into client output (STDOUT parsed as a CGI response,
//! STDERR logged, END_REQUEST ending the answer) and into what the loop does next.

use super::{FcgiExchange, FcgiFed};
use crate::cgi::head::{self, Kind, Parsed};
use crate::fastcgi::record;
use gearshift_core::output::Batch;
use gearshift_http::date::DATE_LEN;

impl FcgiExchange {
    /// Backend bytes: records, split anywhere; STDOUT parsed as a CGI response and relayed.
    pub fn feed(&mut self, data: &[u8], date: &[u8; DATE_LEN], out: &mut Batch) -> FcgiFed {
        self.received = true;
        if self.probe {
            self.rbuf.extend_from_slice(data);
            let Some(answer) = crate::fastcgi::conn::values_answer(&self.rbuf) else {
                return FcgiFed::More;
            };
            self.probe_ended(answer);
            return FcgiFed::Probed;
        }
        if self.rbuf.is_empty() {
            let (used, fed) = self.records(data, date, out);
            if fed == FcgiFed::More {
                self.rbuf.extend_from_slice(&data[used..]);
            }
            return fed;
        }
        let mut buf = std::mem::take(&mut self.rbuf);
        buf.extend_from_slice(data);
        let (used, fed) = self.records(&buf, date, out);
        if fed == FcgiFed::More {
            buf.drain(..used);
            self.rbuf = buf;
        }
        fed
    }

    /// The complete records at the start of `buf`: the bytes they took and the outcome.
    fn records(&mut self, buf: &[u8], date: &[u8; DATE_LEN], out: &mut Batch) -> (usize, FcgiFed) {
        let mut pos = 0;
        loop {
            let r = match record::parse(&buf[pos..]) {
                Ok(Some(r)) => r,
                Ok(None) => return (pos, FcgiFed::More),
                Err(why) => return (pos, self.bad(why)),
            };
            let content = r.content(&buf[pos..]);
            pos += r.total;
            // Only this request's records and management ones (id 0) may come.
            let kind = match r.id {
                0 => 0,
                id if id == self.id => r.kind,
                _ => return (pos, self.bad("record of another request")),
            };
            match kind {
                record::STDOUT => {
                    if let Some(fed) = self.stdout(content, date, out) {
                        return (pos, fed);
                    }
                }
                record::STDERR => {
                    crate::fastcgi::exchange::log_stderr(&mut self.err_line, &self.path, content)
                }
                record::END_REQUEST => {
                    let Some((_, status)) = record::end_request(content) else {
                        return (pos, self.bad("short END_REQUEST"));
                    };
                    return (pos, self.end(status, pos == buf.len(), date, out));
                }
                0 => {}
                _ => return (pos, self.bad("record of an unexpected type")),
            }
        }
    }

    /// STDOUT content: the header section until it is complete, then the body.
    fn stdout(
        &mut self,
        content: &[u8],
        date: &[u8; DATE_LEN],
        out: &mut Batch,
    ) -> Option<FcgiFed> {
        if self.enc.started() {
            self.enc.body(content, out);
            return None;
        }
        self.head_buf.extend_from_slice(content);
        match head::parse(&self.head_buf) {
            Parsed::Partial if self.head_buf.len() >= gearshift_core::defaults::cgi::MAX_HEADER => {
                Some(self.bad("header section too large"))
            }
            Parsed::Partial => None,
            Parsed::Malformed(why) => Some(self.bad(why)),
            Parsed::Done(_, Kind::LocalRedirect(loc)) => Some(FcgiFed::Redirect(loc)),
            Parsed::Done(
                n,
                Kind::Document {
                    status,
                    fields,
                    length,
                },
            ) => {
                let refs: Vec<(&[u8], &[u8])> =
                    fields.iter().map(|(k, v)| (&k[..], &v[..])).collect();
                self.enc.head(status, &refs, length, date, out);
                let rest = std::mem::take(&mut self.head_buf);
                self.enc.body(&rest[n..], out);
                None
            }
        }
    }

    /// END_REQUEST with its protocol status; `nothing_left`: no byte followed it.
    fn end(
        &mut self,
        status: u8,
        nothing_left: bool,
        date: &[u8; DATE_LEN],
        out: &mut Batch,
    ) -> FcgiFed {
        crate::fastcgi::exchange::flush_stderr(&mut self.err_line, &self.path);
        if status == record::CANT_MPX_CONN {
            tracing::warn!(target: "fastcgi", "the backend answered FCGI_CANT_MPX_CONN: asking FCGI_GET_VALUES again");
            self.pool.forget_values();
        }
        if status != record::REQUEST_COMPLETE {
            tracing::error!(target: "fastcgi", path = %String::from_utf8_lossy(&self.path), "request refused by the backend: {}", record::protocol_status_name(status));
            let code = if status == record::OVERLOADED {
                503
            } else {
                502
            };
            match self.unanswered() {
                true => self.error(Some(code), date, out),
                false => self.broken = true,
            }
            return FcgiFed::Done { reusable: false };
        }
        if self.unanswered() {
            return self.bad("no header section before END_REQUEST");
        }
        if !self.enc.finish(out) {
            self.broken = true;
        }
        FcgiFed::Done {
            reusable: nothing_left && !self.sending() && !self.broken,
        }
    }

    /// A malformed answer: 502 before the head, else a cut answer.
    fn bad(&mut self, why: &str) -> FcgiFed {
        tracing::error!(target: "fastcgi", path = %String::from_utf8_lossy(&self.path), "malformed answer: {why}");
        match self.unanswered() {
            true => FcgiFed::Bad,
            false => FcgiFed::Cut,
        }
    }

    /// The backend closed its side (or failed) before END_REQUEST.
    pub fn eof(&mut self) -> FcgiFed {
        if self.probe {
            self.probe_ended(None);
            return FcgiFed::Probed;
        }
        crate::fastcgi::exchange::flush_stderr(&mut self.err_line, &self.path);
        if self.unanswered() {
            return FcgiFed::Early;
        }
        tracing::error!(target: "fastcgi", path = %String::from_utf8_lossy(&self.path), "backend closed the connection before END_REQUEST");
        FcgiFed::Cut
    }
}

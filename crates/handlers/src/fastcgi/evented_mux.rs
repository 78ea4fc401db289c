//! The loop's FastCGI exchange (`evented.rs`) on a connection shared with other requests,
//! when the backend multiplexes (FCGI_MPXS_CONNS=1, `multiplex = "auto"`): the loop
//! (eventloop/fcgi_mux.rs) gives it a request id on one of its connections, takes its
//! records whole (`to_send`, each slice whole records, so records of different requests
//! interleave only at record boundaries) and hands it back the records of its id. FastCGI
//! has no per-request flow control and the loop must go on reading a shared connection
//! whatever one client does, so the answer of a client that does not keep up is always
//! held (response buffering: memory, then a temporary file, `Held`), bounded by
//! `MUX_BUFFER` and `MUX_MAX_SPILL` unless `[fastcgi]`'s response buffering says more;
//! beyond that the request is given up (the loop aborts it), as the blocking path's
//! `inbox` does.

use super::FcgiExchange;
use crate::fastcgi::conn::ConnPool;
use crate::fastcgi::mux::Limits;
use crate::fastcgi::record;
use crate::stream::spool::{Buffering, Held};
use gearshift_core::defaults::fastcgi as d;
use std::sync::Arc;

impl FcgiExchange {
    /// Make this a multiplexed exchange within `limits`, its answer always held for a
    /// slow client (`buffering`: `[fastcgi]`'s).
    pub(super) fn multiplexed(&mut self, limits: Limits, buffering: Option<Buffering>) {
        let b = match buffering.filter(|b| b.response) {
            Some(b) => Buffering {
                response_buffer_bytes: b.response_buffer_bytes.max(d::MUX_BUFFER as u64),
                max_temp_file_bytes: b.max_temp_file_bytes.max(d::MUX_MAX_SPILL),
                ..b
            },
            None => Buffering {
                response: true,
                response_buffer_bytes: d::MUX_BUFFER as u64,
                max_temp_file_bytes: d::MUX_MAX_SPILL,
                ..Buffering::default()
            },
        };
        self.buffer = Some(Held::new(&b));
        self.mux = Some(limits);
    }

    /// For a multiplexing backend: the most connections a loop opens to it and the most
    /// requests on one (None: one request per connection).
    pub fn multiplexed_limits(&self) -> Option<(usize, usize)> {
        self.mux.map(|l| (l.conns, l.per_conn))
    }

    /// Its request id.
    pub fn id(&self) -> u16 {
        self.id
    }

    /// Give the request id `id` (its records not sent yet carry it from now on).
    pub fn set_id(&mut self, id: u16) {
        self.id = id;
        let mut pos = 0;
        while let Ok(Some(r)) = record::parse(&self.recs[pos..]) {
            self.recs[pos + 2..pos + 4].copy_from_slice(&id.to_be_bytes());
            pos += r.total;
        }
    }

    /// The backend this exchange asks.
    pub fn backend(&self) -> &super::Backend {
        &self.backend
    }

    /// A multiplexed connection to the backend died: its FCGI_GET_VALUES answer is asked
    /// again before the next request (it may have been replaced by one that does not
    /// multiplex), as the blocking path's `mux` does.
    pub fn backend_lost(&self) {
        self.pool.forget_values();
    }
}

impl FcgiExchange {
    /// Every shared connection stayed full for the whole wait: 503, try again later.
    pub fn no_room(&mut self) {
        gearshift_core::warn_limited!("fastcgi: every multiplexed connection full: 503");
        self.retry_after = true;
        self.give_up(503);
    }

    /// A handle on the backend's FCGI_GET_VALUES answer, for a shared connection.
    pub fn mux_backend(&self) -> MuxBackend {
        MuxBackend(self.pool.clone())
    }
}

/// A backend's FCGI_GET_VALUES answer as a loop's shared connection sees it.
#[derive(Clone)]
pub struct MuxBackend(Arc<ConnPool>);

impl MuxBackend {
    /// A shared connection died: the answer is asked again before the next request.
    pub fn lost(&self) {
        self.0.forget_values();
    }
}

/// A whole record at the start of a shared connection's input, as its demultiplexer
/// routes it: the request id, whether it ends that request, and its length with padding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MuxRecord {
    pub id: u16,
    pub ends: bool,
    pub len: usize,
}

/// The record at the start of `buf`: None while incomplete, Err when the stream cannot
/// be read (the connection is then lost for every request on it).
pub fn mux_record(buf: &[u8]) -> Result<Option<MuxRecord>, &'static str> {
    Ok(record::parse(buf)?.map(|r| MuxRecord {
        id: r.id,
        ends: r.kind == record::END_REQUEST && r.id != 0,
        len: r.total,
    }))
}

/// FCGI_ABORT_REQUEST for request `id`.
pub fn abort_record(id: u16) -> Vec<u8> {
    let mut out = Vec::with_capacity(record::HEADER_LEN);
    record::end_stream(&mut out, record::ABORT_REQUEST, id);
    out
}

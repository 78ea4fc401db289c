//! Partial answers (206): one range, or several as multipart/byteranges, of an entry's
//! body (always identity bytes or a precompressed sibling's, never a variant compressed on
//! the fly), and the body pieces every answer pushes.

use super::entry::Entry;
use gearshift_core::output::{Batch, Piece};
use gearshift_core::respond::{self, Ctx, Outcome};
use gearshift_http::range::{self, ByteRange};
use gearshift_http::response::{header, header_u64};
use std::sync::Arc;

/// 206 for one range, or multipart/byteranges for several.
pub(super) fn partial(entry: &Arc<Entry>, rs: &[ByteRange], ctx: &Ctx, out: &mut Batch) -> Outcome {
    let size = entry.len;
    respond::prefix(out, ctx, 206);
    let start = out.scratch.len();
    if let [r] = rs {
        header(
            &mut out.scratch,
            "Content-Type",
            entry.content_type.as_bytes(),
        );
        out.scratch.extend_from_slice(&entry.rep_headers);
        header(
            &mut out.scratch,
            "Content-Range",
            range::content_range(*r, size).as_bytes(),
        );
        header_u64(&mut out.scratch, "Content-Length", r.len());
        out.scratch.extend_from_slice(b"\r\n");
        out.extend_scratch_from(start);
        if !ctx.head_only {
            push_body(out, entry, *r, size);
        }
        return Outcome {
            status: 206,
            body_bytes: if ctx.head_only { 0 } else { r.len() },
        };
    }
    let tag = &entry.etag[1..entry.etag.len() - 1];
    let boundary = format!(
        "gearshift-{}",
        String::from_utf8_lossy(tag).replace(['.', '-'], "")
    );
    let mp = range::multipart(rs, size, &entry.content_type, &boundary);
    header(&mut out.scratch, "Content-Type", mp.content_type.as_bytes());
    out.scratch.extend_from_slice(&entry.rep_headers);
    header_u64(&mut out.scratch, "Content-Length", mp.body_len);
    out.scratch.extend_from_slice(b"\r\n");
    out.extend_scratch_from(start);
    if !ctx.head_only {
        for (r, head) in rs.iter().zip(&mp.part_heads) {
            out.push_bytes(head);
            push_body(out, entry, *r, size);
        }
        out.push_bytes(&mp.trailer);
    }
    Outcome {
        status: 206,
        body_bytes: if ctx.head_only { 0 } else { mp.body_len },
    }
}

pub(super) fn push_body(out: &mut Batch, entry: &Entry, r: ByteRange, size: u64) {
    if size == 0 {
        return;
    }
    if let Some(body) = &entry.body {
        out.push(Piece::Mem(body.slice(r.start as usize..=r.end as usize)));
    } else if let Some(file) = &entry.file {
        out.push(Piece::File {
            file: file.clone(),
            offset: r.start,
            len: r.len(),
        });
    }
}

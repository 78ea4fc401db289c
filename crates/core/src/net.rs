//! Binding the listening socket, the same way for the public listener and the admin one.

use crate::defaults;
use std::net::{SocketAddr, TcpListener};

/// Bind the listening socket: SO_REUSEADDR (restart while old connections sit in
/// TIME_WAIT), no SO_REUSEPORT (a second server on the port must fail, not share it).
pub fn bind(addr: SocketAddr) -> Result<TcpListener, String> {
    use socket2::{Domain, Socket, Type};
    let err = |e: std::io::Error| format!("cannot listen on {addr}: {e}");
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM.cloexec(), None).map_err(err)?;
    sock.set_reuse_address(true).map_err(err)?;
    sock.bind(&addr.into()).map_err(err)?;
    sock.listen(defaults::BACKLOG).map_err(err)?;
    Ok(sock.into())
}

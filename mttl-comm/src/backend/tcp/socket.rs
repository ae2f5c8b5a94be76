//! Socket helpers shared by the TCP backend's modules: options set on a
//! link, and telling "would block" from a real error. A leaf: it imports
//! no sibling module.

use std::io;

/// Asks for a send buffer of `bytes` on `link` (`SO_SNDBUF`; Linux doubles
/// it for its bookkeeping and caps it at `net.core.wmem_max`).
///
/// Why not the kernel's automatic sizing: it grows a busy link's buffer to
/// several MiB, and a stream then keeps that many bytes in flight, in pages
/// written by the sender and read by the receiver long after, out of both
/// cores' caches. The default request, 256 KiB (512 KiB once doubled),
/// still covers a LAN's bandwidth-delay product and keeps the bytes in
/// flight cache-resident, which streams markedly faster over loopback.
/// Links with a large bandwidth-delay product (long distances) want
/// `MTTL_TCP_SNDBUF=0`.
pub(super) fn set_send_buffer(link: &std::net::TcpStream, bytes: usize) -> io::Result<()> {
    let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    set_socket_option(link, libc::SOL_SOCKET, libc::SO_SNDBUF, value)
}

/// Sets the integer socket option `name` of `level` on `socket`.
pub(super) fn set_socket_option(
    socket: &impl std::os::fd::AsRawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: `value` is a live c_int for the duration of the call and its
    // size is passed with it; the descriptor is `socket`'s own, open while
    // it is borrowed.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast::<libc::c_void>(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Whether a non-blocking socket call failed only because it would block.
pub(super) fn would_block(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::WouldBlock
}

//! One TCP socket's inode by its addresses, asked of the kernel directly: a
//! `NETLINK_SOCK_DIAG` exact lookup (the interface `ss` uses) costs one round trip,
//! where reading `/proc/net/tcp` has the kernel print every socket of the network
//! namespace (13 to 22 ms per connection on a debug build with a few hundred
//! processes, `benches/peer_lookup.rs`).
//!
//! Invariant: an answer is the inode of the socket whose local address is exactly
//! the one asked for and whose remote address is exactly the other (the reply's
//! addresses are checked against the request); `None` whenever the kernel cannot
//! say (no such socket, the interface missing or refused, no answer within 100 ms),
//! and the caller then reads the listing instead.

use nix::libc;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `SOCK_DIAG_BY_FAMILY`: the request and reply type for inet sockets.
const BY_FAMILY: u16 = 20;
const NLM_F_REQUEST: u16 = 1;
/// A netlink header, then `inet_diag_req_v2`: family, protocol, extensions, pad,
/// states, and the socket's id (ports, addresses, interface, cookie).
const REQUEST_LEN: usize = 16 + 8 + 48;
/// Where the id starts in a request (after the netlink header), and in a reply's
/// message after its header (`inet_diag_msg`: family, state, timer, retransmits, then
/// the id); the reply's inode follows the id and four u32s.
const REQ_ID: usize = 24;
const MSG_ID: usize = 4;
const MSG_INODE: usize = MSG_ID + 48 + 16;

/// The inode of the TCP socket whose local address is `local` and remote address
/// `remote`, both on this host's network namespace.
pub fn inode(local: SocketAddr, remote: SocketAddr) -> Option<u64> {
    match (local.ip(), remote.ip()) {
        (IpAddr::V4(l), IpAddr::V4(r)) => {
            // An IPv4 connection, or one made from an IPv6 socket with mapped addresses.
            ask(libc::AF_INET, local, remote).or_else(|| {
                let map = |a: SocketAddr, ip: std::net::Ipv4Addr| {
                    SocketAddr::new(IpAddr::V6(ip.to_ipv6_mapped()), a.port())
                };
                ask(libc::AF_INET6, map(local, l), map(remote, r))
            })
        }
        (IpAddr::V6(_), IpAddr::V6(_)) => ask(libc::AF_INET6, local, remote),
        _ => None,
    }
}

/// The id's bytes: ports in network order, then each address in 16 bytes.
fn id(local: SocketAddr, remote: SocketAddr) -> [u8; 36] {
    let mut id = [0u8; 36];
    id[0..2].copy_from_slice(&local.port().to_be_bytes());
    id[2..4].copy_from_slice(&remote.port().to_be_bytes());
    let bytes = |ip: IpAddr| -> [u8; 16] {
        match ip {
            IpAddr::V4(v4) => {
                let mut b = [0u8; 16];
                b[..4].copy_from_slice(&v4.octets());
                b
            }
            IpAddr::V6(v6) => v6.octets(),
        }
    };
    id[4..20].copy_from_slice(&bytes(local.ip()));
    id[20..36].copy_from_slice(&bytes(remote.ip()));
    id
}

fn request(family: i32, local: SocketAddr, remote: SocketAddr) -> [u8; REQUEST_LEN] {
    let mut r = [0u8; REQUEST_LEN];
    r[0..4].copy_from_slice(&(REQUEST_LEN as u32).to_ne_bytes());
    r[4..6].copy_from_slice(&BY_FAMILY.to_ne_bytes());
    r[6..8].copy_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    r[8..12].copy_from_slice(&1u32.to_ne_bytes());
    r[16] = family as u8;
    r[17] = libc::IPPROTO_TCP as u8;
    // Every state.
    r[20..24].copy_from_slice(&u32::MAX.to_ne_bytes());
    r[REQ_ID..REQ_ID + 36].copy_from_slice(&id(local, remote));
    // Interface 0 (any), and no cookie to match.
    r[REQ_ID + 40..REQ_ID + 48].copy_from_slice(&[0xff; 8]);
    r
}

/// The inode in a reply to the request for `want` (an id), if the reply is that
/// socket's.
fn parse(reply: &[u8], want: &[u8; 36]) -> Option<u64> {
    let len = u32::from_ne_bytes(reply.get(0..4)?.try_into().ok()?) as usize;
    let kind = u16::from_ne_bytes(reply.get(4..6)?.try_into().ok()?);
    if kind != BY_FAMILY || len > reply.len() || len < 16 + MSG_INODE + 4 {
        return None;
    }
    let msg = &reply[16..len];
    if msg.get(MSG_ID..MSG_ID + 36)? != want.as_slice() {
        return None;
    }
    let inode = u32::from_ne_bytes(msg.get(MSG_INODE..MSG_INODE + 4)?.try_into().ok()?);
    (inode != 0).then_some(u64::from(inode))
}

fn ask(family: i32, local: SocketAddr, remote: SocketAddr) -> Option<u64> {
    // SAFETY: a plain socket(2) call; the descriptor is owned at once.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::NETLINK_SOCK_DIAG,
        )
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: `fd` was just returned by socket(2) and is owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let timeout = libc::timeval {
        tv_sec: 0,
        tv_usec: 100_000,
    };
    // SAFETY: setsockopt(2) reads `size_of::<timeval>()` bytes from `timeout`.
    let set = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&timeout as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if set != 0 {
        return None;
    }
    let req = request(family, local, remote);
    // SAFETY: the kernel is the default destination of an unbound netlink socket;
    // send(2) reads `req.len()` bytes from `req`.
    let sent = unsafe { libc::send(fd.as_raw_fd(), req.as_ptr().cast(), req.len(), 0) };
    if sent != req.len() as isize {
        return None;
    }
    let mut buf = [0u8; 512];
    // SAFETY: recv(2) writes at most `buf.len()` bytes into `buf`.
    let got = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    let got = usize::try_from(got).ok()?;
    parse(&buf[..got], &id(local, remote))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    /// The inode `/proc/self/fd` gives for a socket of this process.
    fn inode_of(s: &TcpStream) -> u64 {
        let link = std::fs::read_link(format!("/proc/self/fd/{}", s.as_raw_fd())).unwrap();
        let text = link.to_string_lossy().into_owned();
        text.trim_start_matches("socket:[")
            .trim_end_matches(']')
            .parse()
            .unwrap()
    }

    /// Whether the host has an IPv6 loopback at all (the kernel lists `::1` in
    /// `/proc/net/if_inet6`); where it has one, the IPv6 tests must run and pass.
    fn has_ipv6_loopback() -> bool {
        std::fs::read_to_string("/proc/net/if_inet6").is_ok_and(|t| {
            t.lines()
                .any(|l| l.starts_with("00000000000000000000000000000001"))
        })
    }

    fn round_trip(bind: &str) -> Option<(TcpStream, TcpStream)> {
        let server = TcpListener::bind(bind).ok()?;
        let client = TcpStream::connect(server.local_addr().unwrap()).unwrap();
        let (accepted, _) = server.accept().unwrap();
        Some((client, accepted))
    }

    #[test]
    fn the_kernel_names_the_client_end_of_a_loopback_connection() {
        let (client, accepted) = round_trip("127.0.0.1:0").unwrap();
        let (local, remote) = (client.local_addr().unwrap(), client.peer_addr().unwrap());
        assert_eq!(inode(local, remote), Some(inode_of(&client)));
        // The server's end, asked the other way round, is the other socket.
        assert_eq!(inode(remote, local), Some(inode_of(&accepted)));
        // No such connection: no answer, never another socket's.
        let elsewhere = SocketAddr::new(local.ip(), local.port().wrapping_add(1).max(1));
        assert_eq!(inode(elsewhere, remote), None);
    }

    #[test]
    fn an_ipv6_connection_too_where_the_host_has_ipv6() {
        if !has_ipv6_loopback() {
            eprintln!("skipped: this host has no IPv6 loopback");
            return;
        }
        let (client, _accepted) = round_trip("[::1]:0").expect("::1 is listed, so it binds");
        let (local, remote) = (client.local_addr().unwrap(), client.peer_addr().unwrap());
        assert_eq!(inode(local, remote), Some(inode_of(&client)));
    }

    /// An IPv6 socket connected to an IPv4-mapped address is asked for as the IPv4
    /// addresses its peer sees (the console canonicalises them).
    #[test]
    fn an_ipv6_socket_on_a_mapped_address_is_found_from_its_ipv4_addresses() {
        if !has_ipv6_loopback() {
            eprintln!("skipped: this host has no IPv6 loopback");
            return;
        }
        let server = TcpListener::bind("[::]:0").expect("::1 is listed, so [::] binds");
        let port = server.local_addr().unwrap().port();
        let client = TcpStream::connect(format!("[::ffff:127.0.0.1]:{port}")).unwrap();
        let _accepted = server.accept().unwrap();
        let v4 = |a: SocketAddr| SocketAddr::new(a.ip().to_canonical(), a.port());
        let (local, remote) = (client.local_addr().unwrap(), client.peer_addr().unwrap());
        assert!(local.is_ipv6(), "{local}");
        assert_eq!(inode(v4(local), v4(remote)), Some(inode_of(&client)));
    }

    #[test]
    fn a_reply_for_another_socket_is_refused() {
        let a: SocketAddr = "127.0.0.1:1000".parse().unwrap();
        let b: SocketAddr = "127.0.0.1:2000".parse().unwrap();
        let mut reply = vec![0u8; 16 + MSG_INODE + 4];
        let len = reply.len() as u32;
        reply[0..4].copy_from_slice(&len.to_ne_bytes());
        reply[4..6].copy_from_slice(&BY_FAMILY.to_ne_bytes());
        reply[16 + MSG_ID..16 + MSG_ID + 36].copy_from_slice(&id(b, a));
        reply[16 + MSG_INODE..].copy_from_slice(&77u32.to_ne_bytes());
        assert_eq!(parse(&reply, &id(a, b)), None);
        assert_eq!(parse(&reply, &id(b, a)), Some(77));
        // Cut short, or an error message: no answer.
        assert_eq!(parse(&reply[..40], &id(b, a)), None);
        reply[4..6].copy_from_slice(&2u16.to_ne_bytes());
        assert_eq!(parse(&reply, &id(b, a)), None);
    }
}

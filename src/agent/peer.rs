//! Whether the other end of a TCP connection is one of the fleet's agents: the
//! console answers only its operator, and a lane's agent (confined or not) could
//! otherwise reach it on loopback and act as the operator there (steer other lanes,
//! take over claims, lift holds, raise budgets, type into terminals).
//!
//! Theory: the client end of a connection made on this host is the TCP socket whose
//! local address is the server's peer and whose remote address is the server's own;
//! the kernel names its inode (`super::sock_diag`'s exact lookup, or the listings of
//! every socket in `/proc/net/tcp` and `/proc/net/tcp6` where that is unavailable),
//! and a process holding it has a descriptor that links to `socket:[INODE]`. Its holders and
//! their ancestors are read from `/proc/PID/stat` and `/proc/PID/cmdline`; a `spice
//! agent-shim` among them that is not also above the server means the connection
//! was made inside a lane. (A console an agent started for itself, as when a fleet
//! develops spice, sits under that agent's shim: it answers that agent, and refuses
//! the agents of any fleet nested under it.) An agent
//! cannot leave its shim's descent (the shim is a subreaper: orphans come back to
//! it, and they die with it), and a confined agent cannot rewrite the shim's memory
//! (Landlock's ptrace scope).
//!
//! Invariants:
//! - "not an agent" needs the processes holding the client end to be found and none
//!   to descend from a shim; when none is found, every process whose descriptors
//!   cannot be read (another user's, or one that made itself non-dumpable to hide
//!   them) counts as a holder if it descends from a shim.
//! - A client on another host (no such entry here) is not an agent of this host's
//!   fleet; its requests meet the console's other guards.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;

/// The argument that names an agent shim's command line (`spice agent-shim …`).
const SHIM: &str = "agent-shim";

/// Ancestors walked at most (a chain longer than this is not a process tree).
const MAX_DEPTH: usize = 256;

/// The pid of a lane's process holding the client end of the connection from `peer`
/// to `local` (under a shim that is not above this process), or `None` when none
/// does.
pub fn agent_of(peer: SocketAddr, local: SocketAddr) -> Option<u32> {
    let peer = canonical(peer);
    let local = canonical(local);
    // The kernel's exact lookup, else its listings (slower: every socket printed).
    let inode = super::sock_diag::inode(peer, local).or_else(|| {
        ["/proc/net/tcp", "/proc/net/tcp6"].iter().find_map(|f| {
            let text = std::fs::read_to_string(f).ok()?;
            client_inode(&text, peer, local)
        })
    })?;
    let (found, unreadable) = holders(Path::new("/proc"), inode);
    // Only when no holder could be seen may one be hiding among the unreadable.
    let candidates = if found.is_empty() { unreadable } else { found };
    in_a_lane(candidates, &shims_above(std::process::id()))
}

/// The first of `pids` under a shim that is not one of `ours`.
fn in_a_lane(pids: Vec<u32>, ours: &[u32]) -> Option<u32> {
    pids.into_iter()
        .find(|pid| shims_above(*pid).iter().any(|s| !ours.contains(s)))
}

/// An IPv4-mapped IPv6 address as the IPv4 one it stands for.
fn canonical(a: SocketAddr) -> SocketAddr {
    SocketAddr::new(a.ip().to_canonical(), a.port())
}

/// The inode of the socket in a `/proc/net/tcp{,6}` listing whose local address is
/// `client` and remote address `server`.
fn client_inode(listing: &str, client: SocketAddr, server: SocketAddr) -> Option<u64> {
    listing.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (local, remote, inode) = (f.get(1)?, f.get(2)?, f.get(9)?);
        (address(local)? == client && address(remote)? == server)
            .then(|| inode.parse().ok())
            .flatten()
    })
}

/// `HEXIP:HEXPORT` as the kernel prints it: the address's bytes as 32-bit words in
/// the machine's byte order.
fn address(text: &str) -> Option<SocketAddr> {
    let (ip, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let words: Option<Vec<[u8; 4]>> = (0..ip.len() / 8)
        .map(|i| {
            let w = u32::from_str_radix(ip.get(i * 8..i * 8 + 8)?, 16).ok()?;
            Some(w.to_ne_bytes())
        })
        .collect();
    let bytes: Vec<u8> = words?.concat();
    let ip = match bytes.len() {
        4 => IpAddr::V4(Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3])),
        16 => {
            let b: [u8; 16] = bytes.try_into().ok()?;
            IpAddr::V6(Ipv6Addr::from(b))
        }
        _ => return None,
    };
    Some(canonical(SocketAddr::new(ip, port)))
}

/// The processes under `proc` with a descriptor on socket `inode`, and those whose
/// descriptors could not be read.
fn holders(proc: &Path, inode: u64) -> (Vec<u32>, Vec<u32>) {
    let target = format!("socket:[{inode}]");
    let mut found = Vec::new();
    let mut unreadable = Vec::new();
    let Ok(entries) = std::fs::read_dir(proc) else {
        return (found, unreadable);
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let fds = match std::fs::read_dir(e.path().join("fd")) {
            Ok(fds) => fds,
            Err(err) if err.kind() == std::io::ErrorKind::PermissionDenied => {
                unreadable.push(pid);
                continue;
            }
            // Gone meanwhile.
            Err(_) => continue,
        };
        let holds = fds.flatten().any(|fd| {
            std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == target.as_str())
        });
        if holds {
            found.push(pid);
        }
    }
    (found, unreadable)
}

/// The agent shims `pid` is or descends from, nearest first.
fn shims_above(pid: u32) -> Vec<u32> {
    let mut shims = Vec::new();
    let mut at = pid;
    for _ in 0..MAX_DEPTH {
        if is_shim(at) {
            shims.push(at);
        }
        match super::proc::proc_stat(at) {
            Ok(Some(s)) if s.ppid > 1 => at = s.ppid as u32,
            _ => break,
        }
    }
    shims
}

fn is_shim(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .ok()
        .is_some_and(|c| c.split(|b| *b == 0).nth(1) == Some(SHIM.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn addresses_read_as_the_kernel_prints_them() {
        let v4 = Ipv4Addr::new(127, 0, 0, 1);
        let word = u32::from_ne_bytes(v4.octets());
        let text = format!("{word:08X}:1F90");
        assert_eq!(address(&text), Some(SocketAddr::new(v4.into(), 8080)));
        let mapped = v4.to_ipv6_mapped().octets();
        let words: String = mapped
            .chunks(4)
            .map(|c| format!("{:08X}", u32::from_ne_bytes(c.try_into().unwrap())))
            .collect();
        assert_eq!(
            address(&format!("{words}:0050")),
            Some(SocketAddr::new(v4.into(), 80))
        );
        for bad in ["", "zz:1", "0100007F", "0100007F:zz", "0100:0050"] {
            assert_eq!(address(bad), None, "{bad:?}");
        }
    }

    /// A connection made from under a process whose command line reads like a shim's
    /// (`bash agent-shim`, and a child of it) is a lane's, unless that shim is also
    /// above the server.
    #[test]
    fn a_connection_from_under_a_shim_is_a_lanes_unless_the_server_is_under_it_too() {
        let dir = tempfile::tempdir().unwrap();
        let server = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = server.local_addr().unwrap().port();
        std::fs::write(
            dir.path().join(SHIM),
            // Not the script's last command, so the shim forks it rather than exec it.
            format!("bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}; sleep 30'\nexit 0\n"),
        )
        .unwrap();
        let mut shim = std::process::Command::new("bash")
            .arg(SHIM)
            .current_dir(dir.path())
            .spawn()
            .unwrap();
        let (_accepted, peer) = server.accept().unwrap();
        let local = server.local_addr().unwrap();
        let found = agent_of(peer, local);
        let listing = std::fs::read_to_string("/proc/net/tcp").unwrap();
        let inode = client_inode(&listing, peer, local).unwrap();
        let (holders, _) = holders(Path::new("/proc"), inode);
        let in_nested = in_a_lane(holders.clone(), &[shim.id()]);
        let _ = std::process::Command::new("pkill")
            .args(["-P", &shim.id().to_string()])
            .status();
        shim.kill().unwrap();
        let _ = shim.wait();
        let holder = found.expect("the connection is a lane's");
        assert!(holders.contains(&holder), "{holders:?} {holder}");
        assert_ne!(holder, shim.id(), "the holder is the shim's child");
        assert_eq!(in_nested, None);
    }

    /// A connection this test process makes is found, held by this process, and is
    /// no agent's: the test runner descends from no shim.
    #[test]
    fn a_connection_of_this_process_is_found_and_is_no_agents() {
        let server = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(server.local_addr().unwrap()).unwrap();
        let (_accepted, peer) = server.accept().unwrap();
        let local = server.local_addr().unwrap();
        assert_eq!(peer, client.local_addr().unwrap());
        let listing = std::fs::read_to_string("/proc/net/tcp").unwrap();
        let inode = client_inode(&listing, peer, local).expect("the client end is listed");
        let (found, _) = holders(Path::new("/proc"), inode);
        assert!(found.contains(&std::process::id()), "{found:?}");
        assert_eq!(agent_of(peer, local), None);
    }
}

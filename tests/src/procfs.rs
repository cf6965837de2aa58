//! Just enough of Linux's /proc to check what the control plane exposes: the TCP sockets a
//! process listens on, and whether a PID still names the process it did.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;

/// `st` of a listening socket in /proc/net/tcp{,6}.
const TCP_LISTEN: &str = "0A";

/// The TCP addresses `pid` listens on (IPv4 and IPv6).
pub fn tcp_listeners(pid: u32) -> std::io::Result<Vec<SocketAddr>> {
    let mut inodes = Vec::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd"))? {
        // A descriptor may close while we look: skip it.
        let Ok(target) = std::fs::read_link(entry?.path()) else {
            continue;
        };
        let target = target.to_string_lossy();
        if let Some(inode) = target.strip_prefix("socket:[").and_then(|s| s.strip_suffix(']')) {
            inodes.push(inode.to_owned());
        }
    }
    let mut listeners = Vec::new();
    // The process's own view, in case it runs in another network namespace.
    for table in ["tcp", "tcp6"] {
        let text = std::fs::read_to_string(Path::new(&format!("/proc/{pid}/net/{table}")))?;
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(state), Some(inode)) = (fields.get(1), fields.get(3), fields.get(9))
            else {
                continue;
            };
            if *state == TCP_LISTEN
                && inodes.iter().any(|i| i == inode)
                && let Some(addr) = parse_address(local)
            {
                listeners.push(addr);
            }
        }
    }
    Ok(listeners)
}

/// Parses `0100007F:1F90` (IPv4) or a 32-hex-digit IPv6 address and port. The kernel prints the
/// address as 32-bit words in host byte order, the port as a plain number.
fn parse_address(field: &str) -> Option<SocketAddr> {
    let (addr, port) = field.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |hex: &str| u32::from_str_radix(hex, 16).ok().map(u32::to_ne_bytes);
    let ip = match addr.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(addr)?)),
        32 => {
            let mut bytes = [0u8; 16];
            for (i, chunk) in bytes.chunks_mut(4).enumerate() {
                chunk.copy_from_slice(&word(addr.get(i * 8..i * 8 + 8)?)?);
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// Whether `addr` is reachable only from this machine: 127.0.0.0/8, ::1, or ::ffff:127.x.y.z.
pub fn is_loopback(addr: &SocketAddr) -> bool {
    match addr.ip() {
        IpAddr::V4(ip) => ip.is_loopback(),
        IpAddr::V6(ip) => ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
    }
}

/// The start time of `pid` (clock ticks since boot), which tells a process from a later one
/// that reuses its PID; `None` once the process is gone (zombies count as gone).
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces and parentheses: fields are counted after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // fields[0] is field 3 (state); starttime is field 22.
    if fields.first() == Some(&"Z") {
        return None;
    }
    fields.get(19)?.parse().ok()
}

/// Whether the process that had `start_time` under `pid` still runs.
pub fn is_running(pid: u32, start_time_then: u64) -> bool {
    start_time(pid) == Some(start_time_then)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kernel_socket_addresses() {
        let cases = [
            ("0100007F:1F90", "127.0.0.1:8080"),
            ("00000000:0050", "0.0.0.0:80"),
            ("00000000000000000000000001000000:2379", "[::1]:9081"),
            ("0000000000000000FFFF00000100007F:01BB", "[::ffff:127.0.0.1]:443"),
            ("00000000000000000000000000000000:0016", "[::]:22"),
        ];
        for (field, want) in cases {
            assert_eq!(parse_address(field), want.parse().ok(), "{field}");
        }
        assert_eq!(parse_address("zz:1"), None);
    }

    #[test]
    fn loopback_addresses() {
        for (addr, want) in [
            ("127.0.0.1:1", true),
            ("127.1.2.3:1", true),
            ("[::1]:1", true),
            ("[::ffff:127.0.0.1]:1", true),
            ("0.0.0.0:1", false),
            ("[::]:1", false),
            ("10.1.2.3:1", false),
        ] {
            let addr: SocketAddr = addr.parse().expect("addr");
            assert_eq!(is_loopback(&addr), want, "{addr}");
        }
    }

    #[test]
    fn sees_a_listener_of_this_process() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let found = tcp_listeners(std::process::id()).expect("procfs");
        assert!(found.contains(&addr), "{addr} not in {found:?}");
        let me = start_time(std::process::id()).expect("own start time");
        assert!(is_running(std::process::id(), me));
        assert!(!is_running(std::process::id(), me + 1));
    }
}

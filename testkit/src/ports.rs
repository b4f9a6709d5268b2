//! Loopback ports for private servers.
//!
//! A port the OS hands out for `bind(0)` lies in the kernel's ephemeral
//! range, the range every outgoing connection also takes its local port
//! from. Between the probe and the server's own `bind`, a busy test run
//! (hundreds of client connections, a cluster's bus links) can take that
//! port, and the server exits at start. So these ports lie below the
//! ephemeral range, where no outgoing connection lands; a random start
//! keeps concurrent tests from probing the same port.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::net::TcpListener;

/// The lowest port handed out; below it sit well-known services.
const FIRST: u16 = 12_000;

/// The kernel's lowest ephemeral port (Linux's default when unreadable).
fn ephemeral_floor() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

fn bindable(port: u16) -> bool {
    TcpListener::bind(("127.0.0.1", port)).is_ok()
}

/// A loopback port nobody listens on now, outside the ephemeral range.
///
/// # Errors
/// When no port in the range is free.
pub fn free_port() -> Result<u16, String> {
    free_port_with_bus(0)
}

/// A port P with P and P + `bus` both free (Redis Cluster listens on its
/// port and on a bus port 10000 above it), both outside the ephemeral
/// range; `taken` lists ports already given to the caller's other nodes.
///
/// # Errors
/// When no such pair is free.
pub fn free_port_with_bus_excluding(bus: u16, taken: &[u16]) -> Result<u16, String> {
    let end = ephemeral_floor().saturating_sub(bus);
    if end <= FIRST {
        return Err(format!(
            "no room below the ephemeral range ({}) for a port and its bus port {bus} above",
            ephemeral_floor()
        ));
    }
    let span = u64::from(end - FIRST);
    let start = RandomState::new().hash_one(std::process::id()) % span;
    for i in 0..span {
        let offset = u16::try_from((start + i) % span).map_err(|e| e.to_string())?;
        let p = FIRST + offset;
        if !taken.contains(&p) && bindable(p) && (bus == 0 || bindable(p + bus)) {
            return Ok(p);
        }
    }
    Err(format!("no free loopback port between {FIRST} and {end}"))
}

/// [`free_port_with_bus_excluding`] with nothing excluded.
///
/// # Errors
/// When no such pair is free.
pub fn free_port_with_bus(bus: u16) -> Result<u16, String> {
    free_port_with_bus_excluding(bus, &[])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_lie_below_the_ephemeral_range_and_can_be_bound() {
        let floor = ephemeral_floor();
        for _ in 0..20 {
            let p = free_port().expect("a port");
            assert!((FIRST..floor).contains(&p), "{p} not in {FIRST}..{floor}");
            assert!(bindable(p));
            let q = free_port_with_bus_excluding(10_000, &[p]).expect("a pair");
            assert_ne!(p, q);
            assert!(
                q + 10_000 < floor,
                "bus port {} in the ephemeral range",
                q + 10_000
            );
        }
    }

    #[test]
    fn a_port_in_use_is_not_handed_out() {
        let held: Vec<TcpListener> = (0..50)
            .map(|_| {
                let p = free_port().expect("a port");
                TcpListener::bind(("127.0.0.1", p)).expect("bind")
            })
            .collect();
        let ports: Vec<u16> = held
            .iter()
            .map(|l| l.local_addr().expect("addr").port())
            .collect();
        let mut unique = ports.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(
            unique.len(),
            ports.len(),
            "a held port was handed out twice"
        );
    }
}

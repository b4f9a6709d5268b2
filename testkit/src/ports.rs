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
use std::process::Child;
use std::time::{Duration, Instant};

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

/// How long a started server gets to answer before it counts as lost.
const START_WAIT: Duration = Duration::from_secs(10);

/// Starts a server on a free port with [`free_port_with_bus_excluding`]
/// (`spawn` starts it on the port it is given) and waits until `answers`
/// says it answers there. A server that exits at start lost its port to
/// another test between the probe and its bind: it is started again on
/// other ports, four times at most. A server that never answers is killed.
///
/// # Errors
/// What `spawn` answered, or why the last try failed.
pub fn spawn_on_free_port(
    bus: u16,
    taken: &[u16],
    mut spawn: impl FnMut(u16) -> Result<Child, String>,
    mut answers: impl FnMut(u16) -> bool,
) -> Result<(u16, Child), String> {
    let mut last = String::from("no try");
    for _ in 0..4 {
        let port = free_port_with_bus_excluding(bus, taken)?;
        let mut child = spawn(port)?;
        let end = Instant::now() + START_WAIT;
        loop {
            if !matches!(child.try_wait(), Ok(None)) {
                last = format!("the server on port {port} exited at start");
                break;
            }
            if answers(port) {
                return Ok((port, child));
            }
            if Instant::now() >= end {
                last = format!("the server on port {port} never answered");
                break;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    Err(last)
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
    fn a_server_that_exits_at_start_is_started_on_another_port() {
        let tried = std::cell::RefCell::new(Vec::new());
        let (port, mut child) = spawn_on_free_port(
            0,
            &[],
            |p| {
                tried.borrow_mut().push(p);
                // The first start fails at once, as a lost bind does.
                let script = if tried.borrow().len() == 1 {
                    "exit 1"
                } else {
                    "sleep 30"
                };
                std::process::Command::new("sh")
                    .args(["-c", script])
                    .spawn()
                    .map_err(|e| e.to_string())
            },
            // Only the second start answers, as a server that exited cannot.
            |_| tried.borrow().len() >= 2,
        )
        .expect("started");
        let _ = child.kill();
        let _ = child.wait();
        let tried = tried.into_inner();
        assert_eq!(tried.len(), 2, "{tried:?}");
        assert_eq!(tried.last(), Some(&port));
    }

    #[test]
    fn a_port_in_use_is_not_handed_out() {
        // Other tests take ports meanwhile: a port lost before it is held
        // is passed over. 400 of the range's ~10,000 ports held: a draw
        // that ignored them would hit one in 200 draws all but surely.
        let mut held = Vec::new();
        while held.len() < 400 {
            if let Ok(l) = TcpListener::bind(("127.0.0.1", free_port().expect("a port"))) {
                held.push(l);
            }
        }
        let held: std::collections::HashSet<u16> = held
            .iter()
            .map(|l| l.local_addr().expect("addr").port())
            .collect();
        for _ in 0..200 {
            let p = free_port().expect("a port");
            assert!(!held.contains(&p), "{p} is held, yet was handed out");
        }
    }
}

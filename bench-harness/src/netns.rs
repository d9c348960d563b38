//! Network namespaces for a local cluster, so that the nemesis can cut
//! brokers off from each other (`rill-bench verify --netns`).
//!
//! Each node gets a namespace of its own, joined by a veth pair to a bridge
//! in the harness's namespace; the bridge holds the `.254` address of a
//! `/24`, so the clients (in the harness) reach every broker directly. A
//! cut between two nodes is a pair of blackhole routes, one in each node's
//! namespace: the brokers lose each other while the clients keep both, as
//! in Jepsen, whose partitions are between the database nodes.
//!
//! Why routes and not iptables: `ip` is in every Debian base system
//! (iproute2), while iptables is not, and a blackhole route drops both
//! directions' packets as soon as it is added.
//!
//! Needs root (`CAP_NET_ADMIN`). Everything is named after the harness's
//! pid, removed on drop, and removed first at creation when a harness that
//! was killed left it behind. No traffic leaves the namespaces and the
//! bridge this makes.

use crate::error::{BenchError, Result};
use std::process::Command;

/// Runs `ip` with `args`; an error naming the command when it fails.
fn ip(args: &[&str]) -> Result<()> {
    let output = Command::new("ip").args(args).output().map_err(|e| {
        BenchError::Other(format!(
            "ip {}: {e} (is iproute2 installed?)",
            args.join(" ")
        ))
    })?;
    if output.status.success() {
        return Ok(());
    }
    Err(BenchError::Other(format!(
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr).trim()
    )))
}

/// Runs `ip` inside namespace `ns`.
fn ip_in(ns: &str, args: &[&str]) -> Result<()> {
    let mut all = vec!["netns", "exec", ns, "ip"];
    all.extend_from_slice(args);
    ip(&all)
}

/// One namespace per node on a bridge; removed on drop.
#[derive(Debug)]
pub struct Network {
    /// Prefix of every name this network makes (interface names stay
    /// within Linux's 15 bytes).
    tag: String,
    /// The first three octets of the `/24`.
    subnet: String,
    nodes: Vec<i32>,
}

impl Network {
    /// A namespace for each of `nodes` (ids 1..=253) on a fresh bridge.
    /// Fails, saying why, without root or `ip`.
    pub fn create(nodes: &[i32]) -> Result<Network> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err(BenchError::Other(
                "--netns needs root (it makes network namespaces and veth pairs)".into(),
            ));
        }
        if let Some(bad) = nodes.iter().find(|&&n| !(1..=253).contains(&n)) {
            return Err(BenchError::Other(format!("node id {bad} has no address")));
        }
        let id = std::process::id() % 250;
        let network = Network {
            tag: format!("rv{id}"),
            subnet: format!("10.79.{id}"),
            nodes: nodes.to_vec(),
        };
        network.remove();
        let bridge = network.bridge();
        ip(&["link", "add", &bridge, "type", "bridge"])?;
        ip(&[
            "addr",
            "add",
            &format!("{}.254/24", network.subnet),
            "dev",
            &bridge,
        ])?;
        ip(&["link", "set", &bridge, "up"])?;
        for &node in nodes {
            network.add_node(node)?;
        }
        Ok(network)
    }

    fn bridge(&self) -> String {
        format!("{}br", self.tag)
    }

    /// The namespace `node` runs in.
    pub fn ns(&self, node: i32) -> String {
        format!("{}n{node}", self.tag)
    }

    /// `node`'s address, reachable from the harness.
    pub fn address(&self, node: i32) -> String {
        format!("{}.{node}", self.subnet)
    }

    fn add_node(&self, node: i32) -> Result<()> {
        let ns = self.ns(node);
        let host = format!("{}h{node}", self.tag);
        let inner = format!("{}i{node}", self.tag);
        ip(&["netns", "add", &ns])?;
        ip(&["link", "add", &host, "type", "veth", "peer", "name", &inner])?;
        ip(&["link", "set", &inner, "netns", &ns])?;
        ip(&["link", "set", &host, "master", &self.bridge(), "up"])?;
        let address = format!("{}/24", self.address(node));
        ip_in(&ns, &["addr", "add", &address, "dev", &inner])?;
        ip_in(&ns, &["link", "set", &inner, "up"])?;
        ip_in(&ns, &["link", "set", "lo", "up"])
    }

    /// Cuts (`cut`) or heals the link between nodes `a` and `b`, both ways.
    pub fn cut(&self, a: i32, b: i32, cut: bool) -> Result<()> {
        let verb = if cut { "add" } else { "del" };
        let to_b = format!("{}/32", self.address(b));
        let to_a = format!("{}/32", self.address(a));
        ip_in(&self.ns(a), &["route", verb, "blackhole", &to_b])?;
        ip_in(&self.ns(b), &["route", verb, "blackhole", &to_a])
    }

    /// Cuts or heals `node` from every other node.
    pub fn isolate(&self, node: i32, cut: bool) -> Result<()> {
        for &other in self.nodes.iter().filter(|&&o| o != node) {
            self.cut(node, other, cut)?;
        }
        Ok(())
    }

    /// Deletes the namespaces (their veth ends go with them) and the
    /// bridge, ignoring what is not there.
    fn remove(&self) {
        for &node in &self.nodes {
            let _ = ip(&["netns", "del", &self.ns(node)]);
        }
        let _ = ip(&["link", "del", &self.bridge()]);
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        self.remove();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_linux_interface_names_and_addresses_differ() {
        let network = Network {
            tag: "rv249".into(),
            subnet: "10.79.249".into(),
            nodes: vec![1, 2, 3],
        };
        // IFNAMSIZ is 16 with the terminating NUL.
        assert!(format!("{}h{}", network.tag, 253).len() <= 15);
        assert!(network.bridge().len() <= 15);
        assert_eq!(network.address(2), "10.79.249.2");
        assert_ne!(network.ns(1), network.ns(2));
        // A network never made removes nothing it did not name.
        std::mem::forget(network);
    }
}

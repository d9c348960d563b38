//! Three network namespaces on a bridge, for partitions between brokers:
//! each `rill` runs in a namespace of its own, joined by a veth pair to a
//! bridge the test process (the clients) sits on; [`Network::isolate`] cuts
//! one broker off from the other two (not from the clients) with blackhole
//! routes both ways. Needs root and `ip netns`; [`Network::create`] says
//! why and returns `None` without them, so a test skips cleanly.

use crate::{free_port, Broker};
use std::net::SocketAddr;
use std::process::Command;

/// Runs `ip` with `args`; whether it succeeded.
pub fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Runs `ip` inside namespace `ns`.
pub fn ip_in(ns: &str, args: &[&str]) -> bool {
    let mut all = vec!["netns", "exec", ns, "ip"];
    all.extend_from_slice(args);
    ip(&all)
}

/// Three namespaces on a bridge; removed on drop.
pub struct Network {
    tag: String,
    subnet: String,
}

impl Network {
    /// `None` (with the reason printed) where namespaces cannot be made.
    pub fn create() -> Option<Network> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            crate::skipped("network namespaces need root");
            return None;
        }
        // Unique among this process's networks too: the black-box tests
        // are one binary, and two of its tests may each make one at once.
        static MADE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let made = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let id = (std::process::id().wrapping_mul(7) + made) % 200;
        let network = Network {
            tag: format!("rp{id}"),
            subnet: format!("10.77.{id}"),
        };
        let bridge = network.bridge();
        let gateway = format!("{}.254/24", network.subnet);
        let made = ip(&["link", "add", &bridge, "type", "bridge"])
            && ip(&["addr", "add", &gateway, "dev", &bridge])
            && ip(&["link", "set", &bridge, "up"])
            && (1..=3).all(|i| network.add_node(i));
        if !made {
            crate::skipped("cannot create network namespaces and veth pairs here");
            return None;
        }
        Some(network)
    }

    pub fn bridge(&self) -> String {
        format!("{}br", self.tag)
    }

    pub fn ns(&self, node: i32) -> String {
        format!("{}n{node}", self.tag)
    }

    pub fn address(&self, node: i32) -> String {
        format!("{}.{node}", self.subnet)
    }

    pub fn add_node(&self, node: i32) -> bool {
        let (ns, host, inner) = (
            self.ns(node),
            format!("{}h{node}", self.tag),
            format!("{}i{node}", self.tag),
        );
        let address = format!("{}/24", self.address(node));
        ip(&["netns", "add", &ns])
            && ip(&["link", "add", &host, "type", "veth", "peer", "name", &inner])
            && ip(&["link", "set", &inner, "netns", &ns])
            && ip(&["link", "set", &host, "master", &self.bridge(), "up"])
            && ip_in(&ns, &["addr", "add", &address, "dev", &inner])
            && ip_in(&ns, &["link", "set", &inner, "up"])
            && ip_in(&ns, &["link", "set", "lo", "up"])
    }

    /// Cuts (or heals) `node` off from the other nodes, both ways.
    pub fn isolate(&self, node: i32, cut: bool) {
        let verb = if cut { "add" } else { "del" };
        for other in (1..=3).filter(|&o| o != node) {
            let to_other = format!("{}/32", self.address(other));
            let to_node = format!("{}/32", self.address(node));
            assert!(ip_in(
                &self.ns(node),
                &["route", verb, "blackhole", &to_other]
            ));
            assert!(ip_in(
                &self.ns(other),
                &["route", verb, "blackhole", &to_node]
            ));
        }
    }

    /// A script that runs rill inside `node`'s namespace.
    pub fn launcher(&self, binary: &str, dir: &std::path::Path, node: i32) -> String {
        let path = dir.join(format!("rill-in-{}.sh", self.ns(node)));
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\nexec ip netns exec {} {binary} \"$@\"\n",
                self.ns(node)
            ),
        )
        .expect("launcher");
        // SAFETY: chmod on a path we just wrote.
        let c_path = std::ffi::CString::new(path.to_string_lossy().as_bytes()).expect("path");
        unsafe {
            libc::chmod(c_path.as_ptr(), 0o755);
        }
        path.to_string_lossy().into_owned()
    }

    /// Starts one broker per namespace, a three-voter cluster on the
    /// bridge, each with its data dir from `dirs` and `extra_args`; returns
    /// the brokers (node ids 1..=3) and the bootstrap list.
    pub fn start_brokers(
        &self,
        binary: &str,
        dirs: &[tempfile::TempDir],
        extra_args: &[&str],
    ) -> (Vec<Broker>, String) {
        let port = free_port();
        let controller_port = free_port();
        let voters: Vec<String> = (1..=3)
            .map(|n| format!("{n}@{}:{controller_port}", self.address(n)))
            .collect();
        let voters = voters.join(",");
        let brokers = (1..=3)
            .map(|n| {
                let addr: SocketAddr = format!("{}:{port}", self.address(n)).parse().expect("addr");
                let dir = dirs[(n - 1) as usize].path();
                let launcher = self.launcher(binary, dir, n);
                let id = n.to_string();
                let mut args = vec![
                    "--cores",
                    "1",
                    "--node-id",
                    &id,
                    "--controller-quorum-voters",
                    &voters,
                ];
                args.extend_from_slice(extra_args);
                Broker::start_listening(&launcher, dir, addr, &args, &[])
            })
            .collect();
        let bootstrap: Vec<String> = (1..=3)
            .map(|n| format!("{}:{port}", self.address(n)))
            .collect();
        (brokers, bootstrap.join(","))
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        for node in 1..=3 {
            ip(&["netns", "del", &self.ns(node)]);
        }
        ip(&["link", "del", &self.bridge()]);
    }
}

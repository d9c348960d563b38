//! A Kerberos realm of its own for a test: MIT's KDC (`krb5kdc`) on a
//! free port, with its database, `krb5.conf` and keytabs in a temporary
//! directory, and client ticket caches made with `kinit`. Needs Debian's
//! `krb5-kdc`, `krb5-admin-server` and `krb5-user` (`.ci/run` installs
//! them); without them the test fails, naming them.

use crate::free_port;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The realm every test KDC serves.
pub const REALM: &str = "RILL.TEST";

/// A running KDC and its files.
pub struct Kdc {
    dir: PathBuf,
    child: Child,
}

/// Panics, naming the packages, when the MIT Kerberos tools are missing.
pub fn require_kerberos() {
    for tool in ["krb5kdc", "kdb5_util", "kadmin.local", "kinit"] {
        let found = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .chain(["/usr/sbin", "/usr/bin"].map(PathBuf::from))
            .any(|dir| dir.join(tool).is_file());
        assert!(
            found,
            "{tool} is missing: apt-get install krb5-kdc krb5-admin-server krb5-user"
        );
    }
}

impl Kdc {
    /// Makes a realm under `dir` and starts its KDC.
    pub fn start(dir: &Path) -> Kdc {
        require_kerberos();
        let port = free_port();
        let conf = format!(
            "[libdefaults]\n  default_realm = {REALM}\n  dns_lookup_kdc = false\n  \
             dns_lookup_realm = false\n  rdns = false\n  udp_preference_limit = 1\n\
             [realms]\n  {REALM} = {{\n    kdc = 127.0.0.1:{port}\n  }}\n"
        );
        std::fs::write(dir.join("krb5.conf"), conf).expect("krb5.conf");
        let kdc_conf = format!(
            "[kdcdefaults]\n  kdc_ports = {port}\n  kdc_tcp_ports = {port}\n\
             [realms]\n  {REALM} = {{\n    database_name = {d}/principal\n    \
             key_stash_file = {d}/stash\n    kdc_ports = {port}\n    kdc_tcp_ports = {port}\n  }}\n\
             [logging]\n  kdc = FILE:{d}/kdc.log\n",
            d = dir.display()
        );
        std::fs::write(dir.join("kdc.conf"), kdc_conf).expect("kdc.conf");
        let mut kdc = Kdc {
            dir: dir.to_path_buf(),
            child: Command::new("true").spawn().expect("a placeholder process"),
        };
        kdc.run(
            "kdb5_util",
            &["-r", REALM, "-P", "master-secret", "create", "-s"],
        );
        kdc.child = kdc
            .command("krb5kdc")
            .arg("-n")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("krb5kdc starts");
        wait_listening(port);
        kdc
    }

    /// The `krb5.conf` clients and the broker use (`KRB5_CONFIG`).
    pub fn krb5_conf(&self) -> PathBuf {
        self.dir.join("krb5.conf")
    }

    /// Adds `principal` (`alice`, `kafka/127.0.0.1`) with a random key.
    pub fn add(&self, principal: &str) {
        self.run(
            "kadmin.local",
            &["-q", &format!("addprinc -randkey {principal}")],
        );
    }

    /// A keytab holding `principals`' keys.
    pub fn keytab(&self, name: &str, principals: &[&str]) -> PathBuf {
        let path = self.dir.join(format!("{name}.keytab"));
        for principal in principals {
            let query = format!("ktadd -norandkey -k {} {principal}", path.display());
            self.run("kadmin.local", &["-q", &query]);
        }
        path
    }

    /// A ticket cache holding `principal`'s TGT (`KRB5CCNAME`).
    pub fn kinit(&self, principal: &str) -> PathBuf {
        let keytab = self.keytab(&principal.replace('/', "_"), &[principal]);
        let cache = self
            .dir
            .join(format!("{}.ccache", principal.replace('/', "_")));
        let mut kinit = self.command("kinit");
        kinit
            .env("KRB5CCNAME", &cache)
            .arg("-kt")
            .arg(&keytab)
            .arg(principal);
        let status = kinit.status().expect("kinit runs");
        assert!(status.success(), "kinit {principal} failed");
        cache
    }

    fn command(&self, tool: &str) -> Command {
        let mut command = Command::new(tool);
        command
            .env("KRB5_CONFIG", self.krb5_conf())
            .env("KRB5_KDC_PROFILE", self.dir.join("kdc.conf"));
        command
    }

    fn run(&self, tool: &str, args: &[&str]) {
        let output = self
            .command(tool)
            .args(args)
            .output()
            .expect("a Kerberos tool runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success() && !stderr.contains("error"),
            "{tool} {args:?}: {stderr}"
        );
    }
}

impl Drop for Kdc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until the KDC takes TCP connections on `port`.
fn wait_listening(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("krb5kdc did not listen on {port} within 10 s");
}

//! io_uring availability: rill does all disk and network I/O through glommio on
//! io_uring, so a host that forbids it cannot run rill at all.

use super::Context;
use crate::check::{Check, Fix, Status};
use crate::parse;

const DISABLED_PATH: &str = "/proc/sys/kernel/io_uring_disabled";
const WHY_DISABLED: &str =
    "rill does all I/O through io_uring; 1 blocks non-root users, 2 everyone";
const WHY_SECCOMP: &str =
    "a seccomp filter (e.g. Docker's default profile) can block io_uring_setup";
const WHY_SETUP: &str = "proves this process can create a ring, whatever the knobs say";

/// The io_uring rows.
pub fn checks(context: &Context) -> Vec<Check> {
    vec![disabled(context), seccomp(context), setup(context)]
}

fn disabled(context: &Context) -> Check {
    let name = "io_uring.disabled";
    let Some(text) = context.host.read(DISABLED_PATH) else {
        // Kernels before 6.6 have no knob: io_uring is on if compiled in; the
        // setup probe tells.
        return Check::skip(name, "0", WHY_DISABLED);
    };
    // SAFETY: geteuid has no preconditions and cannot fail.
    let is_root = unsafe { libc::geteuid() } == 0;
    let status = match parse::parse_u64(&text) {
        Some(0) => Status::Pass,
        Some(1) if is_root => Status::Warn,
        _ => Status::Fail,
    };
    Check::new(name, text.clone(), "0", WHY_DISABLED, status).with_fixes(vec![Fix {
        path: DISABLED_PATH.to_string(),
        value: "0".to_string(),
        previous: text,
    }])
}

fn seccomp(context: &Context) -> Check {
    let name = "io_uring.seccomp";
    let mode = context
        .host
        .read_raw("/proc/self/status")
        .and_then(|t| parse::parse_status_field(&t, "Seccomp"));
    match mode.as_deref() {
        None => Check::skip(name, "0 (no filter)", WHY_SECCOMP),
        Some("0") => Check::new(
            name,
            "0 (no filter)",
            "0 (no filter)",
            WHY_SECCOMP,
            Status::Pass,
        ),
        Some("2") => Check::new(
            name,
            "2 (filter)",
            "0, or a profile allowing io_uring_*",
            WHY_SECCOMP,
            Status::Warn,
        ),
        Some(other) => Check::new(
            name,
            format!("{other} (strict)"),
            "0 (no filter)",
            WHY_SECCOMP,
            Status::Fail,
        ),
    }
}

fn setup(context: &Context) -> Check {
    let name = "io_uring.setup";
    if !context.host.is_real() {
        return Check::skip(name, "ring created", WHY_SETUP);
    }
    match io_uring::IoUring::new(4) {
        Ok(_) => Check::new(
            name,
            "ring created",
            "ring created",
            WHY_SETUP,
            Status::Pass,
        ),
        Err(error) => Check::new(
            name,
            format!("io_uring_setup failed: {error}"),
            "ring created",
            WHY_SETUP,
            Status::Fail,
        ),
    }
}

//! Fault-injection points for black-box tests of disk failures, armed by
//! environment variables of the broker process (read once; unset in
//! production, where each check is one load of a cached value).

use std::sync::OnceLock;

/// `RILL_FAULT_EIO_PARTITION=<topic>-<partition>`: every data write of that
/// partition fails with EIO, as on a failing disk.
pub const FAULT_EIO_PARTITION: &str = "RILL_FAULT_EIO_PARTITION";

/// Whether writes of the partition whose directory is named `dir_name`
/// must fail with EIO.
pub fn eio_armed_for(dir_name: &str) -> bool {
    static ARMED: OnceLock<Option<String>> = OnceLock::new();
    ARMED
        .get_or_init(|| std::env::var(FAULT_EIO_PARTITION).ok())
        .as_deref()
        == Some(dir_name)
}

/// `RILL_FAULT_ERRNO_PARTITION=<topic>-<partition>:<errno>[:<count>]`: the
/// next `<count>` data writes of that partition (every one, without a
/// count) fail with `<errno>`, a number or one of the names
/// [`errno_named`] knows (`EMFILE`, `EIO`, ...). Tests the handling of
/// each class of [`crate::FaultClass`].
pub const FAULT_ERRNO_PARTITION: &str = "RILL_FAULT_ERRNO_PARTITION";

/// The armed errno fault: the partition, the errno and how many writes
/// it still fails (`None`: all).
struct ErrnoFault {
    dir_name: String,
    errno: i32,
    remaining: Option<std::sync::atomic::AtomicU64>,
}

/// The errno the next data write of the partition whose directory is
/// named `dir_name` must fail with, if [`FAULT_ERRNO_PARTITION`] says so
/// (counting the write against the fault's count).
pub fn errno_armed_for(dir_name: &str) -> Option<i32> {
    static ARMED: OnceLock<Option<ErrnoFault>> = OnceLock::new();
    let fault = ARMED
        .get_or_init(|| parse_errno_fault(&std::env::var(FAULT_ERRNO_PARTITION).ok()?))
        .as_ref()?;
    if fault.dir_name != dir_name {
        return None;
    }
    let Some(remaining) = &fault.remaining else {
        return Some(fault.errno);
    };
    let ordering = std::sync::atomic::Ordering::Relaxed;
    remaining
        .fetch_update(ordering, ordering, |n| n.checked_sub(1))
        .ok()
        .map(|_| fault.errno)
}

/// `<topic>-<partition>:<errno>[:<count>]`; `None` (the fault unarmed, with
/// a message) when it does not parse.
fn parse_errno_fault(value: &str) -> Option<ErrnoFault> {
    let parsed = parse_errno_fault_fields(value);
    if parsed.is_none() {
        eprintln!(
            "{FAULT_ERRNO_PARTITION}={value:?} ignored: not <topic>-<partition>:<errno>[:<count>]"
        );
    }
    parsed
}

/// [`parse_errno_fault`] without the message.
fn parse_errno_fault_fields(value: &str) -> Option<ErrnoFault> {
    let mut fields = value.rsplitn(3, ':').collect::<Vec<_>>();
    fields.reverse();
    let (dir_name, errno, count) = match fields[..] {
        [dir_name, errno] => (dir_name, errno, None),
        [dir_name, errno, count] => (dir_name, errno, Some(count.parse::<u64>().ok()?)),
        _ => return None,
    };
    let errno = errno_named(errno).or_else(|| errno.parse().ok())?;
    Some(ErrnoFault {
        dir_name: dir_name.to_string(),
        errno,
        remaining: count.map(std::sync::atomic::AtomicU64::new),
    })
}

/// The errno called `name`, for the names the fault tests use.
fn errno_named(name: &str) -> Option<i32> {
    Some(match name {
        "EMFILE" => libc::EMFILE,
        "ENFILE" => libc::ENFILE,
        "ENOMEM" => libc::ENOMEM,
        "EAGAIN" => libc::EAGAIN,
        "EIO" => libc::EIO,
        "EROFS" => libc::EROFS,
        "ENOSPC" => libc::ENOSPC,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_faults_parse_with_and_without_a_count() {
        let fault = parse_errno_fault("my-topic-3:EMFILE:2").expect("parses");
        assert_eq!(fault.dir_name, "my-topic-3");
        assert_eq!(fault.errno, libc::EMFILE);
        assert_eq!(fault.remaining.map(|r| r.into_inner()), Some(2));
        let fault = parse_errno_fault("t-0:5").expect("parses");
        assert_eq!((fault.dir_name.as_str(), fault.errno), ("t-0", 5));
        assert!(fault.remaining.is_none());
        assert!(parse_errno_fault("t-0").is_none());
        assert!(parse_errno_fault("t-0:ENOPE").is_none());
        assert!(parse_errno_fault("t-0:EIO:many").is_none());
    }
}

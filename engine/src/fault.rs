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

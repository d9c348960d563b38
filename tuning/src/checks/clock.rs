//! Clock source: rill timestamps every request and batch; with `tsc` (or
//! `kvm-clock`/`arch_sys_counter`) `clock_gettime` stays in the vDSO, with
//! `hpet`/`acpi_pm`/`xen` it becomes a slow syscall.

use super::Context;
use crate::check::{Check, Fix, Status};
use crate::parse;

const CURRENT_PATH: &str = "/sys/devices/system/clocksource/clocksource0/current_clocksource";
const AVAILABLE_PATH: &str = "/sys/devices/system/clocksource/clocksource0/available_clocksource";
const WHY: &str = "clock_gettime on every request; a non-vDSO clock costs a syscall each";

/// The clock source row.
pub fn checks(context: &Context) -> Vec<Check> {
    let name = "clock.source";
    let Some(current) = context.host.read(CURRENT_PATH) else {
        return vec![Check::skip(name, "tsc", WHY)];
    };
    let fast = ["tsc", "kvm-clock", "arch_sys_counter"];
    let status = if fast.contains(&current.as_str()) {
        Status::Pass
    } else {
        Status::Warn
    };
    let tsc_available = context
        .host
        .read(AVAILABLE_PATH)
        .is_some_and(|t| parse::parse_choices(&t).iter().any(|c| c == "tsc"));
    let fixes = if tsc_available {
        vec![Fix {
            path: CURRENT_PATH.to_string(),
            value: "tsc".to_string(),
            previous: current.clone(),
        }]
    } else {
        Vec::new()
    };
    vec![Check::new(name, current, "tsc", WHY, status).with_fixes(fixes)]
}

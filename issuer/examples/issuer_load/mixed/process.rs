//! Readings of an issuer process from `/proc` for the report: its peak resident memory (VmHWM)
//! and the CPU time it has used.

use anyhow::{Context as _, Result};

pub(crate) fn vm_hwm_mib(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<u64>().ok())
        .map(|kib| kib / 1024)
        .context("no VmHWM")
}

pub(crate) fn cpu_seconds(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let after = stat.rsplit_once(')').context("stat")?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 =
        fields.get(11).context("utime")?.parse::<u64>()? + fields.get(12).context("stime")?.parse::<u64>()?;
    Ok(ticks as f64 / 100.0)
}

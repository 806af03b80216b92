//! The device flags shared by `profile` and `schedule`, and policy names.

use std::time::Duration;

use anyhow::{Result, bail};
use clap::Args;
use spillway::{CopyCost, Devices, Placement};

/// Which devices a multi-device session uses.
#[derive(Args, Debug, Clone)]
pub struct DeviceArgs {
    /// CPU worker lanes.
    #[arg(long, default_value_t = 2)]
    pub lanes: usize,
    /// Lanes of one Virtual device (a CPU-backed device with its own memory); 0 for none.
    #[arg(long = "virtual", default_value_t = 0, value_name = "N")]
    pub virtual_lanes: usize,
    /// Latency of a copy into or out of the Virtual device, µs.
    #[arg(long, default_value_t = 10.0)]
    pub copy_latency_us: f64,
    /// Bandwidth of the Virtual device's copies, GB/s.
    #[arg(long, default_value_t = 25.0)]
    pub copy_gbps: f64,
}

impl DeviceArgs {
    /// The device set the flags describe.
    pub fn devices(&self) -> Result<Devices> {
        if self.lanes == 0 {
            bail!("--lanes must be at least 1");
        }
        if !(self.copy_latency_us.is_finite() && self.copy_latency_us >= 0.0) {
            bail!("--copy-latency-us must be a non-negative number");
        }
        if !(self.copy_gbps.is_finite() && self.copy_gbps > 0.0) {
            bail!("--copy-gbps must be a positive number");
        }
        let mut devices = Devices::cpu().with_cpu_lanes(self.lanes);
        if self.virtual_lanes > 0 {
            devices = devices.with_virtual(
                self.virtual_lanes,
                CopyCost {
                    latency: Duration::from_secs_f64(self.copy_latency_us * 1e-6),
                    bandwidth_bytes_per_s: self.copy_gbps * 1e9,
                },
            );
        }
        Ok(devices)
    }
}

/// Parses a placement policy name, ignoring case, `-` and `_` (`hios-lp` is `HiosLp`).
pub fn parse_policy(name: &str) -> Result<Placement> {
    let wanted: String = name
        .chars()
        .filter(|c| *c != '-' && *c != '_')
        .collect::<String>()
        .to_ascii_lowercase();
    if let Some(p) = Placement::ALL
        .iter()
        .find(|p| format!("{p:?}").to_ascii_lowercase() == wanted)
    {
        return Ok(*p);
    }
    let known: Vec<String> = Placement::ALL.iter().map(|p| format!("{p:?}")).collect();
    bail!("unknown policy '{name}'; known: {}", known.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_names_parse_case_insensitively() {
        assert_eq!(parse_policy("greedy").unwrap(), Placement::Greedy);
        assert_eq!(parse_policy("HIOS-LP").unwrap(), Placement::HiosLp);
        assert_eq!(parse_policy("comm_sd").unwrap(), Placement::CommSd);
        assert_eq!(parse_policy("SortingHat").unwrap(), Placement::SortingHat);
        assert!(parse_policy("fastest").is_err());
    }
}

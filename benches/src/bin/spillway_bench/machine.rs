//! What the machine is and how loaded it is: CPU model, load average, process memory, date.

use std::fs;
use std::time::{SystemTime, UNIX_EPOCH};

/// The CPU model name from `/proc/cpuinfo`, and the number of logical CPUs listed there.
pub fn cpu_model() -> (String, usize) {
    let text = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let mut name = None;
    let mut count = 0;
    for line in text.lines() {
        if line.starts_with("processor") {
            count += 1;
        }
        if name.is_none() && line.starts_with("model name") {
            name = line.split_once(':').map(|(_, v)| v.trim().to_string());
        }
    }
    (name.unwrap_or_else(|| "unknown".to_string()), count)
}

/// The 1, 5 and 15 minute load averages from `/proc/loadavg`.
pub fn load_average() -> [f64; 3] {
    let text = fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut out = [f64::NAN; 3];
    for (slot, field) in out.iter_mut().zip(text.split_whitespace()) {
        *slot = field.parse().unwrap_or(f64::NAN);
    }
    out
}

/// A field of `/proc/self/status` in bytes (`VmRSS`, `VmHWM`, …); 0 when unreadable.
fn status_bytes(field: &str) -> u64 {
    let text = fs::read_to_string("/proc/self/status").unwrap_or_default();
    text.lines()
        .find_map(|l| {
            let rest = l.strip_prefix(field)?.strip_prefix(':')?;
            let kb: u64 = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
            Some(kb * 1024)
        })
        .unwrap_or(0)
}

/// The resident set size now.
pub fn rss() -> u64 {
    status_bytes("VmRSS")
}

/// The peak resident set size since the process started or since [`reset_peak_rss`].
pub fn peak_rss() -> u64 {
    status_bytes("VmHWM")
}

/// Resets the kernel's peak-RSS counter to the current RSS (`/proc/self/clear_refs` ← 5).
/// Returns false where the kernel refuses, in which case peaks are process-wide.
pub fn reset_peak_rss() -> bool {
    fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Today's date (UTC) as `YYYY-MM-DD` and the time as `HH:MM:SS`.
pub fn utc_now() -> (String, String) {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (
        format!("{y:04}-{m:02}-{d:02}"),
        format!("{:02}:{:02}:{:02}", rem / 3600, rem % 3600 / 60, rem % 60),
    )
}

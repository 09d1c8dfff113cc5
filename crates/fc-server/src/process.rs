//! What the operating system says about this process, for `INFO`: resident memory, the
//! machine's memory, CPU time (`/proc` on Linux; zeros elsewhere, where a field is then
//! reported as 0).

/// Resident set size in bytes (`used_memory_rss`).
pub(crate) fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * rustix::param::page_size() as u64)
}

/// The machine's memory in bytes (`total_system_memory`).
pub(crate) fn total_system_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("MemTotal:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map_or(0, |kib| kib * 1024)
}

/// CPU seconds `(system, user, children's system, children's user)` from a `/proc/.../stat`
/// file.
fn cpu_of(path: &str) -> [f64; 4] {
    let Ok(stat) = std::fs::read_to_string(path) else {
        return [0.0; 4];
    };
    // The fields after the command name (which may hold spaces) start with the state (3).
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return [0.0; 4];
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = rustix::param::clock_ticks_per_second().max(1) as f64;
    let field = |n: usize| {
        fields
            .get(n - 3)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
            / ticks
    };
    // utime 14, stime 15, cutime 16, cstime 17.
    [field(15), field(14), field(17), field(16)]
}

/// CPU seconds of the process: system, user, and its children's system and user.
pub(crate) fn cpu_process() -> [f64; 4] {
    cpu_of("/proc/self/stat")
}

/// CPU seconds of the calling thread: system and user (`used_cpu_*_main_thread`: the worker
/// that answers `INFO`; fast-cache has no single main thread).
pub(crate) fn cpu_thread() -> [f64; 2] {
    let [sys, user, ..] = cpu_of("/proc/thread-self/stat");
    [sys, user]
}

/// Redis's `bytesToHuman`: `123B`, `1.91M`, ...
pub(crate) fn human(bytes: u64) -> String {
    const UNITS: [(u64, &str); 5] = [
        (1 << 10, "K"),
        (1 << 20, "M"),
        (1 << 30, "G"),
        (1 << 40, "T"),
        (1 << 50, "P"),
    ];
    if bytes < 1024 {
        return format!("{bytes}B");
    }
    for (i, (unit, name)) in UNITS.iter().enumerate() {
        if i + 1 == UNITS.len() || bytes < UNITS[i + 1].0 {
            return format!("{:.2}{name}", bytes as f64 / *unit as f64);
        }
    }
    format!("{bytes}B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_print_as_redis_prints_them() {
        assert_eq!(human(0), "0B");
        assert_eq!(human(1023), "1023B");
        assert_eq!(human(1024), "1.00K");
        assert_eq!(human(2_005_576), "1.91M");
        assert_eq!(human(25_276_502_016), "23.54G");
        assert_eq!(human(1 << 50), "1.00P");
    }

    #[test]
    fn this_process_has_memory_and_cpu_time() {
        if cfg!(target_os = "linux") {
            assert!(rss_bytes() > 0);
            assert!(total_system_memory() > rss_bytes());
            let busy = (0..2_000_000u64).fold(0u64, |a, b| a.wrapping_add(b * b));
            assert!(busy > 0);
            let [sys, user, ..] = cpu_process();
            assert!(sys + user >= 0.0);
        }
    }
}

//! Log lines on stderr as Go's `log` package writes them (grpc-health-probe logs with
//! it): each line whole, in one write.

/// Prints one line on stderr with a single write, as Go's `log` package does (so that
/// lines from concurrent probes never interleave mid-line).
macro_rules! log {
    ($($arg:tt)*) => {
        $crate::log::log_line(format!($($arg)*))
    };
}

pub(crate) fn log_line(mut line: String) {
    use std::io::Write;
    line.push('\n');
    let _ = std::io::stderr().write_all(line.as_bytes());
}

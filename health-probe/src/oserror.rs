//! OS errors in Go's words, as grpc-health-probe prints them inside its messages: the
//! error's text with a lower-case first letter and no "(os error N)".

/// An OS error in Go's words: "connection refused", not "Connection refused (os error 111)".
pub(crate) fn io_error(e: &std::io::Error) -> String {
    let s = e.to_string();
    let s = match s.find(" (os error ") {
        Some(i) if e.raw_os_error().is_some() => s[..i].to_string(),
        _ => s,
    };
    let mut chars = s.chars();
    match chars.next() {
        Some(c) if e.raw_os_error().is_some() => c.to_lowercase().chain(chars).collect(),
        _ => s,
    }
}

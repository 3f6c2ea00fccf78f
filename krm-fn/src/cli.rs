//! What both binaries add to clap's errors.

use clap::error::{ContextKind, ContextValue, ErrorKind};

/// clap's "unexpected argument" for a word that is not a flag says nothing
/// of why: it belongs after `--` (a function argument, an entrypoint). Adds
/// `tip(word)` as clap's tip; other errors are returned as they are.
pub fn tip_for_word_before_dashes(
    mut err: clap::Error,
    tip: impl FnOnce(&str) -> String,
) -> clap::Error {
    if err.kind() != ErrorKind::UnknownArgument {
        return err;
    }
    let Some(ContextValue::String(arg)) = err.get(ContextKind::InvalidArg) else {
        return err;
    };
    if arg.starts_with('-') {
        return err;
    }
    let tip = tip(arg);
    err.insert(
        ContextKind::Suggested,
        ContextValue::StyledStrs(vec![tip.into()]),
    );
    err
}

/// The log filter for a klog verbosity (`--log-level`, `--verbosity`: Porch
/// passes klog's `-v` levels, 0–5, default 2): up to 2 is what klog logs
/// by default (our `info`), 3 and 4 add detail (`debug`), 5 and more
/// everything (`trace`).
pub fn klog_filter(verbosity: u8) -> &'static str {
    match verbosity {
        0..=2 => "info",
        3..=4 => "debug",
        _ => "trace",
    }
}

#[cfg(test)]
mod klog_tests {
    #[test]
    fn klog_levels_map_to_filters() {
        let got: Vec<_> = (0..=6).map(super::klog_filter).collect();
        assert_eq!(
            got,
            ["info", "info", "info", "debug", "debug", "trace", "trace"]
        );
    }
}

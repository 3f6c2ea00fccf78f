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

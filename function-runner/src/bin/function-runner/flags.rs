//! Flags more than one command takes: Go durations, and the `starlark`
//! built-in's limits.

use std::time::Duration;

use krm_fn::duration::parse_go_duration;

/// A Go boolean, as Go's `flag` package reads one (`strconv.ParseBool`):
/// `1`, `t`, `T`, `TRUE`, `true`, `True` and their false counterparts; for
/// the flags Porch's command line sets.
pub(crate) fn parse_go_bool(s: &str) -> Result<bool, String> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(format!(
            "{s:?} is not a boolean (true, false, 1, 0, t, f, TRUE, FALSE, True, False)"
        )),
    }
}

/// A Go duration (`30m`, `1m30s`), for clap.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    parse_go_duration(s).map_err(|e| e.to_string())
}

/// Which of the catalog's images run built-in (serve, eval, render).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct BuiltinsArgs {
    /// Which of the catalog's images of built-in functions
    /// (gcr.io/kpt-fn/NAME, ghcr.io/kptdev/krm-functions-catalog/NAME,
    /// bare NAME) run built in: `versions`, the release tags each built-in
    /// reproduces (docs/builtins.md's table; other tags, digests and no tag
    /// run as images); `any-tag`, every tag and digest; `none`, none
    /// (FunctionConfig goExecutor entries run built in in every mode).
    #[arg(long, value_name = "MODE", default_value = "versions")]
    builtins: function_runner::builtin::BuiltinsMode,
    /// `--builtins=none`.
    #[arg(long, conflicts_with = "builtins")]
    no_default_builtins: bool,
}

impl BuiltinsArgs {
    pub(crate) fn mode(&self) -> function_runner::builtin::BuiltinsMode {
        if self.no_default_builtins {
            function_runner::builtin::BuiltinsMode::None
        } else {
            self.builtins
        }
    }
}

/// The `starlark` built-in's limits (serve, eval, render).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct StarlarkArgs {
    /// The memory a `starlark` function's program may use (its sandbox
    /// process's address space beyond the interpreter's own); past it the
    /// call fails naming this flag. Bytes, or with Ki, Mi, Gi.
    #[arg(long, value_name = "SIZE", default_value = "512Mi", value_parser = parse_size)]
    pub(crate) starlark_memory_limit: u64,
}

impl StarlarkArgs {
    /// Runs every `starlark` program of this process in a sandbox: this
    /// binary, started with the sandbox argument.
    pub(crate) fn configure(&self, max_output_bytes: Option<u64>) -> anyhow::Result<()> {
        let program = std::env::current_exe()
            .map_err(|e| anyhow::anyhow!("finding this binary for the starlark sandbox: {e}"))?;
        krm_builtins::starlark::configure(krm_builtins::starlark::Limits {
            program,
            memory_bytes: self.starlark_memory_limit,
            // serve: what a call may answer; eval and render: what the
            // program may hold.
            max_output_bytes: max_output_bytes.unwrap_or(self.starlark_memory_limit),
            max_depth: 0,
            memory_flag: format!(
                "--starlark-memory-limit {}",
                show_size(self.starlark_memory_limit)
            ),
            // Known to the orphan sweep of a runner that reaps orphans.
            spawn: |cmd| {
                let (child, registered) = krm_fn::exec::spawn_registered(cmd)?;
                Ok((child, Box::new(registered)))
            },
        });
        Ok(())
    }
}

/// `512Mi`, `1Gi`, `65536`: a size in bytes.
fn parse_size(s: &str) -> Result<u64, String> {
    let (digits, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{s:?} is not a size (bytes, or a number with Ki, Mi or Gi)"))?;
    let shift = match unit {
        "" => 0,
        "Ki" => 10,
        "Mi" => 20,
        "Gi" => 30,
        _ => return Err(format!("{s:?}: the unit is Ki, Mi or Gi")),
    };
    let bytes = n
        .checked_mul(1 << shift)
        .ok_or_else(|| format!("{s:?} is too large"))?;
    if bytes < 16 << 20 {
        return Err(format!("{s:?}: at least 16Mi"));
    }
    Ok(bytes)
}

fn show_size(bytes: u64) -> String {
    match bytes {
        b if b % (1 << 30) == 0 => format!("{}Gi", b >> 30),
        b if b % (1 << 20) == 0 => format!("{}Mi", b >> 20),
        b => b.to_string(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    #[test]
    fn go_booleans_read_as_gos_flag_package_reads_them() {
        for yes in ["1", "t", "T", "TRUE", "true", "True"] {
            assert_eq!(super::parse_go_bool(yes), Ok(true), "{yes}");
        }
        for no in ["0", "f", "F", "FALSE", "false", "False"] {
            assert_eq!(super::parse_go_bool(no), Ok(false), "{no}");
        }
        assert!(super::parse_go_bool("yes").unwrap_err().contains("\"yes\""));
    }
}

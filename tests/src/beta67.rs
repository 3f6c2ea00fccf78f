//! Turns the stderr of the installed kpt (v1.0.0-beta.56) into what kpt
//! v1.0.0-beta.67 prints for the same `fn eval` / `fn render` run, so that
//! the tests comparing our commands (which behave as beta.67) with the
//! installed kpt can keep comparing byte for byte.
//!
//! Citations are `path@tag:line` in kpt's repository; "56" is
//! `v1.0.0-beta.56`, "67" is `v1.0.0-beta.67`.
//!
//! # Contract
//!
//! The input must be kpt beta.56's stderr of a run WITH
//! `--truncate-output=false`: beta.67 never truncates, and the lines a
//! truncated beta.56 block dropped cannot be recovered (a truncated block
//! makes [`stderr_as_beta67`] panic rather than guess).
//!
//! Each change, beta.56 → beta.67:
//!
//! - `Package "X": ` → `Package: "X"` (56 `pkg/printer/printer.go@56:132`
//!   with `internal/util/render/executor.go@56:341`; 67
//!   `pkg/printer/printer.go@67:32,146-155`).
//! - render: the blank line 56 printed after each successful non-empty
//!   pipeline (`internal/util/render/executor.go@56:368-369`) is gone
//!   (`pkg/lib/kptops/render_executor.go@67:709-745`). The blank line after
//!   `  Exit code: N` (`runner.go@56:461`, `runner.go@67:457`) and the one
//!   eval prints before `For complete results` (`internal/util/printerutil/printerutil.go@56:27-30`,
//!   `pkg/printer/util.go@67:25-27`) stay.
//! - The `  Results:` block → one line `[Results]: a, b`
//!   (`internal/fnruntime/runner.go@56:439-454,531-569`;
//!   `pkg/fn/runtime/runner.go@67:434-450`,
//!   `pkg/lib/runneroptions/runneroptions.go@67:119-133`).
//! - The `  Stderr:` block → ` Stderr: a, b` with NO newline, so the next
//!   output continues on that line (`runner.go@56:465-476`;
//!   `runner.go@67:461-472`).
//! - Function names `"gcr.io/kpt-fn/X"` in `[RUNNING]`/`[PASS]`/`[FAIL]`
//!   lines and in eval `--save`'s `Added`/`Updated ... in the Kptfile.`
//!   lines → `"ghcr.io/kptdev/krm-functions-catalog/X"`
//!   (`internal/fnruntime/container.go@56:229-235`;
//!   `pkg/lib/runneroptions/runneroptions.go@67:25-37,76-88`), and for
//!   render only, `:latest` appended when X has no tag or digest
//!   (`pkg/fn/runtime/runner.go@67:91-93,543-553`; eval never appends it,
//!   `thirdparty/cmdconfig/commands/cmdeval/cmdeval.go@67:324-328`).
//!
//! Unchanged, so passed through: `[RUNNING]`/`[PASS]`/`[FAIL]` apart from
//! the name (`runner.go@67:226-262`), `  Exit code: N` + blank line,
//! `Successfully executed N function(s) in M package(s).`
//! (`render_executor.go@67:207-217`), `For complete results, see X`,
//! `Added`/`Updated` apart from the name (`cmdeval.go@67:227-255`), and
//! everything else (top-level `Error: ...` lines included).
//!
//! # How the blocks are recovered, and why it is exact
//!
//! Results: 56's `MultiLineFormatter` (`runner.go@56:545-552`, untruncated)
//! writes each item as `"    " + item` with every `\n` of the item turned
//! into a space; it does not trim. So an item is never split over lines,
//! even a multi-line message (`message: "two\nlines"` prints
//! `    [info]: two lines`), and each 4-space-indented line is one item.
//! 67 turns `\n` into spaces too, then `strings.TrimSpace`s each item
//! (`runneroptions.go@67:127-128`); [`str::trim`] trims the same set
//! (Unicode White_Space, which is Go's `unicode.IsSpace`). The item text is
//! the same in both: `ResultItem.String()` (`api/fnresult/v1/types.go@67:116-151`)
//! has kyaml's `framework.Result.String()` format (kyaml v0.15.0
//! `fn/framework/result.go:50-85`).
//!
//! Stderr: both versions split the function's stderr with
//! `strings.Split(stderr, "\n")` and print only a non-empty stderr. 56
//! prints every element `%q`-quoted on its own line, so a stderr ending with
//! a newline shows a final `    ""` line (checked with the installed kpt),
//! which becomes the final empty element in 67: the line ends with `", "`.
//! Each element is unquoted (Go's `strconv.Quote` escapes, invalid UTF-8 as
//! `\xNN`), then trimmed as 67 does. 67 writes the unquoted bytes raw; the
//! tests read stderr with `String::from_utf8_lossy`, so an invalid byte is
//! returned here as U+FFFD, which is what the tests see from beta.67 (the
//! bytes next to an element are ASCII, so decoding per element or per
//! stream is the same).
//!
//! # What the text alone cannot tell (not handled)
//!
//! - Truncated blocks (runs without `--truncate-output=false`): panics.
//! - Only names starting with `gcr.io/kpt-fn/` are rewritten. That prefix
//!   is what beta.56 added to a short name (no `/`); a Kptfile or `-i` that
//!   spelled out `gcr.io/kpt-fn/X` is printed unchanged by 67 (it has a
//!   `/`), but is rewritten here. Render's `:latest` also applies in 67 to
//!   any other untagged image (`example.com/fn` → `example.com/fn:latest`,
//!   and the `builtins/gen-pkg-context` builtin), which the text cannot tell
//!   from an exec function's name (`./fn.sh`), so only rewritten
//!   `gcr.io/kpt-fn/` names get it. A 67 `--image-prefix`/`KPT_IMAGE_PREFIX`
//!   is not modelled (the default prefix is assumed).
//! - eval `--save`: 56 prints `Updated` when the Kptfile already holds the
//!   same (56-expanded) image; 67 compares with the ghcr name, so where a
//!   Kptfile holds `gcr.io/kpt-fn/X` 67 says `Added` (and appends a second
//!   function). The verb is kept as 56 printed it.
//! - Text produced by the function runtime, not kpt: e.g. docker's pull
//!   error names the registry it tried (`Get "https://gcr.io/v2/"`); 67
//!   would try ghcr.io. Stderr contents are kept as 56 captured them.
//! - A result's `field.path` with surrounding spaces: 67 trims it when
//!   decoding (`api/fnresult/v1/types.go@67:175-215`), 56 prints it as is in
//!   the middle of the item; not undone.
//! - 67-only Kptfile behaviour: `kpt.dev/bfs-rendering` (another package
//!   order) and `kpt.dev/save-on-render-failure` (adds a
//!   `Failed to execute any functions...`/`Partially executed...` line,
//!   `render_executor.go@67:207-217`) are annotations 56 ignores.
//! - 56's `ExecError.String()` (`internal/fnruntime/fnerrors.go@56:47-59`),
//!   whose 67 form is `[Stderr]: ...  Exit Code: N`, is never printed by
//!   eval or render: `FunctionRunner.Filter` prints the error itself and
//!   returns `ErrAlreadyHandled` (`runner.go@56:259-263`,
//!   `runner.go@67:250-253`), so it is not handled.

use std::borrow::Cow;

/// Which kpt command printed the stderr.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    /// `kpt fn eval`
    Eval,
    /// `kpt fn render`
    Render,
}

/// What beta.56 prefixed to a short image name
/// (`internal/fnruntime/container.go@56:229-235`).
const OLD_PREFIX: &str = "gcr.io/kpt-fn/";
/// beta.67's default prefix (`pkg/lib/runneroptions/runneroptions.go@67:27`).
const NEW_PREFIX: &str = "ghcr.io/kptdev/krm-functions-catalog/";

/// Title lines of 56's `MultiLineFormatter` (`"  %s:\n"`, `runner.go@56:543`).
const RESULTS_TITLE: &str = "  Results:";
const STDERR_TITLE: &str = "  Stderr:";
/// Indent of each block line (`FnExecErrorIndentation+2`, `runner.go@56:544`,
/// `fnerrors.go@56:26`).
const ITEM_INDENT: &str = "    ";

/// The lines that name the function in a `%q` right after the prefix
/// (`runner.go@56:244-267`). The WASM one comes first: it also starts with
/// `[RUNNING] `.
const RUN_LINE_PREFIXES: [&str; 4] = ["[RUNNING] WASM ", "[RUNNING] ", "[PASS] ", "[FAIL] "];
/// eval `--save`'s messages (`cmdeval.go@56:227-255`).
const SAVE_LINE_PREFIXES: [&str; 2] = ["Added ", "Updated "];
const SAVE_LINE_SUFFIX: &str = " in the Kptfile.";

/// beta.56's stderr of `kpt fn eval`/`kpt fn render` run with
/// `--truncate-output=false` → what beta.67 prints for the same run. See the
/// module documentation for every change and what cannot be recovered.
///
/// Panics when a Results/Stderr block was truncated, or a Stderr line is not
/// Go-`%q`-quoted: the input is then not what this expects.
pub fn stderr_as_beta67(beta56: &str, command: Command) -> String {
    if beta56.is_empty() {
        return String::new();
    }
    let (body, ends_with_newline) = match beta56.strip_suffix('\n') {
        Some(body) => (body, true),
        None => (beta56, false),
    };
    // Only `\n` ends a line: a result message's `\r` is printed raw and
    // `str::lines` would eat it as part of a `\r\n`.
    let lines: Vec<&str> = body.split('\n').collect();

    let mut out = String::with_capacity(beta56.len());
    // Whether the lines just read are a `[PASS]` line with its blocks: in
    // render, a blank line there can only be the end of a pipeline.
    let mut after_pass = false;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        i += 1;
        if line == RESULTS_TITLE {
            let (items, next) = block_items(&lines, i);
            i = next;
            let items: Vec<&str> = items.iter().map(|item| item.trim()).collect();
            out.push_str("[Results]: ");
            out.push_str(&items.join(", "));
            out.push('\n');
            continue;
        }
        if line == STDERR_TITLE {
            let (items, next) = block_items(&lines, i);
            i = next;
            let elements: Vec<String> = items.iter().map(|item| stderr_element(item)).collect();
            // No newline: 67 prints `" %s"` (`runner.go@67:470`), so what
            // follows (`  Exit code`, the next `[RUNNING]`, `Package`,
            // `Successfully`...) continues this line.
            out.push_str(" Stderr: ");
            out.push_str(&elements.join(", "));
            continue;
        }
        if command == Command::Render && after_pass && line.is_empty() {
            after_pass = false;
            continue;
        }
        after_pass = line.starts_with("[PASS] ");
        out.push_str(&rewrite_line(line, command));
        out.push('\n');
    }
    if !ends_with_newline && out.ends_with('\n') {
        out.pop();
    }
    out
}

/// The lines of the block whose title is just before `lines[start]`, without
/// their indent, and the index of the line after the block.
fn block_items<'a>(lines: &[&'a str], start: usize) -> (Vec<&'a str>, usize) {
    let mut end = start;
    let mut items = Vec::new();
    while let Some(item) = lines.get(end).and_then(|l| l.strip_prefix(ITEM_INDENT)) {
        // `...(%d line(s) truncated, use '--truncate-output=false' to
        // disable)` (`runner.go@56:566`); no item starts so: result items
        // start with `[`, stderr lines with `"`.
        assert!(
            !item.starts_with("...("),
            "kpt's output was truncated (run it with --truncate-output=false): {item:?}"
        );
        items.push(item);
        end += 1;
    }
    (items, end)
}

/// One `%q`-quoted line of 56's Stderr block → the element 67 prints.
fn stderr_element(quoted: &str) -> String {
    let (bytes, rest) = go_unquote(quoted)
        .unwrap_or_else(|e| panic!("not a Go-quoted Stderr line ({e}): {quoted:?}"));
    assert!(
        rest.is_empty(),
        "text after a Go-quoted Stderr line: {quoted:?}"
    );
    String::from_utf8_lossy(&bytes).trim().to_owned()
}

/// A line outside the blocks: the package header and the lines naming a
/// function change; all else stays.
fn rewrite_line(line: &str, command: Command) -> Cow<'_, str> {
    if let Some(header) = package_header(line) {
        return Cow::Owned(header);
    }
    for prefix in RUN_LINE_PREFIXES {
        if let Some(rest) = line.strip_prefix(prefix) {
            return match rewrite_quoted_image(rest, command == Command::Render) {
                Some(rest) => Cow::Owned(format!("{prefix}{rest}")),
                None => Cow::Borrowed(line),
            };
        }
    }
    if line.ends_with(SAVE_LINE_SUFFIX) {
        for prefix in SAVE_LINE_PREFIXES {
            if let Some(rest) = line.strip_prefix(prefix) {
                // `--save` is eval-only, and eval never appends `:latest`.
                if let Some(rest) = rewrite_quoted_image(rest, false) {
                    return Cow::Owned(format!("{prefix}{rest}"));
                }
            }
        }
    }
    Cow::Borrowed(line)
}

/// `Package "X": ` (56: `"Package %q: "` + `"\n"`) → `Package: "X"` (67:
/// `"Package: %q"` + `"\n"`); the path is `%q`-quoted the same in both.
fn package_header(line: &str) -> Option<String> {
    let quoted = line.strip_prefix("Package ")?.strip_suffix(": ")?;
    match go_unquote(quoted) {
        Ok((_, "")) => Some(format!("Package: {quoted}")),
        _ => None,
    }
}

/// `rest` starts with a function's `%q`-quoted name: if it is an image 56
/// expanded with `gcr.io/kpt-fn/`, the same text with 67's name; else
/// `None`.
fn rewrite_quoted_image(rest: &str, append_latest: bool) -> Option<String> {
    let quoted = rest.strip_prefix('"')?;
    let close = quoted.find('"')?;
    let (name, after) = (&quoted[..close], &quoted[close + 1..]);
    // An image name has no character `%q` escapes, so its quoted text is the
    // name itself. A backslash means an escape (maybe of the quote found),
    // i.e. not an image.
    if name.contains('\\') {
        return None;
    }
    let mut image = format!("{NEW_PREFIX}{}", name.strip_prefix(OLD_PREFIX)?);
    if append_latest && !has_tag_or_digest(&image) {
        image.push_str(":latest");
    }
    Some(format!("\"{image}\"{after}"))
}

/// kpt's `hasTagOrDigest` (`pkg/fn/runtime/runner.go@67:543-553`): a `@`
/// anywhere, or a `:` after the last `/`.
fn has_tag_or_digest(image: &str) -> bool {
    if image.contains('@') {
        return true;
    }
    match image.rfind('/') {
        None => image.contains(':'),
        Some(slash) => image[slash..].contains(':'),
    }
}

/// Reads the Go double-quoted string `s` starts with, as `strconv.Quote`
/// (`%q`) writes it: its bytes (not necessarily UTF-8: `\xNN` is a byte),
/// and the text after the closing quote.
fn go_unquote(s: &str) -> Result<(Vec<u8>, &str), String> {
    let mut chars = s
        .strip_prefix('"')
        .ok_or("no opening quote")?
        .char_indices();
    let mut out = Vec::new();
    let body = &s[1..];
    while let Some((at, c)) = chars.next() {
        match c {
            '"' => return Ok((out, &body[at + 1..])),
            '\\' => {
                let (_, e) = chars.next().ok_or("backslash at the end")?;
                let mut hex = |n: usize| -> Result<u32, String> {
                    let digits: String = (0..n)
                        .filter_map(|_| chars.next().map(|(_, d)| d))
                        .collect();
                    if digits.len() != n || !digits.chars().all(|d| d.is_ascii_hexdigit()) {
                        return Err(format!("bad \\{e} escape: {digits:?}"));
                    }
                    u32::from_str_radix(&digits, 16).map_err(|err| format!("\\{e}{digits}: {err}"))
                };
                match e {
                    'a' => out.push(0x07),
                    'b' => out.push(0x08),
                    'f' => out.push(0x0c),
                    'n' => out.push(b'\n'),
                    'r' => out.push(b'\r'),
                    't' => out.push(b'\t'),
                    'v' => out.push(0x0b),
                    '\\' | '"' | '\'' => out.push(e as u8),
                    // The byte value itself: how `%q` shows invalid UTF-8.
                    'x' => out.push(hex(2)? as u8),
                    'u' | 'U' => {
                        let code = hex(if e == 'u' { 4 } else { 8 })?;
                        let c = char::from_u32(code).ok_or(format!("\\{e}{code:x}: not a char"))?;
                        out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                    }
                    // `strconv.Quote` never writes octal escapes or others.
                    other => return Err(format!("unknown escape \\{other}")),
                }
            }
            c => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
        }
    }
    Err("no closing quote".to_owned())
}

// The tests below take beta.56 stderr captured from the installed kpt
// (`kpt version` → 1.0.0-beta.56, `NO_COLOR` irrelevant here), with the
// scripts quoted in each test, and expect what beta.67's code prints for
// that run. Where `--results-dir` is given, the output ends with
// `For complete results`.

/// Whether kpt's (beta.56's) file at `path` is ours, as beta.67 would
/// write it: byte for byte; but a Kptfile that our render gave a render
/// status and kpt did not, compared as YAML data without its `status`
/// (beta.67 writes that status into the root Kptfile after an in-place
/// render and marshals the file from its Go types: comments gone, fields
/// reordered; the status itself is checked against beta.67's layouts
/// elsewhere: krm-kpt's `kptfile::status` tests, `render_beta67.rs`), and
/// a results file whose field values beta.67 holds as strings.
pub fn same_file(path: &str, kpt: &[u8], ours: &[u8]) -> bool {
    if kpt == ours {
        return true;
    }
    if path.ends_with("Kptfile") && has_render_status(ours) && !has_render_status(kpt) {
        return without_status(kpt) == without_status(ours);
    }
    if path.ends_with("results.yaml") {
        return Some(results_as_beta67(kpt))
            == serde_yaml_ng::from_slice::<serde_yaml_ng::Value>(ours).ok();
    }
    false
}

/// Whether a Kptfile holds a `Rendered` condition.
fn has_render_status(kptfile: &[u8]) -> bool {
    serde_yaml_ng::from_slice::<serde_yaml_ng::Value>(kptfile)
        .ok()
        .and_then(|v| v.get("status")?.get("conditions")?.as_sequence().cloned())
        .is_some_and(|c| {
            c.iter()
                .any(|c| c.get("type").and_then(|t| t.as_str()) == Some("Rendered"))
        })
}

/// beta.56's `results.yaml` as beta.67 writes it: a result's
/// `field.currentValue`/`proposedValue` are strings there (a number's
/// text, a mapping's YAML; `api/fnresult/v1/types.go@v1.0.0-beta.67:175-215`).
fn results_as_beta67(text: &[u8]) -> serde_yaml_ng::Value {
    use serde_yaml_ng::Value;
    let mut list: Value = serde_yaml_ng::from_slice(text).expect("a results file");
    let items = list.get_mut("items").and_then(Value::as_sequence_mut);
    for item in items.into_iter().flatten() {
        let results = item.get_mut("results").and_then(Value::as_sequence_mut);
        for result in results.into_iter().flatten() {
            let Some(field) = result.get_mut("field").and_then(Value::as_mapping_mut) else {
                continue;
            };
            for key in ["currentValue", "proposedValue"] {
                if let Some(v) = field.get_mut(key) {
                    let text = match &*v {
                        Value::String(s) => s.clone(),
                        Value::Number(n) => n.to_string(),
                        Value::Bool(b) => b.to_string(),
                        other => serde_yaml_ng::to_string(other)
                            .expect("YAML of a value")
                            .trim()
                            .to_owned(),
                    };
                    *v = Value::String(text);
                }
            }
        }
    }
    list
}

/// A Kptfile's data without its `status`, and without what kpt's Go types
/// leave out when they marshal it (`omitempty`: null, empty lists and
/// maps).
fn without_status(kptfile: &[u8]) -> serde_yaml_ng::Value {
    use serde_yaml_ng::Value;
    fn prune(v: &mut Value) {
        match v {
            Value::Mapping(m) => {
                for (_, child) in m.iter_mut() {
                    prune(child);
                }
                m.retain(|_, child| !is_empty(child));
            }
            Value::Sequence(items) => items.iter_mut().for_each(prune),
            _ => {}
        }
    }
    fn is_empty(v: &Value) -> bool {
        match v {
            Value::Null => true,
            Value::Mapping(m) => m.is_empty(),
            Value::Sequence(s) => s.is_empty(),
            _ => false,
        }
    }
    let mut v: Value = serde_yaml_ng::from_slice(kptfile).expect("a Kptfile");
    if let Some(m) = v.as_mapping_mut() {
        m.remove("status");
    }
    prune(&mut v);
    v
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    // `pass.sh` used below (exit 0):
    // ```sh
    // #!/bin/sh
    // cat
    // cat <<'YAML'
    // results:
    // - message: all good
    //   severity: info
    // - message: withfield
    //   field:
    //     path: a.b
    // YAML
    // echo "stderr on pass" >&2
    // ```
    // Its stderr ends with a newline.

    #[test]
    fn eval_pass_with_results_and_stderr() {
        // kpt fn eval pkg --exec ./pass.sh --truncate-output=false --results-dir res2
        let beta56 = concat!(
            "[RUNNING] \"./pass.sh\"\n",
            "[PASS] \"./pass.sh\" in 100ms\n",
            "  Results:\n",
            "    [info]: all good\n",
            "    [info] a.b: withfield\n",
            "  Stderr:\n",
            "    \"stderr on pass\"\n",
            "    \"\"\n",
            "\n",
            "For complete results, see res2/results.yaml\n",
        );
        // `[Results]: ...\n` (runner.go@67:448); ` Stderr: ` without newline,
        // the trailing "\n" of the function's stderr giving a final empty
        // element (runner.go@67:463-470, runneroptions.go@67:126-132); the
        // blank line before `For complete results` (runfn.go@67:250,
        // pkg/printer/util.go@67:25-27) ends the Stderr line.
        let beta67 = concat!(
            "[RUNNING] \"./pass.sh\"\n",
            "[PASS] \"./pass.sh\" in 100ms\n",
            "[Results]: [info]: all good, [info] a.b: withfield\n",
            " Stderr: stderr on pass, \n",
            "For complete results, see res2/results.yaml\n",
        );
        assert_eq!(stderr_as_beta67(beta56, Command::Eval), beta67);

        // Without --results-dir nothing follows: the output ends without a
        // newline.
        let beta56 = concat!(
            "[RUNNING] \"./pass.sh\"\n",
            "[PASS] \"./pass.sh\" in 100ms\n",
            "  Results:\n",
            "    [info]: all good\n",
            "    [info] a.b: withfield\n",
            "  Stderr:\n",
            "    \"stderr on pass\"\n",
            "    \"\"\n",
        );
        let beta67 = concat!(
            "[RUNNING] \"./pass.sh\"\n",
            "[PASS] \"./pass.sh\" in 100ms\n",
            "[Results]: [info]: all good, [info] a.b: withfield\n",
            " Stderr: stderr on pass, ",
        );
        assert_eq!(stderr_as_beta67(beta56, Command::Eval), beta67);
    }

    /// `fail.sh` used below (exit 3): results with a multi-line message
    /// (`"two\nlines"`, `"three\nline\nmessage\n"`) and one padded with spaces
    /// and a tab; stderr with quotes, tabs, leading/trailing spaces, a control
    /// character, non-ASCII, an invalid UTF-8 byte, a `\r`, and NO final
    /// newline:
    /// ```sh
    /// #!/bin/sh
    /// cat >/dev/null
    /// echo "some stderr line" >&2
    /// printf 'a "quoted" line\twith a tab\n' >&2
    /// printf '  lead and trail  \n' >&2
    /// printf 'bs \\ ctl \001 uni \303\251 bad \377 cr\r\n' >&2
    /// printf 'no newline at end' >&2
    /// cat <<'YAML'
    /// apiVersion: config.kubernetes.io/v1
    /// kind: ResourceList
    /// items: []
    /// results:
    /// - message: bad replicas
    ///   severity: error
    ///   resourceRef: {apiVersion: apps/v1, kind: Deployment, name: app, namespace: ns}
    ///   field: {path: spec.replicas, currentValue: 1, proposedValue: 3}
    /// - message: "two\nlines"
    ///   severity: info
    /// - message: "  padded \t "
    ///   severity: warning
    /// - message: "three\nline\nmessage\n"
    /// YAML
    /// exit 3
    /// ```
    /// (the mappings were written in block style in the script.)
    const FAIL_RESULTS_56: &str = concat!(
        "  Results:\n",
        "    [error] apps/v1/Deployment/ns/app spec.replicas: bad replicas\n",
        // 56 turned the message's "\n" into a space (runner.go@56:549): one line.
        "    [info]: two lines\n",
        "    [warning]:   padded \t \n",
        "    [info]: three line message \n",
        "  Stderr:\n",
        "    \"some stderr line\"\n",
        "    \"a \\\"quoted\\\" line\\twith a tab\"\n",
        "    \"  lead and trail  \"\n",
        "    \"bs \\\\ ctl \\x01 uni \u{e9} bad \\xff cr\\r\"\n",
        "    \"no newline at end\"\n",
        "  Exit code: 3\n",
        "\n",
    );
    /// [`FAIL_RESULTS_56`] as 67 prints it: items and stderr elements trimmed
    /// (runneroptions.go@67:127-128), "\n" in items already spaces; stderr
    /// unquoted; no final empty element since the stderr had no final newline;
    /// `  Exit code: 3\n\n` (runner.go@67:457) continues the Stderr line.
    const FAIL_RESULTS_67: &str = concat!(
        "[Results]: [error] apps/v1/Deployment/ns/app spec.replicas: bad replicas, ",
        "[info]: two lines, [warning]:   padded, [info]: three line message\n",
        " Stderr: some stderr line, a \"quoted\" line\twith a tab, lead and trail, ",
        "bs \\ ctl \u{1} uni \u{e9} bad \u{fffd} cr, no newline at end  Exit code: 3\n",
        "\n",
    );

    #[test]
    fn eval_fail_with_results_stderr_and_exit_code() {
        // kpt fn eval pkg --exec ./fail.sh --truncate-output=false --results-dir res
        let beta56 = [
            "[RUNNING] \"./fail.sh\"\n[FAIL] \"./fail.sh\" in 0s\n",
            FAIL_RESULTS_56,
            "\nFor complete results, see res/results.yaml\n",
        ]
        .concat();
        let beta67 = [
            "[RUNNING] \"./fail.sh\"\n[FAIL] \"./fail.sh\" in 0s\n",
            FAIL_RESULTS_67,
            "\nFor complete results, see res/results.yaml\n",
        ]
        .concat();
        assert_eq!(stderr_as_beta67(&beta56, Command::Eval), beta67);

        // Without --results-dir.
        let beta56 = [
            "[RUNNING] \"./fail.sh\"\n[FAIL] \"./fail.sh\" in 0s\n",
            FAIL_RESULTS_56,
        ]
        .concat();
        let beta67 = [
            "[RUNNING] \"./fail.sh\"\n[FAIL] \"./fail.sh\" in 0s\n",
            FAIL_RESULTS_67,
        ]
        .concat();
        assert_eq!(stderr_as_beta67(&beta56, Command::Eval), beta67);
    }

    #[test]
    fn render_two_packages() {
        // r1/Kptfile: mutators [exec ./pass.sh], validators [exec ./pass.sh];
        // r1/sub/Kptfile: mutators [exec ./pass.sh].
        // kpt fn render r1 --allow-exec --truncate-output=false
        let block56 = concat!(
            "  Results:\n",
            "    [info]: all good\n",
            "    [info] a.b: withfield\n",
            "  Stderr:\n",
            "    \"stderr on pass\"\n",
            "    \"\"\n",
        );
        let beta56 = [
            "Package \"r1/sub\": \n",
            "[RUNNING] \"./pass.sh\"\n[PASS] \"./pass.sh\" in 100ms\n",
            block56,
            "\n",
            "Package \"r1\": \n",
            "[RUNNING] \"./pass.sh\"\n[PASS] \"./pass.sh\" in 0s\n",
            block56,
            "[RUNNING] \"./pass.sh\"\n[PASS] \"./pass.sh\" in 0s\n",
            block56,
            "\n",
            "Successfully executed 3 function(s) in 2 package(s).\n",
        ]
        .concat();
        // `Package: %q` (printer.go@67:32,146-155), no blank line after a
        // pipeline (render_executor.go@67:709-745), so each ` Stderr: ...`
        // runs into the next `Package:`/`[RUNNING]`/summary (as in e2e
        // `fn-render/exec-function-stderr/.expected/config.yaml@67`).
        let block67 =
            "[Results]: [info]: all good, [info] a.b: withfield\n Stderr: stderr on pass, ";
        let beta67 = [
            "Package: \"r1/sub\"\n",
            "[RUNNING] \"./pass.sh\"\n[PASS] \"./pass.sh\" in 100ms\n",
            block67,
            "Package: \"r1\"\n",
            "[RUNNING] \"./pass.sh\"\n[PASS] \"./pass.sh\" in 0s\n",
            block67,
            "[RUNNING] \"./pass.sh\"\n[PASS] \"./pass.sh\" in 0s\n",
            block67,
            "Successfully executed 3 function(s) in 2 package(s).\n",
        ]
        .concat();
        assert_eq!(stderr_as_beta67(&beta56, Command::Render), beta67);
    }

    #[test]
    fn render_failure_keeps_blank_line_after_exit_code() {
        // r2/Kptfile: mutators [exec ./pass.sh, exec ./fail.sh]; r2/sub as r1/sub.
        // kpt fn render r2 --allow-exec --truncate-output=false --results-dir res3
        let pass56 = concat!(
            "[RUNNING] \"./pass.sh\"\n",
            "[PASS] \"./pass.sh\" in 0s\n",
            "  Results:\n",
            "    [info]: all good\n",
            "    [info] a.b: withfield\n",
            "  Stderr:\n",
            "    \"stderr on pass\"\n",
            "    \"\"\n",
        );
        let pass67 = concat!(
            "[RUNNING] \"./pass.sh\"\n",
            "[PASS] \"./pass.sh\" in 0s\n",
            "[Results]: [info]: all good, [info] a.b: withfield\n",
            " Stderr: stderr on pass, ",
        );
        let beta56 = [
            "Package \"r2/sub\": \n",
            pass56,
            "\n",
            "Package \"r2\": \n",
            pass56,
            "[RUNNING] \"./fail.sh\"\n[FAIL] \"./fail.sh\" in 0s\n",
            FAIL_RESULTS_56,
            // render prints no blank line of its own here
            // (render/executor.go@56:157, printerutil.go@56:24-31).
            "For complete results, see res3/results.yaml\n",
        ]
        .concat();
        let beta67 = [
            "Package: \"r2/sub\"\n",
            pass67,
            "Package: \"r2\"\n",
            pass67,
            "[RUNNING] \"./fail.sh\"\n[FAIL] \"./fail.sh\" in 0s\n",
            FAIL_RESULTS_67,
            "For complete results, see res3/results.yaml\n",
        ]
        .concat();
        assert_eq!(stderr_as_beta67(&beta56, Command::Render), beta67);
    }

    #[test]
    fn render_empty_pipelines() {
        // q and q/sub: Kptfiles without a pipeline. kpt fn render q
        // --truncate-output=false. 56 prints no blank line for an empty
        // pipeline (executor.go@56:348-353).
        let beta56 = "Package \"q/sub\": \nPackage \"q\": \nSuccessfully executed 0 function(s) in 2 package(s).\n";
        let beta67 = "Package: \"q/sub\"\nPackage: \"q\"\nSuccessfully executed 0 function(s) in 2 package(s).\n";
        assert_eq!(stderr_as_beta67(beta56, Command::Render), beta67);
    }

    #[test]
    fn render_selector_matching_nothing_still_ends_pipeline() {
        // r3/Kptfile: mutators [exec ./pass.sh, selectors [name: nomatch]].
        // kpt fn render r3 --allow-exec --truncate-output=false
        let beta56 = concat!(
            "Package \"r3\": \n",
            "[RUNNING] \"./pass.sh\" on 0 resource(s)\n",
            "[PASS] \"./pass.sh\" in 0s\n",
            "  Results:\n",
            "    [info]: all good\n",
            "    [info] a.b: withfield\n",
            "  Stderr:\n",
            "    \"stderr on pass\"\n",
            "    \"\"\n",
            "\n",
            "Successfully executed 1 function(s) in 1 package(s).\n",
        );
        let beta67 = concat!(
            "Package: \"r3\"\n",
            "[RUNNING] \"./pass.sh\" on 0 resource(s)\n",
            "[PASS] \"./pass.sh\" in 0s\n",
            "[Results]: [info]: all good, [info] a.b: withfield\n",
            " Stderr: stderr on pass, Successfully executed 1 function(s) in 1 package(s).\n",
        );
        assert_eq!(stderr_as_beta67(beta56, Command::Render), beta67);
    }

    /// The docker error every image run gives here (no network): stderr with an
    /// empty line inside and no final newline.
    const DOCKER_FAIL_56: &str = concat!(
        "  Stderr:\n",
        "    \"docker: Error response from daemon: Get \\\"https://gcr.io/v2/\\\": dial tcp: lookup gcr.io on 10.255.255.53:53: no such host\"\n",
        "    \"\"\n",
        "    \"Run 'docker run --help' for more information\"\n",
        "  Exit code: 125\n",
        "\n",
    );
    const DOCKER_FAIL_67: &str = concat!(
        " Stderr: docker: Error response from daemon: Get \"https://gcr.io/v2/\": dial tcp: lookup gcr.io on 10.255.255.53:53: no such host, ",
        ", Run 'docker run --help' for more information  Exit code: 125\n",
        "\n",
    );

    #[test]
    fn render_image_without_tag_gets_ghcr_and_latest() {
        // r4/Kptfile: mutators [image: set-labels, configMap {a: b}, selectors
        // [kind: ConfigMap]]. kpt fn render r4 --truncate-output=false
        let beta56 = [
            "Package \"r4\": \n",
            "[RUNNING] \"gcr.io/kpt-fn/set-labels\" on 1 resource(s)\n",
            "[FAIL] \"gcr.io/kpt-fn/set-labels\" in 0s\n",
            DOCKER_FAIL_56,
        ]
        .concat();
        // runneroptions.go@67:76-88 (prefix), runner.go@67:91-93 (`:latest`);
        // facts/semver-ghcr.md §2.5.
        let beta67 = [
            "Package: \"r4\"\n",
            "[RUNNING] \"ghcr.io/kptdev/krm-functions-catalog/set-labels:latest\" on 1 resource(s)\n",
            "[FAIL] \"ghcr.io/kptdev/krm-functions-catalog/set-labels:latest\" in 0s\n",
            DOCKER_FAIL_67,
        ]
        .concat();
        assert_eq!(stderr_as_beta67(&beta56, Command::Render), beta67);
    }

    #[test]
    fn render_image_with_digest_or_tag_gets_no_latest() {
        // r4/Kptfile with `image: set-labels@sha256:000...0` (64 zeros), no
        // selectors. kpt fn render r4 --truncate-output=false
        let digest = "sha256:0000000000000000000000000000000000000000000000000000000000000000";
        let beta56 = [
            "Package \"r4\": \n",
            &format!("[RUNNING] \"gcr.io/kpt-fn/set-labels@{digest}\"\n"),
            &format!("[FAIL] \"gcr.io/kpt-fn/set-labels@{digest}\" in 0s\n"),
            DOCKER_FAIL_56,
        ]
        .concat();
        let beta67 = [
            "Package: \"r4\"\n",
            &format!("[RUNNING] \"ghcr.io/kptdev/krm-functions-catalog/set-labels@{digest}\"\n"),
            &format!("[FAIL] \"ghcr.io/kptdev/krm-functions-catalog/set-labels@{digest}\" in 0s\n"),
            DOCKER_FAIL_67,
        ]
        .concat();
        assert_eq!(stderr_as_beta67(&beta56, Command::Render), beta67);

        // A tag (facts/semver-ghcr.md §2.5: `set-namespace:v0.1.3`); the e2e
        // `selectors/generator/.expected/config.yaml@56` lines.
        let beta56 = "[RUNNING] \"gcr.io/kpt-fn/set-namespace:v0.1.3\" on 1 resource(s)\n[PASS] \"gcr.io/kpt-fn/set-namespace:v0.1.3\" in 0s\n";
        let beta67 = "[RUNNING] \"ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.1.3\" on 1 resource(s)\n[PASS] \"ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.1.3\" in 0s\n";
        assert_eq!(stderr_as_beta67(beta56, Command::Render), beta67);
    }

    #[test]
    fn eval_image_without_tag_gets_ghcr_but_no_latest() {
        // kpt fn eval r4 -i set-labels --truncate-output=false -- a=b
        let beta56 = [
            "[RUNNING] \"gcr.io/kpt-fn/set-labels\"\n",
            "[FAIL] \"gcr.io/kpt-fn/set-labels\" in 0s\n",
            DOCKER_FAIL_56,
        ]
        .concat();
        // cmdeval.go@67:324-328, runfn.go@67:353-356: no `:latest` in eval.
        let beta67 = [
            "[RUNNING] \"ghcr.io/kptdev/krm-functions-catalog/set-labels\"\n",
            "[FAIL] \"ghcr.io/kptdev/krm-functions-catalog/set-labels\" in 0s\n",
            DOCKER_FAIL_67,
        ]
        .concat();
        assert_eq!(stderr_as_beta67(&beta56, Command::Eval), beta67);
    }

    #[test]
    fn eval_save_lines() {
        // e2e `fn-eval/save-fn/image/.expected/config.yaml@56` (kpt fn eval -s -t
        // mutator -i set-namespace:v0.1.3 -- namespace=staging); 67's message is
        // `Added %q as %v in the Kptfile.` with the ghcr name (cmdeval.go@67:249,
        // `.expected/config.yaml@67` of the same test).
        let beta56 = concat!(
            "[RUNNING] \"gcr.io/kpt-fn/set-namespace:v0.1.3\"\n",
            "[PASS] \"gcr.io/kpt-fn/set-namespace:v0.1.3\" in 0s\n",
            "Added \"gcr.io/kpt-fn/set-namespace:v0.1.3\" as mutator in the Kptfile.\n",
        );
        let beta67 = concat!(
            "[RUNNING] \"ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.1.3\"\n",
            "[PASS] \"ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.1.3\" in 0s\n",
            "Added \"ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.1.3\" as mutator in the Kptfile.\n",
        );
        assert_eq!(stderr_as_beta67(beta56, Command::Eval), beta67);

        // No `:latest` for an untagged name in eval's messages either.
        assert_eq!(
            stderr_as_beta67("Updated \"gcr.io/kpt-fn/set-labels\" as validator in the Kptfile.\n", Command::Eval),
            "Updated \"ghcr.io/kptdev/krm-functions-catalog/set-labels\" as validator in the Kptfile.\n"
        );

        // An exec function's messages stay (captured: kpt fn eval s1 --exec
        // ./pass.sh -s -t mutator --truncate-output=false, run twice).
        let beta56 = concat!(
            "[RUNNING] \"./pass.sh\"\n",
            "[PASS] \"./pass.sh\" in 100ms\n",
            "  Results:\n",
            "    [info]: all good\n",
            "    [info] a.b: withfield\n",
            "  Stderr:\n",
            "    \"stderr on pass\"\n",
            "    \"\"\n",
            "Updated \"./pass.sh\" as mutator in the Kptfile.\n",
        );
        let beta67 = concat!(
            "[RUNNING] \"./pass.sh\"\n",
            "[PASS] \"./pass.sh\" in 100ms\n",
            "[Results]: [info]: all good, [info] a.b: withfield\n",
            " Stderr: stderr on pass, Updated \"./pass.sh\" as mutator in the Kptfile.\n",
        );
        assert_eq!(stderr_as_beta67(beta56, Command::Eval), beta67);
    }

    #[test]
    fn stderr_with_and_without_final_newline() {
        // 56 prints a final `""` for a final "\n" (strings.Split,
        // runner.go@56:470); 67 joins the same elements (runner.go@67:466).
        let with = "[PASS] \"f\" in 0s\n  Stderr:\n    \"a\"\n    \"b\"\n    \"\"\n";
        assert_eq!(
            stderr_as_beta67(with, Command::Eval),
            "[PASS] \"f\" in 0s\n Stderr: a, b, "
        );
        let without = "[PASS] \"f\" in 0s\n  Stderr:\n    \"a\"\n    \"b\"\n";
        assert_eq!(
            stderr_as_beta67(without, Command::Eval),
            "[PASS] \"f\" in 0s\n Stderr: a, b"
        );
        // A stderr of just "\n".
        let newline = "[PASS] \"f\" in 0s\n  Stderr:\n    \"\"\n    \"\"\n";
        assert_eq!(
            stderr_as_beta67(newline, Command::Eval),
            "[PASS] \"f\" in 0s\n Stderr: , "
        );
    }

    #[test]
    fn stderr_quotes_tabs_and_escapes() {
        // esc.sh: `cat`, then to stderr (no final newline):
        //   printf 'say "hi"\tthen\ttab\n'
        //   printf '\a\b\f\v \342\200\213 \363\240\200\201 \360\237\230\200 \\n\n'
        //   printf '\t \302\240x\343\200\200 \r\n'
        //   printf '\303'
        // kpt fn eval pkg --exec ./esc.sh --truncate-output=false
        // (56's %q: non-printable U+200B/U+E0001/U+00A0/U+3000 as \u/\U,
        // printable U+1F600 raw, the invalid byte as \xc3.)
        let beta56 = concat!(
            "[RUNNING] \"./esc.sh\"\n",
            "[PASS] \"./esc.sh\" in 100ms\n",
            "  Stderr:\n",
            "    \"say \\\"hi\\\"\\tthen\\ttab\"\n",
            "    \"\\a\\b\\f\\v \\u200b \\U000e0001 \u{1f600} \\\\n\"\n",
            "    \"\\t \\u00a0x\\u3000 \\r\"\n",
            "    \"\\xc3\"\n",
        );
        // Unquoted, then TrimSpace'd (runneroptions.go@67:127-128): only
        // Unicode white space at the ends goes (\a is not; U+00A0, U+3000, \t,
        // \r are); the lone byte 0xC3 reads as U+FFFD.
        let beta67 = concat!(
            "[RUNNING] \"./esc.sh\"\n",
            "[PASS] \"./esc.sh\" in 100ms\n",
            " Stderr: say \"hi\"\tthen\ttab, ",
            "\u{7}\u{8}\u{c}\u{b} \u{200b} \u{e0001} \u{1f600} \\n, x, \u{fffd}",
        );
        assert_eq!(stderr_as_beta67(beta56, Command::Eval), beta67);
    }

    #[test]
    fn wasm_running_line() {
        // `[RUNNING] WASM %q` (runner.go@56:244, runner.go@67:229-234).
        assert_eq!(
            stderr_as_beta67("[RUNNING] WASM \"gcr.io/kpt-fn/fn\"\n", Command::Render),
            "[RUNNING] WASM \"ghcr.io/kptdev/krm-functions-catalog/fn:latest\"\n"
        );
    }

    #[test]
    fn other_lines_pass_through() {
        // Names not under gcr.io/kpt-fn/, exec names with escapes, top-level
        // errors, blank lines not after a [PASS] block, and eval's blank lines.
        let text = concat!(
            "[RUNNING] \"example.com/fn\"\n",
            "[FAIL] \"sh -c \\\"gcr.io/kpt-fn/x\\\"\" in 0s\n",
            "Error: must run with `--allow-exec` option to allow running function binaries \n",
            "\n",
            "Package \"odd\" name\": \n",
        );
        assert_eq!(stderr_as_beta67(text, Command::Render), text);
        let eval = "[PASS] \"./f\" in 0s\n\nFor complete results, see r/results.yaml\n";
        assert_eq!(stderr_as_beta67(eval, Command::Eval), eval);
        assert_eq!(stderr_as_beta67("", Command::Render), "");
    }

    #[test]
    fn package_path_with_escapes() {
        assert_eq!(
            stderr_as_beta67("Package \"a \\\"b\\\"\": \n", Command::Render),
            "Package: \"a \\\"b\\\"\"\n"
        );
    }

    #[test]
    #[should_panic(expected = "--truncate-output=false")]
    fn truncated_input_is_refused() {
        // kpt's default output (e2e `fn-render/exec-function-stderr/.expected/config.yaml@56`).
        stderr_as_beta67(
            concat!(
                "  Stderr:\n",
                "    \"Hello world 0!\"\n",
                "    ...(18 line(s) truncated, use '--truncate-output=false' to disable)\n",
            ),
            Command::Render,
        );
    }
}

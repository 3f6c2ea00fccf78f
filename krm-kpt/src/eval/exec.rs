//! Running the function: a local command (`--exec`, split as Go's `shlex`
//! splits it), an image through an [`Evaluator`], or a built-in; what it
//! wrote and how it exited.

use std::io;
use std::time::Duration;

use bytes::Bytes;
use krm_fn::exec::{self, ExecError, ExecSpec, ExitStatus, Limits};
use proto::pb::EvaluateFunctionRequest;

use super::error::Error;
use krm_fn::evaluator::{EvalRequest, Evaluator};
use krm_yaml::package::go_quote;

/// What the function did.
pub(super) struct Ran {
    pub(super) exit_code: i32,
    pub(super) stdout: Bytes,
    pub(super) stderr: Bytes,
}

/// Splits a command line as Go's `shlex.Split` does (quotes and
/// backslashes, no expansion).
pub fn shlex_split(s: &str) -> Result<Vec<String>, &'static str> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some(n) => cur.push(n),
                    None => return Err("EOF found after escape character"),
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(n) => cur.push(n),
                        None => return Err("EOF found when expecting closing quote"),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(n @ ('"' | '\\' | '$' | '`')) => cur.push(n),
                            Some('\n') => {}
                            Some(n) => {
                                cur.push('\\');
                                cur.push(n);
                            }
                            None => return Err("EOF found after escape character"),
                        },
                        Some(n) => cur.push(n),
                        None => return Err("EOF found when expecting closing quote"),
                    }
                }
            }
            '#' if !in_word => {
                for n in chars.by_ref() {
                    if n == '\n' {
                        break;
                    }
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Ok(words)
}

pub(super) async fn run_exec(
    cmd: &str,
    input: Bytes,
    max_output_bytes: usize,
    env: &[(String, String)],
) -> Result<Ran, Error> {
    let argv = shlex_split(cmd).map_err(|e| Error::BadExec {
        command: cmd.to_owned(),
        reason: e,
    })?;
    let mut spec = ExecSpec::from_argv(argv).ok_or_else(|| Error::BadExec {
        command: cmd.to_owned(),
        reason: "it is empty",
    })?;
    spec.env = env.iter().map(|(k, v)| (k.into(), v.into())).collect();
    let limits = Limits {
        max_stdout_bytes: max_output_bytes,
        max_stderr_bytes: 16 << 20,
        drain_grace: Duration::from_millis(500),
    };
    match exec::run(&spec, input, &limits).await {
        Ok(out) => Ok(Ran {
            exit_code: match out.status {
                ExitStatus::Code(c) => c,
                // Go's ExitCode() for a process killed by a signal.
                ExitStatus::Signal(_) => -1,
            },
            stdout: out.stdout,
            stderr: out.stderr,
        }),
        Err(ExecError::Spawn { program, source }) => Err(Error::Exec(
            if !program.contains('/') && source.kind() == io::ErrorKind::NotFound {
                format!(
                    "exec: {}: executable file not found in $PATH",
                    go_quote(&program)
                )
            } else {
                format!("fork/exec {program}: {}", go_os_error(&source))
            },
        )),
        Err(e) => Err(Error::Exec(e.to_string())),
    }
}

/// An OS error in Go's words: `no such file or directory`.
pub(crate) fn go_os_error(e: &io::Error) -> String {
    let s = e.to_string();
    let s = match s.find(" (os error") {
        Some(i) => &s[..i],
        None => &s,
    };
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_lowercase().chain(c).collect(),
        None => String::new(),
    }
}

pub(super) async fn run_image(
    image: &str,
    input: Bytes,
    evaluator: &dyn Evaluator,
) -> Result<Ran, Error> {
    let req = EvalRequest::new(EvaluateFunctionRequest {
        resource_list: input,
        image: image.to_owned(),
        tag: String::new(),
    });
    match evaluator.evaluate(req).await {
        Ok(resp) => Ok(Ran {
            exit_code: 0,
            stdout: resp.resource_list,
            stderr: container_stderr(&resp.log).into(),
        }),
        Err(e) => Err(Error::Evaluator(e.to_string())),
    }
}

/// A built-in function on the ResourceList's text, answered as its
/// container would (stderr as kpt reads a container's).
/// Its output is held to `max_output_bytes` as a command's stdout is.
pub(super) fn run_builtin(
    builtin: &krm_builtins::Builtin,
    image: &str,
    input: &[u8],
    max_output_bytes: usize,
) -> Result<Ran, Error> {
    let ctx = krm_builtins::Context::new().with_release(builtin.release_of(image));
    let out = krm_builtins::container::on_big_stack(|| {
        krm_builtins::container::run_on_bytes(builtin, input, &ctx)
    })
    .flatten()
    .ok_or_else(|| Error::Evaluator(format!("built-in {} was cancelled", builtin.name)))?;
    if out.stdout.len() > max_output_bytes {
        return Err(Error::Exec(
            ExecError::OutputTooLarge {
                limit: max_output_bytes,
            }
            .to_string(),
        ));
    }
    Ok(Ran {
        exit_code: out.exit_code,
        stdout: Bytes::from(out.stdout),
        stderr: container_stderr(out.stderr.as_bytes()).into(),
    })
}

/// An image function's stderr as kpt shows it: kpt reads a container's
/// stderr line by line (Go's `bufio.Scanner`: a final newline ends the last
/// line rather than starting an empty one, and a `\r` before a newline
/// goes) and joins the lines with `\n`.
pub(super) fn container_stderr(log: &[u8]) -> Vec<u8> {
    let mut lines: Vec<&[u8]> = log.split(|b| *b == b'\n').collect();
    if log.ends_with(b"\n") {
        lines.pop();
    }
    let lines: Vec<&[u8]> = lines
        .into_iter()
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
        .collect();
    lines.join(&b'\n')
}

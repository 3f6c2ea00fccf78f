//! The README and `docs/*.md` stay true (docs/testing.md, "The docs test"):
//!
//! - every fenced shell block says who runs it: ```` ```sh docs-test ````
//!   (run here) or ```` ```sh run-by=PATH[#TEST],... ```` (an existing test
//!   or script, which must exist); an unmarked one fails, naming its file
//!   and line;
//! - the `docs-test` blocks run: `bash -euo pipefail` in a fresh temporary
//!   directory holding copies of `examples/` and `deploy/`, the workspace's
//!   binaries first on `PATH`, bounded in time, in a process group of their
//!   own that is killed after; nothing is left behind;
//! - every flag the binaries' `--help` prints is found in `docs/`;
//! - relative links (and their anchors) resolve;
//! - the README's first command, the demo, answers.

use std::collections::BTreeSet;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use e2e_tests::{
    bin, bin_dir, output_within, prerequisite, require_docker, require_kubeconfig, require_root,
};

/// How long one `docs-test` block may run.
const BLOCK_TIMEOUT: Duration = Duration::from_secs(60);

/// How long processes a block started may take to go once it ended.
const LEFTOVER_GRACE: Duration = Duration::from_secs(3);

/// Languages whose blocks are commands.
const SHELL_LANGUAGES: &[&str] = &["sh", "bash", "shell", "console", "zsh"];

/// Where the paths a `run-by` block names must exist (relative to the
/// repository), when a word starts so.
const REPO_PATH_PREFIXES: &[&str] = &[
    "./",
    "../",
    "deploy/",
    "examples/",
    "docs/",
    "tests/",
    ".ci/",
    "function-runner/",
    "wrapper-server/",
    "health-probe/",
    "krm-",
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .expect("the repository root")
}

/// README.md and docs/*.md, in a fixed order.
fn pages() -> Vec<PathBuf> {
    let root = repo();
    let mut pages = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// A fenced code block of a page.
#[derive(Debug)]
struct Block {
    /// `README.md`, `docs/runner.md`.
    page: String,
    /// 1-based line of the opening fence.
    line: usize,
    lang: String,
    /// The info string's words after the language.
    marks: Vec<String>,
    text: String,
}

impl Block {
    fn at(&self) -> String {
        format!("{}:{}", self.page, self.line)
    }
}

fn relative(path: &Path) -> String {
    path.strip_prefix(repo())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// The fenced blocks of `text` (backtick or tilde fences of three or more;
/// a block ends at a fence of the same character at least as long).
fn blocks(page: &str, text: &str) -> Vec<Block> {
    let mut found = Vec::new();
    let mut open: Option<(char, usize, Block)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let fence_char = trimmed.chars().next().filter(|c| *c == '`' || *c == '~');
        let fence_len = fence_char.map_or(0, |c| trimmed.chars().take_while(|x| *x == c).count());
        match (&mut open, fence_char) {
            (Some((c, n, _)), Some(fc))
                if fc == *c && fence_len >= *n && trimmed[fence_len..].trim().is_empty() =>
            {
                let (_, _, block) = open.take().expect("open");
                found.push(block);
            }
            (Some((_, _, block)), _) => {
                block.text.push_str(line);
                block.text.push('\n');
            }
            (None, Some(fc)) if fence_len >= 3 => {
                let mut words = trimmed[fence_len..].split_whitespace().map(str::to_string);
                let lang = words.next().unwrap_or_default();
                open = Some((
                    fc,
                    fence_len,
                    Block {
                        page: page.to_string(),
                        line: i + 1,
                        lang,
                        marks: words.collect(),
                        text: String::new(),
                    },
                ));
            }
            (None, _) => {}
        }
    }
    found
}

fn all_blocks() -> Vec<Block> {
    pages()
        .iter()
        .flat_map(|p| {
            let text = std::fs::read_to_string(p).expect("a page");
            blocks(&relative(p), &text)
        })
        .collect()
}

fn is_shell(block: &Block) -> bool {
    SHELL_LANGUAGES.contains(&block.lang.as_str())
}

fn runs_here(block: &Block) -> bool {
    block.marks.iter().any(|m| m == "docs-test")
}

fn run_by(block: &Block) -> Option<&str> {
    block.marks.iter().find_map(|m| m.strip_prefix("run-by="))
}

/// What a `docs-test` block needs, from its `needs=` marks.
fn needs(block: &Block) -> Vec<&str> {
    block
        .marks
        .iter()
        .filter_map(|m| m.strip_prefix("needs="))
        .flat_map(|n| n.split(','))
        .collect()
}

/// Why `block`'s marks are wrong, if they are.
fn mark_problem(block: &Block) -> Option<String> {
    if !is_shell(block) {
        return None;
    }
    match (runs_here(block), run_by(block)) {
        (false, None) => Some(format!(
            "an unmarked `{}` block: say who runs it (`{} docs-test`, or `{} run-by=PATH#TEST`; docs/testing.md)",
            block.lang, block.lang, block.lang
        )),
        (true, Some(_)) => Some("both docs-test and run-by: one runs it".into()),
        (true, None) => needs(block)
            .into_iter()
            .find(|n| !["docker", "root", "kubeconfig"].contains(n))
            .map(|n| format!("needs={n}: known needs are docker, root, kubeconfig")),
        (false, Some(list)) => {
            let root = repo();
            let mut problems = Vec::new();
            for target in list.split(',') {
                let (path, test) = target.split_once('#').unwrap_or((target, ""));
                let file = root.join(path);
                let Ok(source) = std::fs::read_to_string(&file) else {
                    problems.push(format!("run-by names {path}, which is not a file here"));
                    continue;
                };
                if !test.is_empty() && !source.contains(&format!("fn {test}(")) {
                    problems.push(format!("run-by names {path}#{test}: no `fn {test}(` in it"));
                }
            }
            for word in block
                .text
                .split(|c: char| c.is_whitespace() || "\"'`;()|<>=".contains(c))
                .filter(|w| REPO_PATH_PREFIXES.iter().any(|p| w.starts_with(p)))
                .filter(|w| !w.contains('$') && !w.contains('*'))
            {
                let word = word.trim_end_matches([',', ':']);
                if !root.join(word).exists() {
                    problems.push(format!("names {word}, which does not exist in the repository"));
                }
            }
            (!problems.is_empty()).then(|| problems.join("; "))
        }
    }
}

#[test]
fn every_shell_block_says_who_runs_it() {
    let problems: Vec<String> = all_blocks()
        .iter()
        .filter_map(|b| mark_problem(b).map(|p| format!("{}: {p}", b.at())))
        .collect();
    assert!(
        problems.is_empty(),
        "shell blocks:\n{}",
        problems.join("\n")
    );
}

/// Copies `from` into `to` (`cp -a`).
fn copy_tree(from: &Path, to: &Path) -> anyhow::Result<()> {
    let out = output_within(
        Command::new("cp").arg("-a").arg(from).arg(to),
        None,
        Duration::from_secs(30),
    )?;
    if !out.status.success() {
        bail!(
            "cp -a {}: {}",
            from.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// The processes whose environment carries `marker` (this block's), other
/// than zombies.
fn marked_processes(marker: &str) -> Vec<(i32, String)> {
    let needle = marker.as_bytes();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|kv| kv == needle))
        })
        .map(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| {
                    String::from_utf8_lossy(&c)
                        .replace('\0', " ")
                        .trim()
                        .to_string()
                })
                .unwrap_or_default();
            (pid, cmd)
        })
        .collect()
}

fn kill(pid: i32) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    );
}

/// Runs one `docs-test` block; an error says what went wrong, with its
/// output.
fn run_block(block: &Block, n: usize) -> anyhow::Result<()> {
    let dir = tempfile::Builder::new().prefix("docs-test.").tempdir()?;
    let work = dir.path().join("work");
    let tmp = dir.path().join("tmp");
    std::fs::create_dir_all(&work)?;
    std::fs::create_dir_all(&tmp)?;
    let root = repo();
    for tree in ["examples", "deploy"] {
        copy_tree(&root.join(tree), &work)?;
    }
    let path = format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // Every process the block starts inherits this: what is still running
    // after it is found by it.
    let marker = format!("KRM_DOCS_TEST_BLOCK={}.{n}", std::process::id());
    let (key, value) = marker.split_once('=').expect("marker");
    let stdout_path = dir.path().join("stdout");
    let stderr_path = dir.path().join("stderr");
    let mut child = Command::new("bash")
        .args(["-euo", "pipefail", "-c", &block.text])
        .current_dir(&work)
        .env("PATH", path)
        .env("TMPDIR", &tmp)
        .env("REPO", &root)
        .env(key, value)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout_path)?)
        .stderr(std::fs::File::create(&stderr_path)?)
        .process_group(0)
        .spawn()
        .context("spawning bash")?;
    let pgid = nix::unistd::Pid::from_raw(child.id() as i32);
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if started.elapsed() > BLOCK_TIMEOUT {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // What the block left running: given a moment to go (a server's pods
    // exit once it did), then reported and killed.
    let deadline = Instant::now() + LEFTOVER_GRACE;
    let mut left = marked_processes(&marker);
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        left = marked_processes(&marker);
    }
    let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
    for (pid, _) in &left {
        kill(*pid);
    }
    let _ = child.wait();
    let output = format!(
        "--- stdout\n{}--- stderr\n{}",
        std::fs::read_to_string(&stdout_path).unwrap_or_default(),
        std::fs::read_to_string(&stderr_path).unwrap_or_default()
    );
    match status {
        None => bail!("did not finish within {BLOCK_TIMEOUT:?}: killed\n{output}"),
        Some(s) if !s.success() => bail!("exited with {s}\n{output}"),
        Some(_) if !left.is_empty() => {
            let names: Vec<String> = left.iter().map(|(p, c)| format!("{p} {c}")).collect();
            bail!(
                "left processes running (killed now): {}\n{output}",
                names.join(", ")
            )
        }
        Some(_) => Ok(()),
    }
}

#[test]
fn the_docs_test_blocks_run() {
    // The binaries the blocks use (a clear message if one is not built).
    for name in [
        "function-runner",
        "wrapper-server",
        "health-probe",
        "example-fn",
    ] {
        bin(name);
    }
    let mut failures = Vec::new();
    let mut ran = 0;
    for (n, block) in all_blocks()
        .iter()
        .filter(|b| is_shell(b) && runs_here(b))
        .enumerate()
    {
        let mut missing = false;
        for need in needs(block) {
            let check = match need {
                "docker" => require_docker(),
                "root" => require_root(),
                "kubeconfig" => require_kubeconfig().map(|_| ()),
                _ => continue, // every_shell_block_says_who_runs_it names it
            };
            if prerequisite(check.with_context(|| block.at())).is_none() {
                missing = true;
            }
        }
        if missing {
            continue;
        }
        let started = Instant::now();
        if let Err(err) = run_block(block, n) {
            failures.push(format!("{}: {err:#}", block.at()));
        }
        eprintln!("{} ran in {:?}", block.at(), started.elapsed());
        ran += 1;
    }
    assert!(ran > 0, "no docs-test block found");
    assert!(
        failures.is_empty(),
        "docs-test blocks failed:\n\n{}",
        failures.join("\n\n")
    );
}

/// Everything `program ARGS` prints (stdout and stderr), whatever its exit.
fn help(program: &str, args: &[&str]) -> String {
    let out = output_within(
        Command::new(bin(program)).args(args),
        None,
        Duration::from_secs(30),
    )
    .unwrap_or_else(|e| panic!("{program} {args:?}: {e:#}"));
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn is_flag_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

/// The flags `text` names with `dashes` in front (`--foo`, `-foo`): a
/// dash run of exactly that length, not inside a word, then a name.
fn flags_in(text: &str, dashes: usize) -> BTreeSet<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut found = BTreeSet::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '-' || (i > 0 && is_flag_char(chars[i - 1])) {
            i += 1;
            continue;
        }
        let run = chars[i..].iter().take_while(|c| **c == '-').count();
        let start = i + run;
        let name: String = chars[start..]
            .iter()
            .take_while(|c| is_flag_char(**c))
            .collect();
        if run == dashes && name.chars().next().is_some_and(|c| c.is_ascii_alphabetic()) {
            found.insert(format!(
                "{}{}",
                "-".repeat(dashes),
                name.trim_end_matches('-')
            ));
        }
        i = start + name.len().max(1);
    }
    found
}

#[test]
fn every_flag_the_binaries_print_is_in_the_docs() {
    let mut docs = String::new();
    for page in pages()
        .iter()
        .filter(|p| p.starts_with(repo().join("docs")))
    {
        docs.push_str(&std::fs::read_to_string(page).expect("a page"));
        docs.push('\n');
    }
    let documented_long = flags_in(&docs, 2);
    let documented_short = flags_in(&docs, 1);
    let mut missing = Vec::new();
    let clap = [
        ("function-runner", vec!["--help"]),
        ("function-runner", vec!["serve", "--help"]),
        ("function-runner", vec!["eval", "--help"]),
        ("function-runner", vec!["render", "--help"]),
        ("function-runner", vec!["crd", "--help"]),
        ("wrapper-server", vec!["--help"]),
        ("wrapper-server", vec!["install", "--help"]),
    ];
    for (program, args) in &clap {
        let text = help(program, args);
        for flag in flags_in(&text, 2) {
            if flag != "--help" && flag != "--version" && !documented_long.contains(&flag) {
                missing.push(format!("{program} {}: {flag}", args.join(" ")));
            }
        }
    }
    // health-probe prints Go's flag usage: `  -addr string`.
    let usage = help("health-probe", &["-help"]);
    let probe_flags: Vec<String> = usage
        .lines()
        .filter_map(|l| l.strip_prefix("  -"))
        .filter_map(|l| l.split_whitespace().next())
        .map(|f| format!("-{f}"))
        .collect();
    assert!(
        probe_flags.iter().any(|f| f == "-addr"),
        "health-probe -help printed no flags:\n{usage}"
    );
    for flag in probe_flags {
        if !documented_short.contains(&flag) {
            missing.push(format!("health-probe: {flag}"));
        }
    }
    assert!(
        missing.is_empty(),
        "flags the binaries print that no page of docs/ mentions:\n{}",
        missing.join("\n")
    );
}

/// GitHub's anchor of a heading: lower case, only letters, digits, `-`
/// and `_` kept, spaces made `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a page's headings (outside fenced blocks).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut in_fence = false;
    let mut found = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
        } else if !in_fence && line.starts_with('#') {
            found.insert(slug(line.trim_start_matches('#')));
        }
    }
    found
}

/// `[text](target)` links outside fenced blocks and code spans, with their
/// line.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut in_fence = false;
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        // Code spans hold no links.
        let prose: String = line
            .split('`')
            .enumerate()
            .filter(|(n, _)| n % 2 == 0)
            .map(|(_, s)| s)
            .collect::<Vec<_>>()
            .join(" ");
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            found.push((i + 1, after[..end].to_string()));
            rest = &after[end..];
        }
    }
    found
}

#[test]
fn relative_links_and_their_anchors_resolve() {
    let mut broken = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).expect("a page");
        for (line, target) in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let file = if path.is_empty() {
                page.clone()
            } else {
                page.parent().expect("a directory").join(path)
            };
            let at = format!("{}:{line}: {target}", relative(&page));
            if !file.exists() {
                broken.push(format!("{at}: no such file"));
                continue;
            }
            if !anchor.is_empty() && file.extension().is_some_and(|x| x == "md") {
                let target_text = std::fs::read_to_string(&file).expect("a page");
                if !anchors(&target_text).contains(anchor) {
                    broken.push(format!("{at}: no heading with that anchor"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The README's first command, `./examples/demo.sh`, is `cargo build` then
/// the `demo` binary: the binary is run here (the build is this test's
/// own).
#[test]
fn the_readme_demo_answers() {
    let out = output_within(
        &mut Command::new(bin("demo")),
        None,
        Duration::from_secs(60),
    )
    .expect("the demo");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("kind: ResourceList"),
        "the demo failed ({}):\n--- stdout\n{stdout}--- stderr\n{stderr}",
        out.status
    );
    let demo_sh = std::fs::read_to_string(repo().join("examples/demo.sh")).expect("demo.sh");
    assert!(
        demo_sh.contains("/debug/demo"),
        "examples/demo.sh no longer runs the demo binary this test runs"
    );
}

#[test]
fn the_block_parser_reads_fences_and_marks() {
    let text = "a\n```sh docs-test needs=docker\necho hi\n```\n````text\n```\n````\n";
    let found = blocks("x.md", text);
    assert_eq!(found.len(), 2);
    assert_eq!(found[0].line, 2);
    assert_eq!(found[0].lang, "sh");
    assert_eq!(found[0].marks, ["docs-test", "needs=docker"]);
    assert_eq!(found[0].text, "echo hi\n");
    assert_eq!(found[1].text, "```\n");
    assert_eq!(
        flags_in("--port 9445, -addr x, --max-pods=1, a--b, ---x, -- cat", 2),
        BTreeSet::from(["--max-pods".to_string(), "--port".to_string()])
    );
    assert_eq!(slug("Outcome → status"), "outcome--status");
    assert_eq!(
        slug("`starlark`: the user's program, in a sandbox"),
        "starlark-the-users-program-in-a-sandbox"
    );
}

//! Finding an entrypoint: bare names on `PATH`, paths checked as given.

use super::*;
use std::os::unix::fs::PermissionsExt;

fn spec(program: &str) -> ExecSpec {
    ExecSpec::from_argv([program]).unwrap_or_else(|| unreachable!())
}

#[test]
fn bare_names_are_found_on_path_and_paths_are_checked() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let tool = dir.path().join("fn-tool");
    std::fs::write(&tool, "#!/bin/sh\n").expect("written");
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).expect("mode");
    let plain = dir.path().join("plain");
    std::fs::write(&plain, "data").expect("written");
    std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).expect("mode");

    let mut on_path = spec("fn-tool");
    on_path.env.push((
        "PATH".into(),
        format!("/nonexistent:{}", dir.path().display()).into(),
    ));
    assert_eq!(on_path.resolve().expect("found on PATH"), tool);

    let mut missing = spec("no-such-fn");
    missing
        .env
        .push(("PATH".into(), dir.path().as_os_str().to_owned()));
    let err = missing.resolve().expect_err("not on PATH").to_string();
    assert!(err.contains("\"no-such-fn\" is not found on PATH"), "{err}");

    let err = spec("/nonexistent/fn")
        .resolve()
        .expect_err("missing")
        .to_string();
    assert!(
        err.contains("/nonexistent/fn: No such file or directory"),
        "{err}"
    );
    let err = spec(dir.path().to_str().expect("utf-8"))
        .resolve()
        .expect_err("a dir")
        .to_string();
    assert!(err.ends_with("not a file"), "{err}");
    // Root may execute a file only if some execute bit is set.
    let err = spec(plain.to_str().expect("utf-8"))
        .resolve()
        .expect_err("0644")
        .to_string();
    assert!(err.contains("not executable"), "{err}");

    let mut relative = spec("./fn-tool");
    relative.current_dir = Some(dir.path().to_path_buf());
    assert_eq!(
        relative.resolve().expect("relative to current_dir"),
        dir.path().join("./fn-tool")
    );
    assert!(matches!(spec("").resolve(), Err(EntrypointError::Empty)));
}

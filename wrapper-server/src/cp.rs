//! A tiny `cp`, for init images with no shell and no coreutils.
//!
//! Porch's default function pod template runs
//! `cp -a /home/nonroot/wrapper-server/. /wrapper-server-tools` in its init
//! container. Our init image links `/bin/cp` to `wrapper-server`, which acts
//! as this `cp` when invoked under that name. It supports what that template
//! needs and a little more: `cp [-a|-r|-R|-p|-f]... SRC... DEST`, recursive,
//! keeping permission bits; `SRC/.` copies a directory's contents.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Runs `cp` with `args` (without argv[0]); returns the exit code.
pub fn main(args: Vec<OsString>) -> i32 {
    match run(args) {
        Ok(()) => 0,
        Err(msg) => {
            eprintln!("cp: {msg}");
            1
        }
    }
}

fn run(args: Vec<OsString>) -> Result<(), String> {
    let mut recursive = false;
    let mut operands = Vec::new();
    let mut flags_done = false;
    for arg in args {
        let s = arg.to_string_lossy();
        if !flags_done && s == "--" {
            flags_done = true;
        } else if !flags_done && s.starts_with('-') && s.len() > 1 {
            for c in s[1..].chars() {
                match c {
                    'a' | 'r' | 'R' => recursive = true,
                    'p' | 'f' | 'd' | 'P' => {}
                    other => {
                        return Err(format!(
                            "unsupported option -{other} (supported: -a -r -R -p -f -d -P)"
                        ))
                    }
                }
            }
        } else {
            operands.push(PathBuf::from(arg));
        }
    }
    let Some(dest) = operands.pop() else {
        return Err("missing file operand".into());
    };
    if operands.is_empty() {
        return Err(format!(
            "missing destination file operand after {}",
            dest.display()
        ));
    }
    if operands.len() > 1 && !dest.is_dir() {
        return Err(format!("target {} is not a directory", dest.display()));
    }
    for src in operands {
        copy_operand(&src, &dest, recursive).map_err(|e| format!("{}: {e}", src.display()))?;
    }
    Ok(())
}

fn copy_operand(src: &Path, dest: &Path, recursive: bool) -> io::Result<()> {
    let meta = fs::metadata(src)?;
    // `SRC/.` means "the contents of SRC", merged into DEST.
    let contents_only = src.as_os_str().to_string_lossy().ends_with("/.");
    let target = if dest.is_dir() && !contents_only {
        match src.file_name() {
            Some(name) => dest.join(name),
            None => dest.to_path_buf(),
        }
    } else {
        dest.to_path_buf()
    };
    if meta.is_dir() {
        if !recursive {
            return Err(io::Error::other("is a directory (use -a or -r)"));
        }
        copy_dir(src, &target)
    } else {
        copy_file(src, &target, meta.permissions().mode())
    }
}

fn copy_dir(src: &Path, dest: &Path) -> io::Result<()> {
    let mode = fs::metadata(src)?.permissions().mode();
    if !dest.is_dir() {
        fs::create_dir(dest)?;
        fs::set_permissions(dest, fs::Permissions::from_mode(mode))?;
    }
    for entry in fs::read_dir(src)? {
        let entry = entry?;
        let from = entry.path();
        let to = dest.join(entry.file_name());
        let meta = fs::metadata(&from)?;
        if meta.is_dir() {
            copy_dir(&from, &to)?;
        } else {
            copy_file(&from, &to, meta.permissions().mode())?;
        }
    }
    Ok(())
}

fn copy_file(src: &Path, dest: &Path, mode: u32) -> io::Result<()> {
    fs::copy(src, dest)?;
    fs::set_permissions(dest, fs::Permissions::from_mode(mode & 0o7777))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn porch_template_form_copies_directory_contents() {
        let src = tempfile::tempdir().unwrap();
        fs::write(src.path().join("wrapper-server"), b"w").unwrap();
        fs::set_permissions(
            src.path().join("wrapper-server"),
            fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        fs::create_dir(src.path().join("sub")).unwrap();
        fs::write(src.path().join("sub/x"), b"x").unwrap();
        let dst = tempfile::tempdir().unwrap();
        let from = format!("{}/.", src.path().display());
        assert_eq!(main(args(&["-a", &from, dst.path().to_str().unwrap()])), 0);
        assert_eq!(fs::read(dst.path().join("wrapper-server")).unwrap(), b"w");
        let mode = fs::metadata(dst.path().join("wrapper-server"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o755);
        assert_eq!(fs::read(dst.path().join("sub/x")).unwrap(), b"x");
    }

    #[test]
    fn directory_without_dot_lands_under_its_name() {
        let src = tempfile::tempdir().unwrap();
        fs::write(src.path().join("f"), b"f").unwrap();
        let dst = tempfile::tempdir().unwrap();
        assert_eq!(
            main(args(&[
                "-r",
                src.path().to_str().unwrap(),
                dst.path().to_str().unwrap()
            ])),
            0
        );
        let name = src.path().file_name().unwrap();
        assert_eq!(fs::read(dst.path().join(name).join("f")).unwrap(), b"f");
    }

    #[test]
    fn errors_are_clear() {
        assert_eq!(main(args(&["-a"])), 1);
        assert_eq!(main(args(&["-z", "a", "b"])), 1);
        let src = tempfile::tempdir().unwrap();
        // A directory without -r.
        assert_eq!(main(args(&[src.path().to_str().unwrap(), "/tmp"])), 1);
        assert_eq!(main(args(&["/nonexistent/x", "/tmp"])), 1);
    }
}

use super::*;

fn texts(docs: &[Document]) -> Vec<String> {
    docs.iter()
        .map(|d| yaml::emit::encode_node(&d.node, true))
        .collect()
}

#[test]
fn documents_as_kyaml_splits_them() {
    // A leading `---`, `---` with a comment, empty documents, a comment
    // before a separator (a foot comment of its document).
    let docs = read_documents("---\n# c\na: 1\n--- # sep\n\n---\n# alone\n---\nb: 2\n").unwrap();
    assert_eq!(texts(&docs), vec!["# c\na: 1\n", "b: 2\n"]);
    // CRLF becomes LF, also inside block scalars.
    let docs = read_documents("a: 1\r\nb: |\r\n  x\r\n---\r\nc: 3\r\n").unwrap();
    assert_eq!(texts(&docs), vec!["a: 1\nb: |\n  x\n", "c: 3\n"]);
    // `---` inside a block scalar is not a separator when indented.
    let docs = read_documents("a: |\n  ---\n  x\n").unwrap();
    assert_eq!(texts(&docs), vec!["a: |\n  ---\n  x\n"]);
    assert_eq!(
        read_documents("a: 1\n--- x\nb: 2\n"),
        Err(DocError::Separator("--- x".into()))
    );
    // Each piece is parsed on its own: the line counts from the piece.
    let err = read_documents("a: 1\n---\nb: [x\n").unwrap_err();
    assert!(
        matches!(&err, DocError::Malformed(m) if m.starts_with("yaml: line 1:")),
        "{err}"
    );
    assert_eq!(derive_seq_indent("a:\n  - x\n"), "wide");
    assert_eq!(derive_seq_indent("a:\n- x\n"), "compact");
    assert_eq!(
        docs_seq(&read_documents("a:\n  - x\n").unwrap()),
        vec!["wide"]
    );
}

fn docs_seq(docs: &[Document]) -> Vec<&'static str> {
    docs.iter().map(|d| d.seq_indent).collect()
}

#[test]
fn paths() {
    assert_eq!(clean_path("./a//b/../c.yaml"), "a/c.yaml");
    assert_eq!(clean_path("../x"), "../x");
    assert_eq!(clean_path("a/../../x"), "../x");
    let m = Meta {
        kind: "ConfigMap".into(),
        name: "N".into(),
        namespace: "ns".into(),
        ..Meta::default()
    };
    assert_eq!(default_path(&m), "ns/configmap_N.yaml");
    assert!(glob_match(b"*.yaml", b".hidden.yaml"));
    assert!(!glob_match(b"*.yaml", b"a/b.yaml"));
    assert!(glob_match(b"x/[a-c]?", b"x/bz"));
    assert!(check_paths(&[("a".into(), "0".into()), ("a".into(), "1".into())]).is_ok());
    assert!(matches!(
        check_paths(&[("a".into(), "0".into()), ("a".into(), "0".into())]),
        Err(PackageError::Duplicate { .. })
    ));
    assert!(matches!(
        check_paths(&[("../a".into(), "0".into())]),
        Err(PackageError::OutsidePackage(_))
    ));
}

#[test]
fn json_files_as_kpt_writes_them() {
    let doc = read_documents("{\"kind\": \"ConfigMap\", \"apiVersion\": \"v1\", \"metadata\": {\"name\": \"j\", \"annotations\": {\"z\": \"1\", \"a\": \"<&>\"}}, \"data\": {\"b\": 1, \"a\": [1, 2.50, true, null]}}\n").unwrap();
    assert_eq!(
            file_content("x/j.json", &[(&doc[0].node, false)]).unwrap(),
            "{\n  \"apiVersion\": \"v1\",\n  \"data\": {\n    \"a\": [\n      1,\n      2.5,\n      true,\n      null\n    ],\n    \"b\": 1\n  },\n  \"kind\": \"ConfigMap\",\n  \"metadata\": {\n    \"annotations\": {\n      \"a\": \"\\u003c\\u0026\\u003e\",\n      \"z\": \"1\"\n    },\n    \"name\": \"j\"\n  }\n}\n"
        );
    // Numbers as Go's encoding/json writes what yaml.v3 read (as kpt
    // writes them).
    let nums =
        read_documents("a: [12345678901234567890, 1.0, 1e3, 0x1F, 0o17, 0755, -3, 2.5]\n").unwrap();
    assert_eq!(
            file_content("n.json", &[(&nums[0].node, false)]).unwrap(),
            "{\n  \"a\": [\n    12345678901234567890,\n    1,\n    1000,\n    31,\n    15,\n    493,\n    -3,\n    2.5\n  ]\n}\n"
        );
    // An alias is what it names, as Go values have it.
    let shared = read_documents("a: &x {k: v}\nb: *x\n").unwrap();
    assert_eq!(
        file_content("s.json", &[(&shared[0].node, false)]).unwrap(),
        "{\n  \"a\": {\n    \"k\": \"v\"\n  },\n  \"b\": {\n    \"k\": \"v\"\n  }\n}\n"
    );
    let cycle = read_documents("a: &x [*x]\n").unwrap();
    assert_eq!(
        file_content("c.json", &[(&cycle[0].node, false)])
            .unwrap_err()
            .to_string(),
        "c.json: yaml: anchor 'x' value contains itself"
    );
    let two = read_documents("a: 1\n---\nb: 2\n").unwrap();
    assert_eq!(
        file_content("two.json", &[(&two[0].node, false), (&two[1].node, false)]).unwrap(),
        "a: 1\n---\nb: 2\n"
    );
}

#[test]
fn writes_are_atomic_and_keep_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("a.yaml");
    fs::write(&f, "old\n").unwrap();
    fs::set_permissions(&f, fs::Permissions::from_mode(0o640)).unwrap();
    write_atomic(&f, b"new\n").unwrap();
    assert_eq!(fs::read_to_string(&f).unwrap(), "new\n");
    assert_eq!(
        fs::metadata(&f).unwrap().permissions().mode() & 0o777,
        0o640
    );
    // No temporary file is left, and a failed write leaves the old file.
    let names: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec!["a.yaml"]);
    assert!(write_atomic(&dir.path().join("missing/b.yaml"), b"x").is_err());
    // Through a symlink: the link stays, the file it names changes.
    let link = dir.path().join("link.yaml");
    std::os::unix::fs::symlink("a.yaml", &link).unwrap();
    write_atomic(&link, b"via link\n").unwrap();
    assert!(fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(fs::read_to_string(&f).unwrap(), "via link\n");
    // A package write that fails on one file (a directory where a file
    // goes) changes none: nothing renamed, no temporary file left.
    fs::create_dir(dir.path().join("zdir")).unwrap();
    let doc = |t: &str| read_documents(t).unwrap().remove(0).node;
    let placed = |path: &str, text: &str| Placed {
        path: path.into(),
        index: None,
        node: doc(text),
        wide: false,
    };
    let err = write_package(
        dir.path(),
        vec![placed("a.yaml", "a: changed\n"), placed("zdir", "b: 1\n")],
        &mut Progress::new(None),
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("path cannot be a directory"),
        "{err}"
    );
    assert_eq!(fs::read_to_string(&f).unwrap(), "via link\n");
    let mut names: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, vec!["a.yaml", "link.yaml", "zdir"]);
}

/// Items for [`write_package`]: (path, text).
fn items(list: &[(&str, &str)]) -> Vec<Placed> {
    list.iter()
        .map(|(path, text)| Placed {
            path: (*path).into(),
            index: None,
            node: read_documents(text).unwrap().remove(0).node,
            wide: false,
        })
        .collect()
}

/// Every entry under `dir` (symlinks not followed): path, and the
/// file's text, the link's target or `<dir>`.
fn listing(dir: &Path) -> BTreeMap<String, String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        for e in fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            let m = fs::symlink_metadata(&p).unwrap();
            if m.file_type().is_symlink() {
                let t = fs::read_link(&p).unwrap().display().to_string();
                out.insert(rel, format!("-> {t}"));
            } else if m.is_dir() {
                out.insert(rel, "<dir>".into());
                walk(root, &p, out);
            } else {
                out.insert(rel, fs::read_to_string(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// A package `pkg` with `a.yaml` and a directory `real`, and an empty
/// directory `outside` beside it.
fn package_and_outside() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let pkg = tmp.path().join("pkg");
    let outside = tmp.path().join("outside");
    fs::create_dir_all(pkg.join("real")).unwrap();
    fs::create_dir(&outside).unwrap();
    fs::write(pkg.join("a.yaml"), "a: old\n").unwrap();
    (tmp, pkg, outside)
}

#[test]
fn writes_through_a_symlinked_directory_out_of_the_package_are_refused() {
    use std::os::unix::fs::symlink;
    let (_tmp, pkg, outside) = package_and_outside();
    symlink("../outside", pkg.join("sub")).unwrap();
    symlink(&outside, pkg.join("abs")).unwrap();
    let before = listing(&pkg);
    let refused = |path: &str, link: &str| {
        let err = write_package(
            &pkg,
            items(&[
                ("a.yaml", "a: changed\n"),
                ("new/dir/x.yaml", "x: 1\n"),
                (path, "evil: 1\n"),
            ]),
            &mut Progress::new(None),
        )
        .unwrap_err();
        assert!(matches!(err, PackageError::Escapes { .. }), "{err}");
        assert_eq!(
            err.to_string(),
            format!("{path}: not written: it would leave the package through the symlink {link}")
        );
        // Nothing written: not outside, not in the package (no file
        // changed, no directory or temporary file made).
        assert_eq!(listing(&outside), BTreeMap::new());
        assert_eq!(listing(&pkg), before);
    };
    refused("sub/evil.yaml", "sub -> ../outside");
    refused("sub/deeper/evil.yaml", "sub -> ../outside");
    refused("abs/evil.yaml", &format!("abs -> {}", outside.display()));
    // One package file is enough for `write_in_package` too.
    let err = write_in_package(&pkg, "sub/Kptfile", b"k: 1\n").unwrap_err();
    assert!(
        err.to_string().starts_with("sub/Kptfile: not written: "),
        "{err}"
    );
    assert_eq!(listing(&outside), BTreeMap::new());
    // `..` and absolute paths are refused as they are.
    assert!(matches!(
        write_in_package(&pkg, "real/../../outside/x.yaml", b"x\n"),
        Err(PackageError::OutsidePackage(_))
    ));
    assert!(matches!(
        write_in_package(&pkg, "/x.yaml", b"x\n"),
        Err(PackageError::Absolute(_))
    ));
    assert_eq!(listing(&outside), BTreeMap::new());
    assert_eq!(listing(&pkg), before);
    // A delete through the symlink is refused before anything goes.
    fs::write(outside.join("gone.yaml"), "g: 1\n").unwrap();
    let err = delete_gone(
        &pkg,
        &["a.yaml".into(), "sub/gone.yaml".into()],
        &HashSet::new(),
    )
    .unwrap_err();
    assert_eq!(
            err.to_string(),
            "sub/gone.yaml: not deleted: it would leave the package through the symlink sub -> ../outside"
        );
    assert_eq!(listing(&pkg), before);
    assert_eq!(
        fs::read_to_string(outside.join("gone.yaml")).unwrap(),
        "g: 1\n"
    );
}

#[test]
fn symlinks_in_the_package_are_written_through() {
    use std::os::unix::fs::symlink;
    let (_tmp, pkg, outside) = package_and_outside();
    // A directory link, relative and absolute, and a file link, all to
    // places in the package.
    symlink("real", pkg.join("alias")).unwrap();
    symlink(pkg.join("real"), pkg.join("abs-alias")).unwrap();
    symlink("a.yaml", pkg.join("link.yaml")).unwrap();
    let (report, _) = write_package(
        &pkg,
        items(&[
            ("alias/x.yaml", "x: 1\n"),
            ("abs-alias/new/y.yaml", "y: 1\n"),
            ("link.yaml", "a: via link\n"),
        ]),
        &mut Progress::new(None),
    )
    .unwrap();
    assert_eq!(report.written, 3);
    let expected: BTreeMap<String, String> = [
        ("a.yaml", "a: via link\n"),
        ("abs-alias", &format!("-> {}", pkg.join("real").display())),
        ("alias", "-> real"),
        ("link.yaml", "-> a.yaml"),
        ("real", "<dir>"),
        ("real/new", "<dir>"),
        ("real/new/y.yaml", "y: 1\n"),
        ("real/x.yaml", "x: 1\n"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    assert_eq!(listing(&pkg), expected);
    // A delete removes the link, not the file it names.
    let n = delete_gone(&pkg, &["link.yaml".into()], &HashSet::new()).unwrap();
    assert_eq!(n, 1);
    assert!(!pkg.join("link.yaml").exists());
    assert_eq!(
        fs::read_to_string(pkg.join("a.yaml")).unwrap(),
        "a: via link\n"
    );
    assert_eq!(listing(&outside), BTreeMap::new());
}

#[test]
fn a_symlinked_file_out_of_the_package_is_refused_once_it_changes() {
    use std::os::unix::fs::symlink;
    let (_tmp, pkg, outside) = package_and_outside();
    fs::write(outside.join("o.yaml"), "o: 1\n").unwrap();
    symlink("../outside/o.yaml", pkg.join("out.yaml")).unwrap();
    let before = listing(&pkg);
    let err = write_package(
        &pkg,
        items(&[("a.yaml", "a: changed\n"), ("out.yaml", "o: 2\n")]),
        &mut Progress::new(None),
    )
    .unwrap_err();
    assert_eq!(
            err.to_string(),
            "out.yaml: not written: it would leave the package through the symlink out.yaml -> ../outside/o.yaml"
        );
    assert_eq!(listing(&pkg), before);
    assert_eq!(
        fs::read_to_string(outside.join("o.yaml")).unwrap(),
        "o: 1\n"
    );
    // Left as it was (a shared file the function did not change): not
    // written, so not refused.
    let (report, _) = write_package(
        &pkg,
        items(&[("a.yaml", "a: changed\n"), ("out.yaml", "o: 1\n")]),
        &mut Progress::new(None),
    )
    .unwrap();
    assert_eq!((report.written, report.unchanged), (1, 1));
    assert_eq!(
        fs::read_to_string(pkg.join("a.yaml")).unwrap(),
        "a: changed\n"
    );
    assert!(write_in_package(&pkg, "out.yaml", b"o: 3\n").is_err());
    assert_eq!(
        fs::read_to_string(outside.join("o.yaml")).unwrap(),
        "o: 1\n"
    );
}

#[test]
fn temporary_files_are_new_files_with_the_targets_mode_and_owner() {
    use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
    let (_tmp, pkg, outside) = package_and_outside();
    let a = pkg.join("a.yaml");
    // Whatever is at a temporary file's name is not written through
    // (nor replaced, nor renamed over the file): a dangling symlink out
    // of the package, a symlink to a file outside, a file.
    let pid = std::process::id();
    symlink(
        "../outside/stolen.yaml",
        pkg.join(format!(".a.yaml.{pid}.tmp")),
    )
    .unwrap();
    fs::write(outside.join("kept.yaml"), "kept\n").unwrap();
    symlink(
        outside.join("kept.yaml"),
        pkg.join(format!(".a.yaml.{pid}.1.tmp")),
    )
    .unwrap();
    fs::write(pkg.join(format!(".a.yaml.{pid}.2.tmp")), "mine\n").unwrap();
    fs::set_permissions(&a, fs::Permissions::from_mode(0o604)).unwrap();
    let root = rustix::process::geteuid().is_root();
    if root {
        std::os::unix::fs::chown(&a, Some(1234), Some(5678)).unwrap();
    }
    write_atomic(&a, b"a: new\n").unwrap();
    let m = fs::symlink_metadata(&a).unwrap();
    assert!(m.is_file());
    assert_eq!(fs::read_to_string(&a).unwrap(), "a: new\n");
    // 0o604 is more than the umask (022 or 077) lets a new file have.
    assert_eq!(m.mode() & 0o7777, 0o604);
    if root {
        assert_eq!((m.uid(), m.gid()), (1234, 5678));
    }
    assert_eq!(
        listing(&outside),
        BTreeMap::from([("kept.yaml".to_owned(), "kept\n".to_owned())])
    );
    assert_eq!(
        fs::read_to_string(pkg.join(format!(".a.yaml.{pid}.2.tmp"))).unwrap(),
        "mine\n"
    );
    assert!(fs::symlink_metadata(pkg.join(format!(".a.yaml.{pid}.tmp")))
        .unwrap()
        .file_type()
        .is_symlink());
    // The temporary file has the mode before it is renamed into place.
    fs::set_permissions(&a, fs::Permissions::from_mode(0o600)).unwrap();
    let tmp = write_temp(&a, b"secret\n").unwrap();
    assert_eq!(fs::metadata(&tmp).unwrap().mode() & 0o7777, 0o600);
    assert_eq!(
        tmp.file_name().unwrap().to_string_lossy(),
        format!(".a.yaml.{pid}.3.tmp")
    );
    fs::remove_file(tmp).unwrap();
}

#[test]
fn reads_a_package_like_kpt() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let write = |p: &str, s: &str| {
        let path = root.join(p);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, s).unwrap();
    };
    let cm = |n: &str| format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {n}\n");
    write("a/f.yaml", &cm("a"));
    write("a-b/f.yaml", &cm("ab"));
    write(".hidden/f.yml", &cm("h"));
    write("ign/f.yaml", &cm("ign"));
    write("README.md", "# not yaml\n");
    write("C.YAML", &cm("upper"));
    write(
        "sub/Kptfile",
        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: sub\n",
    );
    write("sub/.krmignore", "x.yaml\n");
    write("sub/x.yaml", &cm("subx"));
    write("sub/ign/f.yaml", &cm("sub-ign"));
    write(
        "j.json",
        "{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"j\"}}\n",
    );
    write("empty.yaml", "# nothing\n");
    write(".krmignore", "# comment\nign/\n");
    let files = read_package(root, &mut Progress::new(None)).unwrap();
    let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths,
        vec![
            ".hidden/f.yml",
            "a/f.yaml",
            "a-b/f.yaml",
            "j.json",
            "sub/Kptfile",
            "sub/ign/f.yaml"
        ]
    );
    // Without subpackages: not read.
    let files = read_local_files(root, &mut Progress::new(None)).unwrap();
    assert!(files.iter().all(|f| !f.path.starts_with("sub/")));
    assert!(files.iter().any(|f| f.path == "j.json"));
    // Malformed YAML names the file by its absolute path, and the line.
    write("bad.yaml", "a: [x\n");
    let err = read_package(root, &mut Progress::new(None)).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}: MalformedYAMLError: yaml: line 1: did not find expected ',' or ']'",
            root.join("bad.yaml").display()
        )
    );
}

#[test]
fn duplicate_keys_are_refused_with_the_line_in_the_file() {
    // In the second document of a stream: the lines count from the start
    // of the text (CRLF read as LF), not from the piece.
    let text = "a: 1\n---\nkind: X\nmetadata:\n  name: x\n  name: y\n";
    let err = read_documents(text).unwrap_err();
    assert_eq!(
        err.to_string(),
        "MalformedYAMLError: yaml: line 6: mapping key \"name\" already defined at line 5"
    );
    assert_eq!(
        read_documents(&text.replace('\n', "\r\n")).unwrap_err(),
        err
    );
    // The same key in two documents, or two mappings, is no duplicate.
    assert!(read_documents("a: 1\n---\na: 1\n").is_ok());
}

#[test]
fn duplicate_keys_in_a_package_name_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    fs::create_dir(root.join("sub")).unwrap();
    fs::write(root.join("ok.yaml"), "a: 1\n").unwrap();
    fs::write(
        root.join("sub/cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: \"1\"\n  a: \"2\"\n",
    )
    .unwrap();
    let err = read_package(root, &mut Progress::new(None)).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}: MalformedYAMLError: yaml: line 7: mapping key \"a\" already defined at line 6",
            root.join("sub/cm.yaml").display()
        )
    );
}

//! `eval --save`/`--type` (kpt's `-s`/`-t`): the checks kpt makes on them
//! (and on `--image`'s name) before anything runs, and, after a run that
//! passed, the function added to the Kptfile
//! ([`krm_kpt::kptfile::save`]).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use krm_kpt::image::kpt_image_name;
use krm_kpt::kptfile::{self, FnType, NewFunction};
use krm_kpt::select::Selector;
use krm_yaml::package::{clean_path, go_quote};

use crate::eval::{EvalArgs, EvalCommand};

/// What `--save` will write, decided before the run.
struct Saving {
    /// The package whose Kptfile takes the function (the working
    /// directory for `-`, as in kpt).
    dir: PathBuf,
    function: NewFunction,
    ty: FnType,
}

/// `function-runner eval`: kpt's checks first, then the run, then the
/// function saved if the run passed and `--save` asks for it (what
/// happened is said on stderr; the exit code is the run's).
pub(crate) async fn eval(cmd: EvalCommand) -> anyhow::Result<ExitCode> {
    let saving = match prepare(cmd.args()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(1));
        }
    };
    let code = crate::eval::run(cmd).await?;
    if let Some(s) = saving.filter(|_| code == ExitCode::SUCCESS) {
        eprint!("{}", kptfile::save(&s.dir, &s.function, s.ty));
    }
    Ok(code)
}

/// kpt's checks, in its order: `--type` with `--save`, the image's name
/// (as kpt names it), and an existing `--fn-config` inside the package
/// when saving (it is saved relative to the package).
fn prepare(args: &EvalArgs) -> Result<Option<Saving>, String> {
    let ty = match args.fn_type.as_deref().filter(|t| !t.is_empty()) {
        _ if !args.save => None,
        None => {
            return Err(
                "--type must be specified if saving functions to Kptfile (--save=true)".into(),
            )
        }
        Some(t) => Some(FnType::parse(t).ok_or("--type must be either `mutator` or `validator`")?),
    };
    let image = args.image.as_deref().map(kpt_image_name);
    if let Some(image) = image.as_deref().filter(|_| args.exec.is_none()) {
        if !kptfile::valid_image_name(image) {
            return Err(format!("function name {} is invalid", go_quote(image)));
        }
    }
    let Some(ty) = ty else {
        return Ok(None);
    };
    let dir = PathBuf::from(if args.dir == "-" { "." } else { &args.dir });
    let config_path = match &args.fn_config {
        // A missing file is eval's error, named as kpt names it.
        Some(file) if file.exists() => relative_to_package(file, &dir)?,
        _ => String::new(),
    };
    let config_map = match args.fn_config {
        Some(_) => Vec::new(),
        None => NewFunction::config_map_from_args(&args.fn_args),
    };
    let (selector, exclusion) = selectors(args);
    let function = NewFunction {
        image: image.filter(|_| args.exec.is_none()).unwrap_or_default(),
        exec: args.exec.clone().unwrap_or_default(),
        config_path,
        config_map,
        selector,
        exclusion,
    };
    Ok(Some(Saving { dir, function, ty }))
}

/// `file`'s path relative to the package `dir` (kpt's symlinks resolved
/// in the package's path, not in the file's). kpt compares the two as
/// strings, and would save `../pkg2/fn.yaml` for a package `pkg`; a path
/// outside the package is refused here, as render would refuse it.
fn relative_to_package(file: &Path, dir: &Path) -> Result<String, String> {
    let absolute = |p: &Path| {
        std::path::absolute(p)
            .map(|a| PathBuf::from(clean_path(&a.to_string_lossy())))
            .map_err(|e| format!("{}: {e}", p.display()))
    };
    let pkg = match std::fs::canonicalize(dir) {
        Ok(p) => p,
        Err(_) => absolute(dir)?,
    };
    let file = absolute(file)?;
    match file.strip_prefix(&pkg) {
        Ok(rel) if rel.as_os_str().is_empty() => Ok(".".into()),
        Ok(rel) => Ok(rel.to_string_lossy().into_owned()),
        Err(_) => Err(format!(
            "--fn-config must be under {} if saving functions to Kptfile (--save=true)",
            pkg.display()
        )),
    }
}

/// `--match-*` and `--exclude-*` as the run reads them (a value it refuses
/// fails the run, so nothing is saved then).
fn selectors(args: &EvalArgs) -> (Selector, Selector) {
    let s = &args.selection;
    let pairs = |flag: &str, v: &[String]| Selector::parse_pairs(flag, v).unwrap_or_default();
    let text = |v: &Option<String>| v.clone().unwrap_or_default();
    (
        Selector {
            api_version: text(&s.match_api_version),
            kind: text(&s.match_kind),
            name: text(&s.match_name),
            namespace: text(&s.match_namespace),
            labels: pairs("--match-labels", &s.match_labels),
            annotations: pairs("--match-annotations", &s.match_annotations),
        },
        Selector {
            api_version: text(&s.exclude_api_version),
            kind: text(&s.exclude_kind),
            name: text(&s.exclude_name),
            namespace: text(&s.exclude_namespace),
            labels: pairs("--exclude-labels", &s.exclude_labels),
            annotations: pairs("--exclude-annotations", &s.exclude_annotations),
        },
    )
}

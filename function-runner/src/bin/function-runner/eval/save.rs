//! `eval --save`/`--type` (kpt's `-s`/`-t`): the checks kpt makes on them
//! (and on `--image`'s name) before anything runs, and, after a run that
//! passed, the function added to the Kptfile
//! ([`krm_kpt::kptfile::save`]).

use std::path::{Path, PathBuf};

use krm_kpt::image::resolve_to_image;
use krm_kpt::kptfile::{self, FnType, NewFunction};
use krm_yaml::package::clean_path;

use super::args::EvalArgs;

/// What `--save` will write, decided before the run.
pub(crate) struct Saving {
    /// The package whose Kptfile takes the function (the working
    /// directory for `-`, as in kpt).
    dir: PathBuf,
    function: NewFunction,
    ty: FnType,
}

impl Saving {
    /// Adds the function to the Kptfile, and says what happened.
    pub(crate) fn save(&self) {
        eprint!("{}", kptfile::save(&self.dir, &self.function, self.ty));
    }
}

/// kpt's checks, in its order: `--type` with `--save`, the image's name
/// (as kpt names it), and an existing `--fn-config` inside the package
/// when saving (it is saved relative to the package).
pub(crate) fn prepare(args: &EvalArgs, prefix: &str) -> Result<Option<Saving>, String> {
    let ty = match args.fn_type.as_deref().filter(|t| !t.is_empty()) {
        _ if !args.save => None,
        None => {
            return Err(
                "--type must be specified if saving functions to Kptfile (--save=true)".into(),
            )
        }
        Some(t) => Some(FnType::parse(t).ok_or("--type must be either `mutator` or `validator`")?),
    };
    let image = args.image.as_deref().map(|i| resolve_to_image(i, prefix));
    if let Some(image) = image.as_deref().filter(|_| args.exec.is_none()) {
        kptfile::check_image_reference(image)?;
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
    // A value the run refuses fails the run, so nothing is saved then.
    let (selector, exclusion) = args.selection.selectors().unwrap_or_default();
    let function = NewFunction {
        image: image.filter(|_| args.exec.is_none()).unwrap_or_default(),
        // kpt saves `--tag` with an image only.
        tag: args
            .tag
            .clone()
            .filter(|_| args.exec.is_none())
            .unwrap_or_default(),
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

//! A render decided before anything runs: the checks kpt makes first (an
//! `-o` directory that exists, the results directory, the root's Kptfile),
//! every Kptfile below the root checked as kpt checks it (a bad one changes
//! nothing), and the package tree in the order kpt renders it. One walk of
//! the directories makes it; the render then reads each package's files
//! once, and the caller learns from it which images the pipelines name
//! before it starts anything to run them.

use std::path::{Path, PathBuf};

use krm_yaml::package::{self, go_quote, kyaml};
use krm_yaml::Node;

use super::options::RenderOptions;
use crate::eval::{self, Error};

/// A render, checked and planned.
pub struct Plan {
    pub(super) opts: RenderOptions,
    /// The root package's absolute path.
    pub(super) root: PathBuf,
    /// The root package, with its subpackages.
    pub(super) package: Package,
}

/// A package and its subpackages (kpt's `DirectSubpackages`: the nearest
/// directories below it with a Kptfile, whatever `.krmignore` says), in
/// directory order.
pub(super) struct Package {
    pub(super) dir: PathBuf,
    /// Each subpackage's path relative to this package, and the package.
    pub(super) subpackages: Vec<(String, Package)>,
    /// The images the Kptfile's pipeline names; `None` for a Kptfile that
    /// does not read but may name some (the render names its error, but the
    /// caller cannot tell that nothing is needed to run it).
    images: Option<Vec<String>>,
}

impl Plan {
    /// The checks kpt makes before it renders, in its order, and the walk.
    pub fn new(opts: RenderOptions) -> Result<Plan, Error> {
        // kpt refuses an `-o` directory that exists first of all, then makes
        // the results directory.
        if let Some(eval::Output::Dir(dir)) = &opts.output {
            if dir.exists() {
                return Err(Error::OutputExists(dir.display().to_string()));
            }
        }
        if let Some(dir) = &opts.results_dir {
            eval::prepare_results_dir(dir)?;
        }
        // beta.67 checks `--image-prefix` first thing in its run, after
        // the two above.
        crate::image::validate_prefix(&opts.image_prefix).map_err(Error::Input)?;
        // Go's `filepath.Abs`: absolute and clean (`a/../b` is `b`), as
        // kpt's paths and messages name the package.
        let root = std::path::absolute(&opts.dir).map_err(Error::Write)?;
        let root = PathBuf::from(package::clean_path(&root.to_string_lossy()));
        if !root.join("Kptfile").is_file() {
            return Err(Error::Input(format!(
                "{} is not a package: it has no Kptfile",
                go_quote(&opts.dir.display().to_string())
            )));
        }
        // kpt refuses a Kptfile it cannot decode strictly, or whose pipeline
        // its `Validate` refuses (a function with both or neither of image
        // and exec, a bad image name or configPath): every one is checked
        // before any function runs.
        let package = Package::read(&root)?;
        Ok(Plan {
            opts,
            root,
            package,
        })
    }

    /// The `image:` of every pipeline function, depth first; `None` for a
    /// Kptfile that does not read but may name images.
    pub fn images(&self) -> Vec<Option<String>> {
        let mut out = Vec::new();
        self.package.images(&mut out);
        out.into_iter()
            .map(|i| i.map(|i| crate::image::render_image(&i, &self.opts.image_prefix)))
            .collect()
    }

    /// The root package's name in kpt's lines: its directory's.
    pub(super) fn name(&self) -> String {
        self.root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| ".".into())
    }
}

impl Package {
    /// The package in `dir` (it has a Kptfile), its Kptfile checked, and
    /// every directory below it walked, depth first in name order: each
    /// Kptfile found is checked and starts a subpackage.
    fn read(dir: &Path) -> Result<Package, Error> {
        let mut package = Package {
            dir: dir.to_path_buf(),
            subpackages: Vec::new(),
            images: check_kptfile(dir)?,
        };
        package.walk(dir, "")?;
        Ok(package)
    }

    /// Finds the subpackages under `dir` (`rel` below this package).
    fn walk(&mut self, dir: &Path, rel: &str) -> Result<(), Error> {
        // A directory that cannot be listed is left to the package reader,
        // which names it as kpt does when the package's turn comes.
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Ok(());
        };
        let mut subdirs: Vec<(std::ffi::OsString, PathBuf)> = entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| (e.file_name(), e.path()))
            .collect();
        subdirs.sort();
        for (name, path) in subdirs {
            let name = name.to_string_lossy();
            let child = if rel.is_empty() {
                name.into_owned()
            } else {
                format!("{rel}/{name}")
            };
            if path.join("Kptfile").is_file() {
                self.subpackages.push((child, Package::read(&path)?));
            } else {
                self.walk(&path, &child)?;
            }
        }
        Ok(())
    }

    fn images(&self, out: &mut Vec<Option<String>>) {
        match &self.images {
            Some(images) => out.extend(images.iter().cloned().map(Some)),
            None => out.push(None),
        }
        for (_, sub) in &self.subpackages {
            sub.images(out);
        }
    }
}

/// [`crate::kptfile::check`] on the Kptfile of `dir`, and the images its
/// pipeline names. A Kptfile that does not parse is left to the package
/// reader, which names the error as kpt does (`None` if it may name
/// images); one with a key twice is read, as kpt's check names each
/// repeated key.
fn check_kptfile(dir: &Path) -> Result<Option<Vec<String>>, Error> {
    let Ok(text) = std::fs::read_to_string(dir.join("Kptfile")) else {
        return Ok(Some(Vec::new()));
    };
    let Some(doc) = package::read_documents_keeping_duplicates(&text)
        .ok()
        .and_then(|d| d.into_iter().next())
    else {
        return Ok((!text.contains("image:")).then(Vec::new));
    };
    crate::kptfile::check(dir, &doc.node).map_err(Error::Kptfile)?;
    Ok(Some(pipeline_images(&doc.node)))
}

/// The `image:` of each function in a Kptfile's pipeline.
fn pipeline_images(kptfile: &Node) -> Vec<String> {
    let Some(pipeline) = kyaml::field(kyaml::content(kptfile), "pipeline") else {
        return Vec::new();
    };
    ["mutators", "validators"]
        .into_iter()
        .flat_map(|list| kyaml::field(pipeline, list).map_or(&[][..], |l| &l.content))
        .map(|f| kyaml::value_of(kyaml::field(f, "image")))
        .filter(|image| !image.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::path::Path;

    use super::*;

    fn kptfile(dir: &Path, name: &str, images: &[&str]) {
        std::fs::create_dir_all(dir).unwrap();
        let mut text =
            format!("apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: {name}\n");
        if !images.is_empty() {
            text.push_str("pipeline:\n  mutators:\n");
            for image in images {
                text.push_str(&format!("  - image: {image}\n"));
            }
        }
        std::fs::write(dir.join("Kptfile"), text).unwrap();
    }

    fn options(dir: &Path) -> RenderOptions {
        RenderOptions {
            dir: dir.to_path_buf(),
            allow_exec: false,
            max_output_bytes: 1 << 20,
            results_dir: None,
            output: None,
            image_prefix: crate::image::GHCR_IMAGE_PREFIX.into(),
        }
    }

    /// One walk finds the package tree (the nearest Kptfiles below each
    /// package, whatever directories are between) and every image the
    /// pipelines name, depth first in name order; a Kptfile that does not
    /// read but names an image counts as needing one.
    #[test]
    fn the_walk_finds_the_packages_and_the_images_they_name() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path();
        kptfile(
            root,
            "root",
            &["ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.2"],
        );
        kptfile(&root.join("b-sub"), "b", &["example.com/fns/b:v1"]);
        kptfile(&root.join("b-sub/deeper"), "c", &["example.com/fns/c:v1"]);
        kptfile(&root.join("a-plain/nested"), "d", &[]);
        std::fs::create_dir_all(root.join("c-broken")).unwrap();
        std::fs::write(root.join("c-broken/Kptfile"), "image: [unclosed\n").unwrap();
        let plan = Plan::new(options(root)).unwrap();
        assert_eq!(
            plan.images(),
            [
                Some("ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.2".to_string()),
                Some("example.com/fns/b:v1".to_string()),
                Some("example.com/fns/c:v1".to_string()),
                None,
            ]
        );
        let subs: Vec<&str> = plan
            .package
            .subpackages
            .iter()
            .map(|(rel, _)| rel.as_str())
            .collect();
        assert_eq!(subs, ["a-plain/nested", "b-sub", "c-broken"]);
        let deeper: Vec<&str> = plan.package.subpackages[1]
            .1
            .subpackages
            .iter()
            .map(|(rel, _)| rel.as_str())
            .collect();
        assert_eq!(deeper, ["deeper"]);
    }

    /// kpt's order: an `-o` directory that exists, then the root's Kptfile,
    /// then every Kptfile below it (a bad one anywhere stops the render
    /// before anything runs).
    #[test]
    fn the_checks_come_in_kpts_order_before_anything_runs() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path();
        kptfile(&root.join("pkg/sub"), "sub", &["not a valid image"]);
        let out = root.join("out");
        std::fs::create_dir(&out).unwrap();
        let with_output = RenderOptions {
            output: Some(eval::Output::Dir(out.clone())),
            ..options(&root.join("pkg"))
        };
        assert!(matches!(
            Plan::new(with_output),
            Err(Error::OutputExists(_))
        ));
        assert!(matches!(
            Plan::new(options(&root.join("pkg"))),
            Err(Error::Input(text)) if text.contains("is not a package: it has no Kptfile")
        ));
        kptfile(&root.join("pkg"), "pkg", &[]);
        let err = Plan::new(options(&root.join("pkg"))).err().unwrap();
        assert!(matches!(err, Error::Kptfile(_)), "{err}");
    }
}

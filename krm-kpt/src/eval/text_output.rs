//! `-o stdout|unwrap|DIR` for resources held in memory (`render -o`): kpt
//! writes them as a ResourceList (kyaml's `ByteWriter`, the reader's
//! annotations kept), and `cmdutil.WriteFnOutput` writes that text out:
//! as it is, unwrapped, or read again into a new directory.

use std::io::Write;

use super::error::Error;
use super::input::wrap_and_encode;
use super::options::Output;
use super::output::{placed_from_text, unwrap_text};
use krm_yaml::package::{self, PackageError, Progress};
use krm_yaml::Node;

/// The resources as one `config.kubernetes.io/v1` ResourceList.
pub(crate) fn resource_list_text(items: &mut [Node]) -> String {
    wrap_and_encode(
        ("config.kubernetes.io/v1", "ResourceList"),
        items,
        Vec::new(),
    )
}

/// `text` (a ResourceList) written where `output` says; `InPlace` writes
/// nothing (the caller writes the package).
pub(crate) fn write_output_text(
    text: &str,
    output: &Output,
    stdout: &mut (dyn Write + Send),
    stderr: &mut (dyn Write + Send),
) -> Result<(), Error> {
    match output {
        Output::InPlace => Ok(()),
        Output::Stdout => {
            stdout.write_all(text.as_bytes())?;
            Ok(stdout.flush()?)
        }
        Output::Unwrap => {
            stdout.write_all(unwrap_text(text)?.as_bytes())?;
            Ok(stdout.flush()?)
        }
        Output::Dir(dir) => {
            let placed = placed_from_text(text)?;
            std::fs::create_dir_all(dir).map_err(|source| PackageError::Io {
                path: dir.clone(),
                source,
            })?;
            package::write_package(dir, placed, &mut Progress::new(Some(stderr)))?;
            Ok(())
        }
    }
}

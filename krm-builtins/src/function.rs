//! What every function works with: the ResourceList it reads and
//! changes, the [`Context`] it checks between resources, how it stops
//! ([`Stop`]), its entry point's type ([`Run`]) and a function by name
//! ([`Builtin`]). Kept apart from the registry in the crate root so that
//! the functions and their shared helpers depend on these types alone, not
//! on the list of functions.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use krm_yaml::Node;

use crate::result::FnResult;

/// What a function reads and what it leaves: the ResourceList's fields.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResourceList {
    /// `items`: each a resource's mapping node (not a document node).
    pub items: Vec<Node>,
    /// `functionConfig`, a mapping node, when the caller sent one.
    pub function_config: Option<Node>,
    /// `results` the function adds.
    pub results: Vec<FnResult>,
    /// What the catalog's binary writes on stderr (its log), also on
    /// success.
    pub log: String,
}

/// Why a function stopped before its end.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Stop {
    /// The function failed as the catalog's binary fails: exit code 1,
    /// this text on stderr (after [`ResourceList::log`]), the ResourceList
    /// as it stands (with its results) on stdout.
    #[error("{0}")]
    Failed(String),
    /// The call's deadline passed or its caller went away
    /// ([`Context::check`]); nothing it did counts.
    #[error("cancelled")]
    Cancelled,
}

/// A call's deadline and cancellation, checked by functions between
/// resources.
#[derive(Debug, Clone, Default)]
pub struct Context {
    deadline: Option<Instant>,
    cancelled: Option<Arc<AtomicBool>>,
    release: Option<&'static str>,
}

impl Context {
    /// No deadline, never cancelled.
    pub fn new() -> Context {
        Context::default()
    }

    /// Stops the call once `deadline` has passed.
    pub fn with_deadline(mut self, deadline: Option<Instant>) -> Context {
        self.deadline = deadline;
        self
    }

    /// Stops the call once `flag` is set (by the caller that gave up).
    pub fn with_cancel(mut self, flag: Arc<AtomicBool>) -> Context {
        self.cancelled = Some(flag);
        self
    }

    /// The catalog's release the call's image names
    /// ([`Builtin::release_of`]): a function whose older releases answered
    /// differently in a small way answers as that release.
    pub fn with_release(mut self, release: Option<&'static str>) -> Context {
        self.release = release;
        self
    }

    /// The release the image names, if it names one of the table's.
    pub fn release(&self) -> Option<&'static str> {
        self.release
    }

    /// `Err(Stop::Cancelled)` once the call should stop.
    pub fn check(&self) -> Result<(), Stop> {
        let late = self.deadline.is_some_and(|d| Instant::now() >= d);
        let gone = self
            .cancelled
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Relaxed));
        if late || gone {
            Err(Stop::Cancelled)
        } else {
            Ok(())
        }
    }
}

/// A function's entry point.
pub type Run = fn(&mut ResourceList, &Context) -> Result<(), Stop>;

/// One built-in function.
#[derive(Debug, Clone, Copy)]
pub struct Builtin {
    /// The catalog's name (the image's last path segment).
    pub name: &'static str,
    pub(crate) run: Run,
}

impl Builtin {
    /// Runs the function over `rl`. On [`Stop::Failed`] the ResourceList
    /// holds what the catalog's binary would still write (its results).
    pub fn run(&self, rl: &mut ResourceList, ctx: &Context) -> Result<(), Stop> {
        ctx.check()?;
        (self.run)(rl, ctx)
    }
}

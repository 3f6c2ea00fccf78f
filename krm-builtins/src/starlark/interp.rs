//! One program's run in the interpreter (the `starlark` crate): the
//! ResourceList as Starlark values, the program, the items back as nodes.
//! Runs in the sandbox process ([`super::sandbox`]) or, in tests, here.

use std::cell::RefCell;

use serde::{Deserialize, Serialize};
use starlark::environment::{GlobalsBuilder, LibraryExtension, Module};
use starlark::eval::Evaluator;
use starlark::syntax::{AstModule, Dialect};
use starlark::values::dict::{AllocDict, DictRef};
use starlark::values::list::{AllocList, ListRef};
use starlark::values::structs::AllocStruct;
use starlark::values::{Heap, Value};
use starlark::ErrorKind;

use super::convert::{data_to_value, resource_data};
use super::data::Data;
use super::source::Rewritten;

/// How deep calls may nest when the request names no depth: far past
/// what a configuration program needs, well inside the sandbox thread's
/// stack ([`super::sandbox::STACK_BYTES`]).
pub const DEFAULT_MAX_DEPTH: usize = 2_000;

/// The module slot that keeps `ctx.resource_list` for reading back.
const RESOURCE_LIST: &str = "__krm_resource_list";

/// What the sandbox is asked to run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Request {
    pub name: String,
    pub source: String,
    pub items: Vec<Data>,
    pub function_config: Option<Data>,
    /// 0: [`DEFAULT_MAX_DEPTH`].
    pub max_depth: usize,
}

/// The items the program left, or the error result's message.
pub type Outcome = Result<Vec<Data>, String>;

/// Runs the program; `print` gets each line it prints.
pub fn execute(req: &Request, print: &dyn Fn(&str)) -> Outcome {
    let rewritten = super::source::rewrite(&req.source);
    let ast = AstModule::parse(&req.name, rewritten.text.clone(), &dialect())
        .map_err(|e| describe(&req.name, &e, &rewritten))?;
    let globals = GlobalsBuilder::extended_by(&[
        LibraryExtension::SetType,
        LibraryExtension::Print,
        LibraryExtension::StructType,
    ])
    .with(super::libs::while_guard)
    .with(super::builtins::go_builtins)
    .build();
    super::builtins::reset();
    let loader = super::libs::Loader;
    let printer = Printer(print);
    let depth = if req.max_depth == 0 {
        DEFAULT_MAX_DEPTH
    } else {
        req.max_depth
    };
    Module::with_temp_heap(|module| {
        let heap = module.heap();
        let rl = resource_list(heap, req)?;
        let open_api = if req.source.contains("open_api") {
            super::openapi::value(heap)?
        } else {
            Value::new_none()
        };
        let ctx = heap.alloc(AllocStruct([
            ("resource_list", rl),
            ("open_api", open_api),
            ("environment", heap.alloc(AllocDict::EMPTY)),
        ]));
        module.set("ctx", ctx);
        // The evaluator's collector moves values: only what a module
        // slot holds is found again after it ran (a Rust local is not).
        module.set(RESOURCE_LIST, rl);
        let mut eval = Evaluator::new(&module);
        eval.set_loader(&loader);
        eval.set_print_handler(&printer);
        eval.set_max_callstack_size(depth)
            .map_err(|e| format!("setting the depth limit: {e}"))?;
        match eval.eval_module(ast, &globals) {
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::StackOverflow(_)) => {
                return Err(format!(
                    "{}: the program's calls nest deeper than {depth} (the depth limit)",
                    req.name
                ))
            }
            Err(e) => return Err(describe(&req.name, &e, &rewritten)),
        }
        let rl = module
            .get(RESOURCE_LIST)
            .ok_or("the program's ResourceList went missing")?;
        items_out(rl)
    })
}

/// Go Starlark as the catalog sets it (`AllowSet`, `AllowRecursion`,
/// `AllowGlobalReassign`: top-level `if`/`for`).
fn dialect() -> Dialect {
    Dialect {
        enable_top_level_stmt: true,
        enable_keyword_only_arguments: true,
        ..Dialect::Standard
    }
}

/// The error result's message. `fail()` reads as the catalog's
/// (`fail: MSG`); the rest name where, as `NAME:LINE:COL: MSG` (Go
/// Starlark's form for a syntax error), lines as the user wrote them.
fn describe(name: &str, e: &starlark::Error, rewritten: &Rewritten) -> String {
    if let ErrorKind::Fail(msg) = e.kind() {
        return format!("fail:{msg}");
    }
    let msg = match e.kind() {
        ErrorKind::Parser(m)
        | ErrorKind::Value(m)
        | ErrorKind::Function(m)
        | ErrorKind::Scope(m)
        | ErrorKind::Native(m)
        | ErrorKind::Other(m)
        | ErrorKind::Internal(m)
        | ErrorKind::Freeze(m)
        | ErrorKind::StackOverflow(m)
        | ErrorKind::Fail(m) => m.to_string(),
        _ => e.without_diagnostic().to_string(),
    };
    // An error inside a module's own Starlark (`re.star`'s helpers) is
    // told where the program called into it: the outermost frame of
    // the call stack that is in the program.
    let in_program = |s: &&starlark::codemap::FileSpan| s.filename() == name;
    let span = e.span().filter(in_program).or_else(|| {
        e.call_stack()
            .frames
            .iter()
            .filter_map(|f| f.location.as_ref())
            .rfind(in_program)
    });
    match span {
        Some(span) => {
            let at = span.resolve_span();
            format!(
                "{name}:{}:{}: {msg}",
                rewritten.original_line(at.begin.line),
                at.begin.column + 1
            )
        }
        None => format!("{name}: {msg}"),
    }
}

struct Printer<'a>(&'a dyn Fn(&str));

impl starlark::PrintHandler for Printer<'_> {
    fn println(&self, text: &str) -> starlark::Result<()> {
        (self.0)(text);
        Ok(())
    }
}

/// kyaml's `WrapResources`: `apiVersion`, `kind`, `items`, and
/// `functionConfig` when there is one.
fn resource_list<'v>(heap: Heap<'v>, req: &Request) -> Result<Value<'v>, String> {
    let mut items = Vec::with_capacity(req.items.len());
    for item in &req.items {
        items.push(data_to_value(heap, item)?);
    }
    let mut fields: Vec<(&str, Value<'v>)> = vec![
        ("apiVersion", heap.alloc("config.kubernetes.io/v1")),
        ("kind", heap.alloc("ResourceList")),
        ("items", heap.alloc(AllocList(items))),
    ];
    if let Some(fc) = &req.function_config {
        fields.push(("functionConfig", data_to_value(heap, fc)?));
    }
    Ok(heap.alloc(AllocDict(fields)))
}

/// kyaml's `UnwrapResources`: what the program left in `items`.
fn items_out(rl: Value<'_>) -> Result<Vec<Data>, String> {
    let Some(dict) = DictRef::from_value(rl) else {
        return Err("ctx.resource_list is no longer a dict".into());
    };
    let Some(items) = dict.get_str("items") else {
        return Ok(Vec::new());
    };
    if items.is_none() {
        return Ok(Vec::new());
    }
    let Some(list) = ListRef::from_value(items).map(|l| l.content().to_vec()) else {
        return Err(format!(
            "ctx.resource_list[\"items\"] must be a list, not a {}",
            items.get_type()
        ));
    };
    let mut out = Vec::with_capacity(list.len());
    for (n, item) in list.into_iter().enumerate() {
        if DictRef::from_value(item).is_none() {
            return Err(format!(
                "ctx.resource_list[\"items\"][{n}] must be a dict (a resource), not a {}",
                item.get_type()
            ));
        }
        out.push(resource_data(item)?);
    }
    Ok(out)
}

/// What `print` wrote, kept in this process (tests).
#[derive(Default)]
pub struct Printed(pub RefCell<String>);

impl Printed {
    pub fn line(&self, text: &str) {
        let mut s = self.0.borrow_mut();
        s.push_str(text);
        s.push('\n');
    }
}

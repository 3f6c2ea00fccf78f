//! The README's main job on the embedded default: start a real
//! `wrapper-server` around the example function shipped in this repo, send
//! it a ResourceList over gRPC on loopback, print what comes back.
//!
//! `demo [RESOURCE_LIST_FILE]` (default: examples/resourcelist.yaml).

use anyhow::Context;
use e2e_tests::{bin, Wrapper};
use proto::pb::EvaluateFunctionRequest;

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let path = std::env::args().nth(1).unwrap_or_else(|| {
        concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/resourcelist.yaml").to_string()
    });
    let input = std::fs::read(&path).with_context(|| format!("reading {path}"))?;
    let function = bin("example-fn");
    let function = function.to_str().context("non-UTF-8 path")?;
    let wrapper = Wrapper::start(&[], &[function])?;
    eprintln!(
        "wrapper-server listening on {} around {function}",
        wrapper.addr
    );
    let mut client = wrapper.client().await?;
    let resp = client
        .evaluate_function(EvaluateFunctionRequest {
            resource_list: input.into(),
            image: "example-fn".into(),
            tag: String::new(),
        })
        .await
        .map_err(|s| anyhow::anyhow!("{:?}: {}", s.code(), s.message()))?
        .into_inner();
    eprint!("function log: {}", String::from_utf8_lossy(&resp.log));
    print!("{}", String::from_utf8_lossy(&resp.resource_list));
    Ok(())
}

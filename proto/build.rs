//! Compiles `proto/evaluator.proto` with protox (a pure-Rust protobuf
//! compiler), so building needs no system `protoc`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/evaluator.proto");
    let fds = protox::compile(["evaluator.proto"], ["proto"])?;
    tonic_prost_build::configure()
        .bytes(".evaluator")
        .compile_fds(fds)?;
    Ok(())
}

//! `health-probe`: a drop-in replacement for grpc-health-probe.
//!
//! Same flags (Go style), same messages on stderr, same exit codes:
//! 0 SERVING, 1 bad arguments, 2 connection failure or timeout, 3 RPC failure,
//! 4 not SERVING. See `flags` for the command line, `dial` for how the connection is
//! made, and `probe` for the call.

#![forbid(unsafe_code)]

#[macro_use]
mod log;

mod dial;
mod flags;
mod grpc;
mod oserror;
mod probe;
mod resolve;
mod tls;

use flags::{FlagError, Options};

const STATUS_INVALID_ARGUMENTS: i32 = 1;

fn log_usage() {
    use std::io::Write;
    let _ = std::io::stderr().write_all(flags::USAGE.as_bytes());
}

fn print_options(o: &Options) {
    log!("parsed options:");
    log!(
        "> addr={} conn_timeout={} rpc_timeout={}",
        o.addr,
        o.connect_timeout,
        o.rpc_timeout
    );
    log!(
        "> service={:?} user-agent={:?} gzip={}",
        o.service,
        o.user_agent,
        o.gzip
    );
    for (k, v) in &o.rpc_headers {
        log!("> rpc-header {k}: {v}");
    }
    log!("> tls={}", o.tls);
    if o.tls {
        log!("  > no-verify={} ", o.tls_no_verify);
        log!("  > ca-cert={}", o.tls_ca_cert);
        log!("  > client-cert={}", o.tls_client_cert);
        log!("  > client-key={}", o.tls_client_key);
        log!("  > server-name={}", o.tls_server_name);
    }
}

fn run() -> i32 {
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let o = match flags::parse(&args) {
        Ok(o) => o,
        Err(FlagError::Help) => {
            log_usage();
            return 0;
        }
        Err(FlagError::Bad(msg)) => {
            log!("{msg}");
            log_usage();
            return STATUS_INVALID_ARGUMENTS;
        }
    };
    if o.version {
        println!("health-probe {}", env!("CARGO_PKG_VERSION"));
        return 0;
    }
    if let Err(msg) = flags::validate(&o) {
        log!("error: {msg}");
        return STATUS_INVALID_ARGUMENTS;
    }
    if o.verbose {
        print_options(&o);
    }
    let tls = if o.tls {
        match tls::client_config(&o) {
            Ok(cfg) => Some(cfg),
            Err(e) => {
                log!("failed to initialize tls credentials. error={e}");
                return STATUS_INVALID_ARGUMENTS;
            }
        }
    } else {
        None
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            log!("error: cannot start the async runtime: {e}");
            return probe::STATUS_CONNECTION_FAILURE;
        }
    };
    rt.block_on(probe::run(&o, tls))
}

fn main() {
    let code = run();
    std::process::exit(code);
}

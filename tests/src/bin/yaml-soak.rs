//! The YAML differential harness for a long run (tests/bench/yaml-soak.sh):
//! generated packages through our parse and emit against yaml.v3's, and
//! through `eval`/`render` against kpt's (tests/src/yamldiff). Prints the
//! figures BENCHMARKS.md records and every failure, shrunk.

use std::time::Instant;

use anyhow::Context;
use clap::Parser;
use e2e_tests::yamldiff::{run_plan, Plan, Tools};

#[derive(Parser)]
struct Args {
    /// The first seed (CI's fixed set starts at 0).
    #[arg(long, default_value_t = 100_000)]
    first_seed: u64,
    /// Cases of the yaml.v3 check.
    #[arg(long, default_value_t = 10_000)]
    cases: u64,
    /// Cases of the eval and render checks (from the first seed; each runs
    /// kpt and ours five times).
    #[arg(long, default_value_t = 1_000)]
    kpt_cases: u64,
    /// Failures shrunk at most.
    #[arg(long, default_value_t = 5)]
    shrink: usize,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let tools = Tools::find().context("the harness's tools")?;
    let plan = Plan {
        yaml_seeds: args.first_seed..args.first_seed + args.cases,
        kpt_seeds: args.first_seed..args.first_seed + args.kpt_cases,
        shrink_at_most: args.shrink,
        shrink_budget: 400,
    };
    let start = Instant::now();
    let report = run_plan(&tools, &plan, &mut |r| {
        let done: usize = r.cases.values().sum();
        eprintln!(
            "{done} checks, {} failures, {:.0?}",
            r.failures.len(),
            start.elapsed()
        );
    })?;
    for f in &report.failures {
        println!("{f}\n");
    }
    println!(
        "seeds {}..{} ({:.1?})",
        plan.yaml_seeds.start,
        plan.yaml_seeds.end,
        start.elapsed()
    );
    print!("{}", report.summary());
    if !report.failures.is_empty() {
        std::process::exit(1);
    }
    Ok(())
}

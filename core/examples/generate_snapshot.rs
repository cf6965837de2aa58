//! Writes a generated cluster snapshot (one JSON `kind: List`, kubectl's indentation, the fields real
//! clusters carry) for measuring `kubectl sched explain --from` at scale.
//!
//! Run: `cargo run --release -p sched-core --features testing --example generate_snapshot -- \
//!       /tmp/cluster-5k.json 5000 150000`

use std::path::PathBuf;
use std::process::ExitCode;

use sched_core::testing::generate::{GenerateParams, write_json_list};

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next().map(PathBuf::from) else {
        eprintln!("usage: generate_snapshot FILE [NODES [PODS [ZONES [SEED [PENDING_PERCENT]]]]]");
        return ExitCode::from(2);
    };
    let mut number = |default: u64| args.next().and_then(|v| v.parse().ok()).unwrap_or(default);
    let (nodes, pods, zones, seed) = (number(5_000), number(150_000), number(3), number(42));
    let mut params = GenerateParams::new(nodes as usize, pods as usize, zones as usize, seed);
    params.pending_percent = number(params.pending_percent);
    match write_json_list(&params, &path) {
        Ok(bytes) => {
            println!(
                "{}: {nodes} nodes, {pods} pods, {} MiB",
                path.display(),
                bytes >> 20
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("generate_snapshot: {}: {e}", path.display());
            ExitCode::FAILURE
        }
    }
}

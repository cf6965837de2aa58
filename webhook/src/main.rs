//! `sched-webhook serve | certs | explainer`.

use std::process::ExitCode;

use clap::Parser;

use sched_webhook::config::{Cli, Command};
use sched_webhook::{memory, run};

/// jemalloc instead of glibc's malloc: see `sched_webhook::memory`.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    memory::purge_in_background();
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_current_span(false)
        .init();
    // kube's client uses rustls; the webhook port builds its own configuration with ring explicitly.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("sched-webhook: failed to start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Serve(args) => run::serve(args).await.map_err(anyhow::Error::from),
            Command::Certs(args) => run::certs(args).await,
            Command::Explainer(args) => run::explainer(args).await.map_err(anyhow::Error::from),
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "sched-webhook failed");
            eprintln!("sched-webhook: {e:#}");
            ExitCode::FAILURE
        }
    }
}

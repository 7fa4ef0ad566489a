//! GroceryInventory: the example MCP App — a multi-store grocery inventory served over MCP
//! (Streamable HTTP at `/mcp`, or stdio) with an interactive dashboard, plus a REST API under
//! `/api` over the same data.

mod dashboard;
mod data;
mod mcp;
mod model;
mod rest;
mod schema;

use axum::serve::ListenerExt as _;
use std::net::SocketAddr;
use std::sync::Arc;

use clap::Parser;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::ServiceExt;
use tokio_util::sync::CancellationToken;

use crate::data::InventoryService;
use crate::mcp::GroceryServer;

#[derive(Parser, Debug)]
#[command(name = "grocery-inventory", version, about = "GroceryInventory MCP App (MCP + REST + dashboard)")]
struct Cli {
    /// Address to serve HTTP on (MCP at /mcp, REST at /api). Port 0 picks a free port; the bound
    /// address is printed on stderr.
    #[arg(long, default_value = "127.0.0.1:5001")]
    listen: SocketAddr,
    /// Serve MCP over stdin/stdout instead of HTTP (logs go to stderr).
    #[arg(long)]
    stdio: bool,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let cli = Cli::parse();
    // stdout may be the MCP channel: logs always go to stderr.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "grocery_inventory=info,rmcp=warn".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let service = Arc::new(InventoryService::seeded());

    if cli.stdio {
        eprintln!("GroceryInventory serving MCP on stdio");
        let running = GroceryServer::new(service).serve(rmcp::transport::stdio()).await?;
        running.waiting().await?;
        return Ok(());
    }

    let shutdown = CancellationToken::new();
    let listener = tokio::net::TcpListener::bind(cli.listen).await?;
    let addr = listener.local_addr()?;
    let mut allowed_hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
    if !addr.ip().is_unspecified() {
        allowed_hosts.push(addr.ip().to_string());
    }
    let mcp_service = {
        let service = service.clone();
        StreamableHttpService::new(
            move || Ok(GroceryServer::new(service.clone())),
            Arc::new(LocalSessionManager::default()),
            StreamableHttpServerConfig::default()
                .with_allowed_hosts(allowed_hosts)
                .with_cancellation_token(shutdown.child_token()),
        )
    };
    let app = rest::router(service).nest_service("/mcp", mcp_service);
    eprintln!("GroceryInventory listening on http://{addr}/mcp (REST API at http://{addr}/api)");
    let token = shutdown.clone();
    axum::serve(listener.tap_io(|tcp| {
            // Small SSE and JSON responses must not wait for delayed ACKs (Nagle).
            let _ = tcp.set_nodelay(true);
        }), app)
        .with_graceful_shutdown(async move {
            wait_for_signal().await;
            token.cancel();
        })
        .await?;
    Ok(())
}

async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

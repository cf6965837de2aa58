//! A TCP proxy on 127.0.0.1 that delays every chunk a client sends before passing it on: a slow API
//! server for the tests, without touching the real one (TLS passes through untouched, so clients
//! still verify the API server's certificate, which names 127.0.0.1). It serves until dropped.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// A running proxy; dropping it stops accepting and closes every connection.
pub struct LatencyProxy {
    address: SocketAddr,
    accept: JoinHandle<()>,
}

impl LatencyProxy {
    /// Proxies to `upstream` (a loopback address), delaying each client-to-server chunk by `delay`.
    pub async fn start(upstream: SocketAddr, delay: Duration) -> std::io::Result<Self> {
        assert!(upstream.ip().is_loopback(), "the proxy only forwards to loopback");
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let accept = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            while let Ok((client, _)) = listener.accept().await {
                connections.spawn(async move {
                    if let Ok(server) = TcpStream::connect(upstream).await {
                        relay(client, server, delay).await;
                    }
                });
            }
        });
        Ok(LatencyProxy { address, accept })
    }

    /// `https://127.0.0.1:PORT`, to put in a client configuration's `cluster_url`.
    pub fn url(&self) -> String {
        format!("https://{}", self.address)
    }
}

impl Drop for LatencyProxy {
    fn drop(&mut self) {
        // The accept task owns the JoinSet of connections: aborting it drops (and aborts) them all.
        self.accept.abort();
    }
}

async fn relay(client: TcpStream, server: TcpStream, delay: Duration) {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let upstream = async {
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            let n = match client_read.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            tokio::time::sleep(delay).await;
            if server_write.write_all(&buffer[..n]).await.is_err() {
                break;
            }
        }
        let _ = server_write.shutdown().await;
    };
    let downstream = async {
        let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
        let _ = client_write.shutdown().await;
    };
    tokio::join!(upstream, downstream);
}

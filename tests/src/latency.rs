//! A TCP proxy on 127.0.0.1 in front of the API server, for the tests, without touching the real
//! one (TLS passes through untouched, so clients still verify the API server's certificate, which
//! names 127.0.0.1):
//!
//! - it delays every chunk a client sends before passing it on: a slow API server;
//! - [`LatencyProxy::cut`] cuts the link (the port stops listening, so connects are refused, and
//!   every connection is closed) and [`LatencyProxy::restore`] listens on the same port again: an
//!   API server unreachable for a while.
//!
//! It serves until dropped. It only listens on, and forwards to, loopback.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::{JoinHandle, JoinSet};

/// How long [`LatencyProxy::restore`] retries binding the port while something else holds it.
const REBIND_TIMEOUT: Duration = Duration::from_secs(5);
const REBIND_INTERVAL: Duration = Duration::from_millis(50);

/// A running proxy; dropping it stops accepting and closes every connection.
pub struct LatencyProxy {
    address: SocketAddr,
    upstream: SocketAddr,
    delay: Duration,
    /// `None` while the link is cut.
    serving: Option<Serving>,
}

/// The accept task of one listening period; it owns the listener and every connection.
struct Serving {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl LatencyProxy {
    /// Proxies to `upstream` (a loopback address), delaying each client-to-server chunk by `delay`
    /// (none when zero).
    pub async fn start(upstream: SocketAddr, delay: Duration) -> std::io::Result<Self> {
        assert!(upstream.ip().is_loopback(), "the proxy only forwards to loopback");
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        Ok(LatencyProxy {
            address,
            upstream,
            delay,
            serving: Some(serve(listener, upstream, delay)),
        })
    }

    /// `https://127.0.0.1:PORT`, to put in a client configuration's `cluster_url`.
    pub fn url(&self) -> String {
        format!("https://{}", self.address)
    }

    /// The proxy's address (the same across [`Self::cut`] and [`Self::restore`]).
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Whether the link is cut.
    pub fn is_cut(&self) -> bool {
        self.serving.is_none()
    }

    /// Cuts the link: closes the listening socket (connects to the port are refused from then on)
    /// and every connection, both ends, and returns once they are all closed. Nothing if already cut.
    pub async fn cut(&mut self) {
        if let Some(Serving { stop, task }) = self.serving.take() {
            let _ = stop.send(());
            // The task ends once its listener is dropped and its connections are shut down.
            let _ = task.await;
        }
    }

    /// Restores the link: listens on the same port again (retrying for a few seconds while
    /// another socket holds it). Nothing if the link is not cut.
    pub async fn restore(&mut self) -> std::io::Result<()> {
        if self.serving.is_some() {
            return Ok(());
        }
        let deadline = Instant::now() + REBIND_TIMEOUT;
        // tokio's TcpListener sets SO_REUSEADDR: the closed connections' TIME_WAIT is no obstacle.
        let listener = loop {
            match TcpListener::bind(self.address).await {
                Ok(listener) => break listener,
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && Instant::now() < deadline => {
                    tokio::time::sleep(REBIND_INTERVAL).await;
                }
                Err(e) => return Err(e),
            }
        };
        self.serving = Some(serve(listener, self.upstream, self.delay));
        Ok(())
    }
}

impl Drop for LatencyProxy {
    fn drop(&mut self) {
        // The accept task owns the JoinSet of connections: aborting it drops (and aborts) them all.
        if let Some(serving) = &self.serving {
            serving.task.abort();
        }
    }
}

/// Accepts on `listener` and relays each connection to `upstream` until told to stop (or accepting
/// fails); then drops the listener and shuts every connection down.
fn serve(listener: TcpListener, upstream: SocketAddr, delay: Duration) -> Serving {
    let (stop, mut stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let mut connections = JoinSet::new();
        loop {
            tokio::select! {
                _ = &mut stopped => break,
                // Reap finished connections, so the set holds only live ones.
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
                accepted = listener.accept() => match accepted {
                    Ok((client, _)) => {
                        connections.spawn(async move {
                            if let Ok(server) = TcpStream::connect(upstream).await {
                                relay(client, server, delay).await;
                            }
                        });
                    }
                    Err(_) => break,
                },
            }
        }
        drop(listener);
        connections.shutdown().await;
    });
    Serving { stop, task }
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
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: Duration = Duration::from_secs(10);

    /// An echo server on loopback, until the runtime ends.
    async fn echo() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let (mut read, mut write) = stream.split();
                    let _ = tokio::io::copy(&mut read, &mut write).await;
                });
            }
        });
        address
    }

    async fn round_trip(stream: &mut TcpStream, message: &[u8]) -> Vec<u8> {
        stream.write_all(message).await.expect("write");
        let mut answer = vec![0u8; message.len()];
        tokio::time::timeout(LIMIT, stream.read_exact(&mut answer))
            .await
            .expect("echoed in time")
            .expect("read");
        answer
    }

    #[tokio::test]
    async fn cut_closes_every_connection_and_refuses_new_ones_until_restored_on_the_same_port() {
        let mut proxy = LatencyProxy::start(echo().await, Duration::ZERO)
            .await
            .expect("proxy");
        let address = proxy.address();
        let mut before = TcpStream::connect(address).await.expect("connect");
        assert_eq!(round_trip(&mut before, b"ping").await, b"ping");

        tokio::time::timeout(LIMIT, proxy.cut())
            .await
            .expect("cut in time");
        assert!(proxy.is_cut());
        let mut buffer = [0u8; 16];
        let read = tokio::time::timeout(LIMIT, before.read(&mut buffer))
            .await
            .expect("closed in time");
        assert!(
            matches!(read, Ok(0) | Err(_)),
            "the connection is closed: {read:?}"
        );
        let refused = TcpStream::connect(address).await.expect_err("nothing listens");
        assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);

        proxy.restore().await.expect("restore");
        assert!(!proxy.is_cut());
        assert_eq!(proxy.address(), address);
        let mut after = TcpStream::connect(address).await.expect("connect again");
        assert_eq!(round_trip(&mut after, b"pong").await, b"pong");
    }

    #[tokio::test]
    async fn delays_what_the_client_sends() {
        let proxy = LatencyProxy::start(echo().await, Duration::from_millis(200))
            .await
            .expect("proxy");
        let mut stream = TcpStream::connect(proxy.address()).await.expect("connect");
        let start = Instant::now();
        assert_eq!(round_trip(&mut stream, b"slow").await, b"slow");
        assert!(
            start.elapsed() >= Duration::from_millis(200),
            "{:?}",
            start.elapsed()
        );
    }
}

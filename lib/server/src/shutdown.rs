//! The shutdown signal of the binaries: SIGTERM (what the kubelet sends) or Ctrl-C.

/// Completes on SIGTERM or Ctrl-C (SIGINT), logging that the process is shutting down.
pub async fn signal() {
    let term = async {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            match signal(SignalKind::terminate()) {
                Ok(mut term) => {
                    term.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        }
        #[cfg(not(unix))]
        std::future::pending::<()>().await;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = term => {}
    }
    tracing::info!("shutting down");
}

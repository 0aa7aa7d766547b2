//! The log lines of one test: a subscriber for the current thread only, so tests that run in
//! one process do not see each other's lines.

use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};

/// The lines logged on this thread (every level) while the guard lives.
pub struct Captured {
    buffer: Arc<Mutex<Vec<u8>>>,
    _guard: tracing::subscriber::DefaultGuard,
}

impl Captured {
    /// Everything logged so far, as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.buffer.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
    }
}

/// Starts capturing the log lines of this thread (a `current_thread` runtime runs every task
/// of the test on it).
pub fn capture() -> Captured {
    let buffer = Arc::new(Mutex::new(Vec::new()));
    let writer = Arc::clone(&buffer);
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || Shared(Arc::clone(&writer)))
        .finish();
    Captured {
        buffer,
        _guard: tracing::subscriber::set_default(subscriber),
    }
}

struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

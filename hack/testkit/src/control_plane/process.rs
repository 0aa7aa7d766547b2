//! A child process of the control plane: its output in a log file, stopped by its PID on drop.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};

/// How much of a log an error quotes.
const TAIL_LINES: usize = 40;

/// A running child; killed (SIGKILL) and reaped on drop.
pub struct Process {
    name: String,
    child: Child,
    log: PathBuf,
}

/// The last lines of a log file.
pub fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| format!("({}: {e})", path.display()));
    // The apiserver logs every flag at start; they say nothing about a failure.
    let lines: Vec<&str> = text.lines().filter(|l| !l.contains("flags.go")).collect();
    lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n")
}

impl Process {
    /// Starts `cmd` with stdout and stderr appended to `log`.
    pub fn spawn(name: &str, cmd: &mut Command, log: &Path) -> anyhow::Result<Self> {
        let out = File::options()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("opening {}", log.display()))?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .with_context(|| format!("starting {name} ({})", cmd.get_program().to_string_lossy()))?;
        Ok(Self {
            name: name.to_owned(),
            child,
            log: log.to_path_buf(),
        })
    }

    /// An error quoting the log when the process has exited.
    pub fn check_running(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!(
                "{} exited ({status}); its log ({}) ends:\n{}",
                self.name,
                self.log.display(),
                log_tail(&self.log)
            );
        }
        Ok(())
    }

    /// Its exit status if it has exited.
    pub fn try_exit(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// SIGTERM, then SIGKILL when it has not exited within `grace`.
    pub fn terminate(mut self, grace: Duration) -> anyhow::Result<()> {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if self.child.try_wait()?.is_some() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// SIGKILL, and reap: a crash, with no chance to clean up.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The log file.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// Its process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Its resident set in KiB (`VmRSS`), 0 when unknown.
    pub fn rss_kib(&self) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmRSS:"))
                    .and_then(|v| v.split_whitespace().next()?.parse().ok())
            })
            .unwrap_or(0)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

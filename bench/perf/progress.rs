//! A one-line progress bar on stderr for sweeps:
//! `[#####     ] put_bw_block 64 MiB (7/27)`, redrawn in place with `\r`.
//! Shown only when stderr is a terminal, or when `GPUSHMEM_PROGRESS=1`
//! (`GPUSHMEM_PROGRESS=0` turns it off on a terminal).

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicUsize, Ordering};

const WIDTH: usize = 20;

pub struct Progress {
    total: usize,
    done: AtomicUsize,
    enabled: bool,
}

/// Whether bars are drawn in this process.
pub fn enabled() -> bool {
    match std::env::var("GPUSHMEM_PROGRESS").ok().as_deref().map(str::trim) {
        Some("1") | Some("true") | Some("yes") | Some("on") => true,
        Some("0") | Some("false") | Some("no") | Some("off") => false,
        _ => std::io::stderr().is_terminal(),
    }
}

/// The bar's text after `done` of `total` steps, the current one named `what`.
pub fn line(done: usize, total: usize, what: &str) -> String {
    let filled = (done * WIDTH).checked_div(total).unwrap_or(WIDTH).min(WIDTH);
    format!("[{}{}] {what} ({done}/{total})", "#".repeat(filled), " ".repeat(WIDTH - filled))
}

impl Progress {
    /// A bar of `total` steps (drawn only if [`enabled`]).
    pub fn new(total: usize) -> Progress {
        Progress { total, done: AtomicUsize::new(0), enabled: enabled() }
    }

    /// Shows that the next step, `what`, is running.
    pub fn start(&self, what: &str) {
        if self.enabled {
            let done = self.done.load(Ordering::Relaxed);
            // Clear to the end of the line (the previous text may be longer).
            eprint!("\r{}\x1b[K", line(done + 1, self.total, what));
            let _ = std::io::stderr().flush();
        }
    }

    /// Marks one step done.
    pub fn step(&self) {
        self.done.fetch_add(1, Ordering::Relaxed);
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if self.enabled {
            eprint!("\r\x1b[K");
            let _ = std::io::stderr().flush();
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn bar() {
        assert_eq!(super::line(7, 28, "x"), "[#####               ] x (7/28)");
        assert_eq!(super::line(0, 0, "x"), "[####################] x (0/0)");
    }
}

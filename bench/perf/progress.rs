//! The progress bar of the sweeps, on stderr (indicatif):
//! `[#####>              ] put_bw_block 64 MiB (6/27 done, 00:00:41)`.
//! indicatif hides it when stderr is not a terminal, so redirected output holds
//! no bar; `GPUSHMEM_PROGRESS=0` hides it on a terminal too.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::time::Duration;

/// The bar's layout: which step is running, how many are done, time so far.
const TEMPLATE: &str = "[{bar:20}] {msg} ({pos}/{len} done, {elapsed_precise})";

/// A bar of a sweep's steps; shared by the PE threads of a job (one of them drives it).
pub struct Progress(ProgressBar);

impl Progress {
    /// A bar of `total` steps.
    pub fn new(total: usize) -> Progress {
        let off = matches!(
            std::env::var("GPUSHMEM_PROGRESS").ok().as_deref().map(str::trim),
            Some("0" | "false" | "no" | "off")
        );
        let target = if off { ProgressDrawTarget::hidden() } else { ProgressDrawTarget::stderr() };
        let bar = ProgressBar::with_draw_target(Some(total as u64), target);
        bar.set_style(ProgressStyle::with_template(TEMPLATE).expect("valid template").progress_chars("#> "));
        if !bar.is_hidden() {
            // Redraw on a timer: a step's name set just after the previous step
            // could fall in indicatif's rate limit and stay undrawn for the whole step.
            bar.enable_steady_tick(Duration::from_millis(250));
        }
        Progress(bar)
    }

    /// Shows that the next step, `what`, is running.
    pub fn start(&self, what: &str) {
        self.0.set_message(what.to_string());
    }

    /// Marks one step done.
    pub fn step(&self) {
        self.0.inc(1);
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        // Leave no bar behind: the table follows on stdout.
        self.0.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn template() {
        assert!(indicatif::ProgressStyle::with_template(super::TEMPLATE).is_ok());
    }
}

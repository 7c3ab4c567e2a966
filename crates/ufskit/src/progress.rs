//! Progress bars for the long commands (fsck and newfs of large images,
//! benchmarks, the crash tester): drawn on standard error when it is a
//! terminal, never in CI or into a pipe or a file, and cleared when done,
//! so a command's own output is the same with or without them.
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;

/// A bar of `total` units labelled by its message, or a hidden one.
pub fn bar(total: u64, unit: &str) -> ProgressBar {
    let b = ProgressBar::new(total.max(1));
    let template = format!("{{elapsed_precise}} [{{bar:30}}] {{pos}}/{{len}} {unit} {{msg}}");
    if let Ok(style) = ProgressStyle::with_template(&template) {
        b.set_style(style.progress_chars("=> "));
    }
    if std::env::var_os("CI").is_some() || !std::io::stderr().is_terminal() {
        b.set_draw_target(ProgressDrawTarget::hidden());
    }
    b
}

/// Whether bars are drawn here (worth counting the work ahead for).
pub fn shown() -> bool {
    std::env::var_os("CI").is_none() && std::io::stderr().is_terminal()
}

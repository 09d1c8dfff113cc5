//! Progress bars of long xtask runs (indicatif): drawn on stderr when it is a terminal,
//! hidden otherwise (CI logs keep their plain lines).

use indicatif::{ProgressBar, ProgressStyle};

/// A bar of `len` steps named `what`.
pub(crate) fn bar(len: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    if let Ok(style) = ProgressStyle::with_template(
        "{prefix} [{elapsed_precise}] {wide_bar} {pos}/{len} (eta {eta})",
    ) {
        bar.set_style(style);
    }
    bar.set_prefix(what.to_string());
    bar
}

//! The `#[panic_handler]` (cargo feature `panic-handler`, on by default):
//! prints the panic's location with `vprintf`, then traps.

use crate::debug;

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    let (file, line) = info.location().map(|l| (l.file(), l.line())).unwrap_or(("?", 0));
    debug::fail_str(c"gpushmem: panic in kernel at %.*s:%u\n", file, line as u64)
}

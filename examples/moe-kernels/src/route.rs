//! The routing hash of the `moe` example, in one file for both sides: the
//! kernel crate has it as a module, and the host (`examples/moe.rs`)
//! includes this same file with `#[path]` to compute the expected results.
//! Plain `core` Rust with no imports, so it builds for nvptx (`no_std`) and
//! for the host alike.

/// The expert PE of token `token` of PE `pe` in round `round`, among `n_pes`
/// (a hash: deterministic, roughly uniform).
pub fn route(pe: u32, token: u32, round: u64, n_pes: u32) -> u32 {
    let mut h =
        pe.wrapping_mul(0x9E37_79B1) ^ token.wrapping_mul(0x85EB_CA77) ^ (round as u32).wrapping_mul(0xC2B2_AE3D);
    h ^= h >> 16;
    h = h.wrapping_mul(0x7FEB_352D);
    h ^= h >> 15;
    h = h.wrapping_mul(0x846C_A68B);
    h ^= h >> 16;
    h % n_pes
}

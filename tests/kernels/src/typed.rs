//! Kernels of the typed-handle tests (tests/gpu/typed.rs): the safe calls on
//! `Sym<T>`, and their always-on checks.

use gpushmem_kernels::{self as shmem, thread, Cmp, ReduceOp, SignalOp, Sym, TEAM_WORLD};

/// One block per PE. `src` (this PE's values) goes into `dest` on the next PE
/// with a block `put_signal_nbi` (ADD 1 to `sig[0]` there), and this PE waits
/// for its own signal; thread 0 adds 1 to `count[0]` on PE 0 and gets the
/// previous PE's `src` into `got` with a blocking `get`; then the block
/// all-reduces `src` into `sum` (`reduce_block` on the world). No `unsafe`.
#[no_mangle]
pub extern "ptx-kernel" fn typed_calls(
    dest: Sym<u64>,
    src: Sym<u64>,
    got: Sym<u64>,
    sig: Sym<u64>,
    count: Sym<u64>,
    sum: Sym<u64>,
) {
    let (me, n) = (shmem::my_pe(), shmem::n_pes());
    let (next, prev) = ((me + 1) % n, (me + n - 1) % n);
    dest.put_signal_nbi_block(src, sig.elem(0), 1, SignalOp::Add, next);
    if thread::thread_idx() == 0 {
        sig.elem(0).signal_wait_until(Cmp::Ge, 1);
        count.elem(0).atomic_fetch_add(1, 0);
        got.get(src, prev);
    }
    thread::sync_block();
    sum.reduce_block(TEAM_WORLD, src, ReduceOp::Sum);
}

/// Misuse the typed calls must trap on whatever the debug setting (thread 0):
/// `what` 0: `put_nbi` of `src` (one element fewer) into `dest`; 1: `put` to
/// PE 1000; 2: `atomic_add` on a two-element handle; 3: `reduce` whose
/// destination overlaps its source; 4: `p` past the end; 5: `g` from PE 1000.
#[no_mangle]
pub extern "ptx-kernel" fn typed_misuse(what: u32, buf: Sym<u64>) {
    if thread::thread_idx() != 0 {
        return;
    }
    let (a, b) = buf.split_at(buf.len() / 2);
    match what {
        0 => a.put_nbi(b.slice(1, b.len()), 0),
        1 => a.put(b, 1000),
        2 => a.slice(0, 2).atomic_add(1, 0),
        3 => a.reduce(TEAM_WORLD, buf.slice(1, a.len() + 1), ReduceOp::Sum),
        4 => a.p(a.len(), 1, 0),
        5 => b.write(0, a.g(0, 1000)),
        _ => {}
    }
}

/// `Sym::p` and `Sym::g` (thread 0): step 0 puts `100 + me` into element `me`
/// of `mark` on the next PE; step 1 (after a host barrier) gets that element
/// back from the next PE into `seen[0]`. No `unsafe`.
#[no_mangle]
pub extern "ptx-kernel" fn typed_p_g(step: u32, mark: Sym<u64>, seen: Sym<u64>) {
    if thread::thread_idx() != 0 {
        return;
    }
    let (me, n) = (shmem::my_pe(), shmem::n_pes());
    let next = (me + 1) % n;
    match step {
        0 => mark.p(me as usize, 100 + me as u64, next),
        _ => seen.write(0, mark.g(me as usize, next)),
    }
}

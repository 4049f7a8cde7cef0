//! The argument arithmetic of the public host calls (`gpushmem::args`), on a
//! machine without a GPU: sizes, counts, offsets, PE numbers, team strides
//! and launch shapes at 0, 1, `usize::MAX` and near overflow give an `Err`,
//! never a panic or a wrapped value. Each `Ok` is compared with the same
//! arithmetic done in `u128`, where nothing wraps.

use gpushmem::args::{self, Collective};
use gpushmem::{Error, Threads};
use proptest::prelude::*;

const KINDS: [Collective; 5] = [
    Collective::Broadcast,
    Collective::Fcollect,
    Collective::Alltoall,
    Collective::Allreduce,
    Collective::Reducescatter,
];

/// A count: the edges (0, 1, `usize::MAX`, powers of two that overflow when
/// doubled or multiplied by an element size) as often as small and any values.
fn count() -> impl Strategy<Value = usize> {
    prop_oneof![
        prop::sample::select(vec![
            0,
            1,
            2,
            3,
            usize::MAX,
            usize::MAX - 1,
            usize::MAX / 2,
            usize::MAX / 2 + 1,
            1 << 32,
            (1 << 32) - 1,
            1 << 61,
            1 << 62,
            1 << 63,
            (1 << 63) - 1,
        ]),
        0..5000usize,
        any::<usize>(),
    ]
}

/// An element size: those of real types, and absurd ones.
fn elem_size() -> impl Strategy<Value = usize> {
    prop_oneof![prop::sample::select(vec![1, 2, 4, 8, 16, 1 << 20]), 0..64usize, any::<usize>()]
}

fn is_overflow<T: std::fmt::Debug>(r: &Result<T, Error>, call: &str) -> bool {
    matches!(r, Err(Error::ArgumentOverflow { call: c, .. }) if *c == call)
}

/// `Some(v)` when `v` fits `usize`.
fn us(v: u128) -> Option<usize> {
    usize::try_from(v).ok()
}

/// What [`Collective::sizes`] must give, in `u128`: `None` where a count
/// passes `usize` or a byte count passes `u64`.
fn sizes_exact(which: Collective, elem: usize, nelems: usize, n_pes: usize) -> Option<(usize, usize, u64, u64)> {
    // Each factor is below 2^64, so a product of two is exact in u128.
    let (e, n, p) = (elem as u128, nelems as u128, n_pes as u128);
    let blocks = us(n * p);
    let (dest, src) = match which {
        Collective::Broadcast | Collective::Allreduce => (nelems, nelems),
        Collective::Fcollect => (blocks?, nelems),
        Collective::Alltoall => (blocks?, blocks?),
        Collective::Reducescatter => (nelems, blocks?),
        _ => unreachable!(),
    };
    // Every byte count of the call's buffers must fit.
    let (dest_bytes, src_bytes) = (u64::try_from(dest as u128 * e).ok()?, u64::try_from(src as u128 * e).ok()?);
    let block_bytes = u64::try_from(n * e).ok()?;
    let (kernel, grid) = match which {
        Collective::Broadcast => (block_bytes, block_bytes),
        Collective::Fcollect => (block_bytes, dest_bytes),
        Collective::Alltoall => (block_bytes, src_bytes),
        _ => (nelems as u64, src_bytes),
    };
    Some((dest, src, kernel, grid))
}

// ---- the holes of issue 37, each as found ----

/// The case: `nelems = 1 << 63` on 2 PEs wrapped `nelems * n_pes` to 0,
/// both length checks passed, and the kernel was to move 2^63 bytes.
#[test]
fn alltoall_nelems_times_team_size_overflow_is_an_error() {
    let r = Collective::Alltoall.sizes(1, 1 << 63, 2);
    assert!(is_overflow(&r, "alltoall_on_stream"), "{r:?}");
    let text = r.unwrap_err().to_string();
    assert!(text.contains("alltoall_on_stream") && text.contains("nelems 9223372036854775808"), "{text}");
    for which in KINDS {
        // nelems × element size, in every neighbouring call.
        for (elem, nelems, n_pes) in [(8, 1 << 61, 1), (2, usize::MAX, 1), (4, 1 << 62, 4)] {
            let r = which.sizes(elem, nelems, n_pes);
            assert!(is_overflow(&r, which.call()), "{which:?} {elem} {nelems} {n_pes}: {r:?}");
        }
    }
    // nelems × team size, in the calls whose buffers hold one block per member.
    for which in [Collective::Fcollect, Collective::Alltoall, Collective::Reducescatter] {
        for (nelems, n_pes) in [(1 << 63, 2), (usize::MAX, 2), (1 << 32, 1 << 32)] {
            let r = which.sizes(1, nelems, n_pes);
            assert!(is_overflow(&r, which.call()), "{which:?} {nelems} {n_pes}: {r:?}");
        }
    }
}

/// `write_at`/`read_at`: the byte offset `start × element size` of a slice whose
/// element count fits but whose byte count does not.
#[test]
fn element_offset_overflow_is_an_error() {
    let r = args::element_range("read_at", usize::MAX, 8, 1 << 62, 1);
    assert!(is_overflow(&r, "read_at"), "{r:?}");
    let r = args::element_range("write_at", 10, 4, usize::MAX, 2);
    assert!(is_overflow(&r, "write_at"), "{r:?}");
}

/// A stride (or start) past 32 bits was truncated into the device's team
/// layout: stride `1 << 32` of a one-member team became stride 0.
#[test]
fn team_split_strided_never_truncates() {
    // One member: the stride is unused, and 1.
    assert_eq!(args::team_split_strided(0, 1 << 32, 1, Some(4)).unwrap(), (0, 1, 1));
    assert_eq!(args::team_split_strided(3, usize::MAX, 1, Some(4)).unwrap(), (3, 1, 1));
    // Outside the parent (no range known): a value past 32 bits is an error.
    let r = args::team_split_strided(1 << 32, 1, 2, None);
    assert!(is_overflow(&r, "team_split_strided"), "{r:?}");
    let r = args::team_split_strided(0, (1 << 32) + 1, 2, None);
    assert!(is_overflow(&r, "team_split_strided"), "{r:?}");
}

/// `xrange = 1 << 32` was truncated to a row length of 0, and the split then
/// divided by it.
#[test]
fn team_split_2d_xrange_past_32_bits_is_clamped_not_zero() {
    assert_eq!(args::team_split_2d(1 << 32, 4).unwrap(), 4);
    assert_eq!(args::team_split_2d(usize::MAX, 3).unwrap(), 3);
    assert!(matches!(args::team_split_2d(0, 4), Err(Error::Config { .. })));
}

/// `block_dim.0 × .1 × .2` in `u32` (and the grid's product in `u64`) wrapped
/// in the co-residency check of `launch_collective`.
#[test]
fn launch_shape_overflow_is_an_error() {
    let r = args::launch_shape("k", (1, 1, 1), (65536, 65536, 1));
    assert!(is_overflow(&r, "launch_collective"), "{r:?}");
    let r = args::launch_shape("k", (u32::MAX, u32::MAX, u32::MAX), (1, 1, 1));
    assert!(is_overflow(&r, "launch_collective"), "{r:?}");
    assert_eq!(args::launch_shape("k", (132, 2, 1), (32, 16, 1)).unwrap(), (512, 264));
}

/// More PEs than a team's sync slot has flags for: the device barrier would
/// write past the slot.
#[test]
fn job_larger_than_max_pes_is_an_error() {
    let max = gpushmem::abi::MAX_PES as usize;
    assert!(args::job_size("Threads::new", max).is_ok());
    for n in [0, max + 1, usize::MAX] {
        assert!(matches!(args::job_size("Threads::new", n), Err(Error::Config { .. })), "{n}");
        let r = Threads::new(n).run(|_| Ok(()));
        assert!(matches!(&r, Err(Error::Config { name, .. }) if name == "Threads::new"), "{n}: {r:?}");
    }
}

/// `Threads::contexts`: an empty list, or one given with `devices`, is refused
/// before the driver is asked anything (no GPU needed).
#[test]
fn threads_context_list_empty_or_with_devices_is_an_error() {
    let r = Threads::new(2).contexts(vec![]).run(|_| Ok(()));
    assert!(
        matches!(&r, Err(Error::Config { name, why, .. }) if name == "Threads::contexts" && why.contains("empty")),
        "{r:?}"
    );
}

/// `Threads::new(n).devices(vec![])` took a remainder by zero; an ordinal
/// past the GPUs was only caught inside each PE's init.
#[test]
fn threads_device_list_empty_or_out_of_range_is_an_error() {
    let r = args::pe_devices(2, Some(&[]), 1);
    assert!(matches!(&r, Err(Error::Config { name, .. }) if name == "Threads::devices"), "{r:?}");
    // Through the public call, before the driver is asked anything (no GPU here).
    let r = Threads::new(2).devices(vec![]).run(|_| Ok(()));
    assert!(matches!(&r, Err(Error::Config { name, .. }) if name == "Threads::devices"), "{r:?}");
    let r = args::pe_devices(2, Some(&[0, 7]), 2);
    assert!(
        matches!(&r, Err(Error::Config { name, why, .. }) if name == "Threads::devices" && why.contains("GPU 7")),
        "{r:?}"
    );
    let r = args::pe_devices(2, None, 0);
    assert!(r.is_err(), "{r:?}");
    assert_eq!(args::pe_devices(5, Some(&[1, 0]), 2).unwrap(), [1, 0, 1, 0, 1]);
    assert_eq!(args::pe_devices(3, None, 2).unwrap(), [0, 1, 0]);
}

#[test]
fn alloc_size_overflow_is_an_error() {
    let r = args::alloc_bytes("malloc", usize::MAX, 2);
    assert!(is_overflow(&r, "malloc"), "{r:?}");
    assert_eq!(args::alloc_bytes("calloc", usize::MAX, 1).unwrap(), usize::MAX as u64);
    assert_eq!(args::alloc_bytes("align", 0, 8).unwrap(), 0);
}

// ---- properties ----

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    /// Every collective's counts: `Ok` only with the exact values, else an overflow error naming the call.
    #[test]
    fn collective_sizes_are_exact_or_an_error(k in 0..5usize, elem in elem_size(), nelems in count(), n_pes in count()) {
        let which = KINDS[k];
        let got = which.sizes(elem, nelems, n_pes);
        match sizes_exact(which, elem, nelems, n_pes) {
            Some((dest, src, kernel, grid)) => {
                let s = got.unwrap();
                prop_assert_eq!((s.dest_elems, s.src_elems, s.kernel_size, s.grid_bytes), (dest, src, kernel, grid));
            }
            None => prop_assert!(is_overflow(&got, which.call()), "{:?}", got),
        }
    }

    /// The buffer check: never a panic; `Ok` only when both buffers hold what
    /// the call uses and the used ranges, in exact arithmetic, do not overlap.
    #[test]
    fn collective_buffers_ok_only_when_they_fit_apart(
        k in 0..5usize, elem in elem_size(), nelems in count(), n_pes in count(),
        d in any::<u64>(), s in any::<u64>(), dest_len in count(), src_len in count(),
    ) {
        let which = KINDS[k];
        if let Ok(sizes) = which.sizes(elem, nelems, n_pes) {
            let r = which.check_buffers(elem, &sizes, (d, dest_len), (s, src_len));
            if r.is_ok() {
                prop_assert!(dest_len >= sizes.dest_elems && src_len >= sizes.src_elems);
                let (d, s, e) = (d as u128, s as u128, elem as u128);
                let (dn, sn) = (sizes.dest_elems as u128 * e, sizes.src_elems as u128 * e);
                prop_assert!(d + dn <= s || s + sn <= d || dn == 0 || sn == 0, "overlap passed: {:?}", (d, dn, s, sn));
            }
        }
    }

    /// `write_at`/`read_at`: the byte offset, exact, or an error.
    #[test]
    fn element_range_is_exact_or_an_error(len in count(), elem in elem_size(), start in count(), n in count()) {
        let r = args::element_range("read_at", len, elem, start, n);
        let end = start as u128 + n as u128;
        if end > usize::MAX as u128 {
            prop_assert!(is_overflow(&r, "read_at"), "{:?}", r);
        } else if end > len as u128 {
            prop_assert!(matches!(r, Err(Error::Config { .. })), "{:?}", r);
        } else if start as u128 * elem as u128 > u64::MAX as u128 {
            prop_assert!(is_overflow(&r, "read_at"), "{:?}", r);
        } else {
            prop_assert_eq!(r.unwrap() as u128, start as u128 * elem as u128);
        }
    }

    /// `malloc`'s byte count, exact or an error.
    #[test]
    fn alloc_bytes_is_exact_or_an_error(len in count(), elem in elem_size()) {
        let r = args::alloc_bytes("malloc", len, elem);
        match u64::try_from(len as u128 * elem as u128) {
            Ok(b) => prop_assert_eq!(r.unwrap(), b),
            Err(_) => prop_assert!(is_overflow(&r, "malloc"), "{:?}", r),
        }
    }

    /// A strided team: `Ok` only with the arguments themselves (the stride 1
    /// for one member), every member inside the parent when its size is known.
    #[test]
    fn team_split_strided_is_exact_or_an_error(
        start in count(), stride in count(), size in count(),
        parent in prop::option::of(prop_oneof![Just(1u32), 1..5000u32, Just(u32::MAX)]),
    ) {
        match args::team_split_strided(start, stride, size, parent) {
            Ok((a, b, c)) => {
                prop_assert!(size >= 1 && stride >= 1);
                prop_assert_eq!((a as usize, c as usize), (start, size));
                prop_assert_eq!(b as usize, if size == 1 { 1 } else { stride });
                let last = start as u128 + (size as u128 - 1) * stride as u128;
                if let Some(n) = parent {
                    prop_assert!(last < n as u128);
                }
                prop_assert!(last <= u32::MAX as u128);
            }
            Err(Error::Config { .. } | Error::ArgumentOverflow { .. }) => {}
            Err(e) => prop_assert!(false, "unexpected error {e}"),
        }
    }

    /// A 2-D split's row length is never 0, nor more than the parent or `xrange`.
    #[test]
    fn team_split_2d_row_is_within_bounds(xrange in count(), parent in prop_oneof![Just(0u32), 1..5000u32, any::<u32>()]) {
        match args::team_split_2d(xrange, parent) {
            Ok(x) => {
                prop_assert!(x >= 1);
                prop_assert_eq!(x as u128, (xrange as u128).min(parent as u128));
            }
            Err(e) => prop_assert!(xrange == 0 || parent == 0, "{}", e),
        }
    }

    /// The launch shape's products, exact or an error.
    #[test]
    fn launch_shape_is_exact_or_an_error(g in any::<(u32, u32, u32)>(), b in prop_oneof![any::<(u32, u32, u32)>(), (0..2048u32, 0..2048u32, 0..64u32)]) {
        let r = args::launch_shape("k", g, b);
        let block = b.0 as u128 * b.1 as u128 * b.2 as u128;
        let blocks = g.0 as u128 * g.1 as u128 * g.2 as u128;
        if block > u32::MAX as u128 || blocks > u64::MAX as u128 {
            prop_assert!(is_overflow(&r, "launch_collective"), "{:?}", r);
        } else {
            prop_assert_eq!(r.unwrap(), (block as u32, blocks as u64));
        }
    }

    /// PEs as threads: every PE on an existing GPU of the list (or round robin), or an error.
    #[test]
    fn pe_devices_are_existing_gpus_or_an_error(
        n in count(),
        list in prop::option::of(prop::collection::vec(prop_oneof![0..8usize, Just(usize::MAX)], 0..6)),
        n_dev in prop_oneof![Just(0usize), 1..9usize, Just(usize::MAX)],
    ) {
        match args::pe_devices(n, list.as_deref(), n_dev) {
            Ok(d) => {
                prop_assert!(n >= 1 && n <= gpushmem::abi::MAX_PES as usize);
                prop_assert_eq!(d.len(), n);
                for (pe, &g) in d.iter().enumerate() {
                    prop_assert!(g < n_dev);
                    prop_assert_eq!(g, list.as_ref().map_or(pe % n_dev, |l| l[pe % l.len()]));
                }
            }
            Err(Error::Config { .. }) => {}
            Err(Error::NoGpu(_)) => prop_assert_eq!(n_dev, 0),
            Err(e) => prop_assert!(false, "unexpected error {e}"),
        }
    }
}

//! The NVSHMEM engine's team barriers and device collectives: NVSHMEM's
//! function of the same meaning and group, on the team's NVSHMEM handle
//! (slot `t`'s `nvshmem_team_t`, which the host made with
//! `nvshmem_team_split_*` and wrote into the team table; see
//! [`crate::abi::ENGINE_TEAMS_OFFSET`]).
//!
//! Every function declared here is defined in NVSHMEM 3.4.5's bitcode with
//! the signature `i32 (i32 team, ptr dest, ptr source, i64 n[, i32 root])`
//! or `i32 (i32 team)` (checked with `llvm-dis`); the result (always 0 on
//! the device) is ignored. The reductions are named
//! `nvshmem[x]_<type>_<op>_reduce[scatter][_warp|_block]`, with NVSHMEM's
//! type names `uint8` … `int64`, `float`, `double`, `half`, `bfloat16`.
//!
//! The arguments were checked by [`crate::collective`] / [`crate::sync`]
//! (membership always, the rest with debug checks on).

use crate::abi::TeamDesc;
use crate::group::{Group, Kind};
use crate::reduce::{ElemKind, ReduceOp, Reducible};
use crate::team::{engine_handle, member_desc, Team};
use core::ffi::{c_int, c_void, CStr};

// include/device/nvshmem_coll_defines.cuh, nvshmemx_coll_defines.cuh
extern "C" {
    fn nvshmem_barrier(team: c_int) -> c_int;
    fn nvshmemx_barrier_warp(team: c_int) -> c_int;
    fn nvshmemx_barrier_block(team: c_int) -> c_int;
    fn nvshmem_team_sync(team: c_int) -> c_int;
    fn nvshmemx_team_sync_warp(team: c_int) -> c_int;
    fn nvshmemx_team_sync_block(team: c_int) -> c_int;

    fn nvshmem_broadcastmem(team: c_int, dest: *mut c_void, src: *const c_void, bytes: usize, root: c_int) -> c_int;
    fn nvshmemx_broadcastmem_warp(
        team: c_int,
        dest: *mut c_void,
        src: *const c_void,
        bytes: usize,
        root: c_int,
    ) -> c_int;
    fn nvshmemx_broadcastmem_block(
        team: c_int,
        dest: *mut c_void,
        src: *const c_void,
        bytes: usize,
        root: c_int,
    ) -> c_int;
    fn nvshmem_fcollectmem(team: c_int, dest: *mut c_void, src: *const c_void, bytes: usize) -> c_int;
    fn nvshmemx_fcollectmem_warp(team: c_int, dest: *mut c_void, src: *const c_void, bytes: usize) -> c_int;
    fn nvshmemx_fcollectmem_block(team: c_int, dest: *mut c_void, src: *const c_void, bytes: usize) -> c_int;
    fn nvshmem_alltoallmem(team: c_int, dest: *mut c_void, src: *const c_void, bytes: usize) -> c_int;
    fn nvshmemx_alltoallmem_warp(team: c_int, dest: *mut c_void, src: *const c_void, bytes: usize) -> c_int;
    fn nvshmemx_alltoallmem_block(team: c_int, dest: *mut c_void, src: *const c_void, bytes: usize) -> c_int;
}

/// Calls the thread, warp or block function of a family by the group's kind.
macro_rules! by_group {
    ($g:expr, [$th:ident, $wa:ident, $bl:ident] $args:tt) => {
        match $g {
            Kind::Thread => $th $args,
            Kind::Warp => $wa $args,
            Kind::Block => $bl $args,
        }
    };
}

/// `nvshmem[x]_barrier[_warp|_block]` when `complete`, else
/// `nvshmem[x]_team_sync[_warp|_block]`, on `team`.
#[inline(always)]
pub(crate) fn team_sync_group(team: Team, g: Group, complete: bool, call: &CStr) {
    // The collectives check membership before they call in; the barriers come straight here.
    member_desc(team, call);
    let h = engine_handle(team, call);
    // SAFETY: collective over the team's members, called by the group
    // (documented on the public functions); `h` is the team's NVSHMEM handle.
    unsafe {
        if complete {
            by_group!(g.kind, [nvshmem_barrier, nvshmemx_barrier_warp, nvshmemx_barrier_block](h));
        } else {
            by_group!(g.kind, [nvshmem_team_sync, nvshmemx_team_sync_warp, nvshmemx_team_sync_block](h));
        }
    }
}

/// `nvshmem[x]_broadcastmem[_warp|_block]`.
///
/// # Safety
/// As the [`crate::collective`] call it serves: `dest` and `src` are symmetric ranges of `bytes` bytes
/// that do not overlap; `root` is a member number; every member calls with the same
/// arguments and every thread of `g` calls.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn broadcast(
    team: Team,
    _d: &TeamDesc,
    dest: *mut u8,
    src: *const u8,
    bytes: usize,
    root: u32,
    g: Group,
    call: &CStr,
) {
    let h = engine_handle(team, call);
    // SAFETY: this fn's contract is the NVSHMEM function's (symmetric, disjoint ranges of
    // `bytes`, called alike by every member and thread of the group); `h` is the team's handle.
    unsafe {
        by_group!(
            g.kind,
            [nvshmem_broadcastmem, nvshmemx_broadcastmem_warp, nvshmemx_broadcastmem_block](
                h,
                dest.cast(),
                src.cast(),
                bytes,
                root as c_int
            )
        )
    };
}

/// `nvshmem[x]_fcollectmem[_warp|_block]`.
///
/// # Safety
/// As the [`crate::collective`] call it serves: `dest` is a symmetric range of `team size * bytes` bytes,
/// `src` one of `bytes`, not overlapping; every member calls with the same
/// arguments and every thread of `g` calls.
#[inline(always)]
pub(crate) unsafe fn fcollect(
    team: Team,
    _d: &TeamDesc,
    dest: *mut u8,
    src: *const u8,
    bytes: usize,
    g: Group,
    call: &CStr,
) {
    let h = engine_handle(team, call);
    // SAFETY: this fn's contract is the NVSHMEM function's; `h` is the team's handle.
    unsafe {
        by_group!(
            g.kind,
            [nvshmem_fcollectmem, nvshmemx_fcollectmem_warp, nvshmemx_fcollectmem_block](
                h,
                dest.cast(),
                src.cast(),
                bytes
            )
        )
    };
}

/// `nvshmem[x]_alltoallmem[_warp|_block]`.
///
/// # Safety
/// As the [`crate::collective`] call it serves: `dest` and `src` are symmetric ranges of
/// `team size * bytes` bytes that do not overlap; every member calls with the same
/// arguments and every thread of `g` calls.
#[inline(always)]
pub(crate) unsafe fn alltoall(
    team: Team,
    _d: &TeamDesc,
    dest: *mut u8,
    src: *const u8,
    bytes: usize,
    g: Group,
    call: &CStr,
) {
    let h = engine_handle(team, call);
    // SAFETY: this fn's contract is the NVSHMEM function's; `h` is the team's handle.
    unsafe {
        by_group!(
            g.kind,
            [nvshmem_alltoallmem, nvshmemx_alltoallmem_warp, nvshmemx_alltoallmem_block](
                h,
                dest.cast(),
                src.cast(),
                bytes
            )
        )
    };
}

/// One NVSHMEM element type's reductions: a module per operator with the
/// six functions (reduce / reducescatter × thread / warp / block), and
/// `call`, which picks one by operator, kind and group.
macro_rules! reductions {
    ($m:ident, $tn:literal, $($variant:ident => $op:ident),*) => {
        mod $m {
            use crate::group::Kind;
            use crate::reduce::ReduceOp;
            use core::ffi::{c_int, c_void};

            $(
                mod $op {
                    use crate::group::Kind;
                    use core::ffi::{c_int, c_void};

                    extern "C" {
                        #[link_name = concat!("nvshmem_", $tn, "_", stringify!($op), "_reduce")]
                        fn reduce(team: c_int, dest: *mut c_void, src: *const c_void, n: usize) -> c_int;
                        #[link_name = concat!("nvshmemx_", $tn, "_", stringify!($op), "_reduce_warp")]
                        fn reduce_warp(team: c_int, dest: *mut c_void, src: *const c_void, n: usize) -> c_int;
                        #[link_name = concat!("nvshmemx_", $tn, "_", stringify!($op), "_reduce_block")]
                        fn reduce_block(team: c_int, dest: *mut c_void, src: *const c_void, n: usize) -> c_int;
                        #[link_name = concat!("nvshmem_", $tn, "_", stringify!($op), "_reducescatter")]
                        fn scatter(team: c_int, dest: *mut c_void, src: *const c_void, n: usize) -> c_int;
                        #[link_name = concat!("nvshmemx_", $tn, "_", stringify!($op), "_reducescatter_warp")]
                        fn scatter_warp(team: c_int, dest: *mut c_void, src: *const c_void, n: usize) -> c_int;
                        #[link_name = concat!("nvshmemx_", $tn, "_", stringify!($op), "_reducescatter_block")]
                        fn scatter_block(team: c_int, dest: *mut c_void, src: *const c_void, n: usize) -> c_int;
                    }

                    /// # Safety
                    /// As the public reduce / reducescatter forms.
                    #[inline(always)]
                    pub(super) unsafe fn go(scatter_: bool, g: Kind, team: c_int, d: *mut c_void, s: *const c_void, n: usize) {
                        // SAFETY: the caller's guarantees are the NVSHMEM function's.
                        unsafe {
                            if scatter_ {
                                by_group!(g, [scatter, scatter_warp, scatter_block](team, d, s, n));
                            } else {
                                by_group!(g, [reduce, reduce_warp, reduce_block](team, d, s, n));
                            }
                        }
                    }
                }
            )*

            /// # Safety
            /// As the public reduce / reducescatter forms; `op` is one of this type's operators.
            #[inline(always)]
            pub(super) unsafe fn call(
                op: ReduceOp,
                scatter: bool,
                g: Kind,
                team: c_int,
                d: *mut c_void,
                s: *const c_void,
                n: usize,
            ) {
                match op {
                    // SAFETY: the caller upholds this function's contract, which is `go`'s.
                    $(ReduceOp::$variant => unsafe { $op::go(scatter, g, team, d, s, n) },)*
                    #[allow(unreachable_patterns)]
                    _ => crate::ptx::trap(), // (a bitwise operator on a float type: `check_op` trapped already)
                }
            }
        }
    };
}

macro_rules! int_reductions {
    ($($m:ident => $tn:literal),*) => {$(
        reductions!($m, $tn, Sum => sum, Prod => prod, Min => min, Max => max, And => and, Or => or, Xor => xor);
    )*};
}
macro_rules! float_reductions {
    ($($m:ident => $tn:literal),*) => {$(
        reductions!($m, $tn, Sum => sum, Prod => prod, Min => min, Max => max);
    )*};
}
int_reductions!(u8_ => "uint8", i8_ => "int8", u16_ => "uint16", i16_ => "int16", u32_ => "uint32", i32_ => "int32",
    u64_ => "uint64", i64_ => "int64");
float_reductions!(f32_ => "float", f64_ => "double", f16_ => "half", bf16_ => "bfloat16");

/// The reduction of `T` by `op` over the group (`scatter`: reducescatter).
///
/// # Safety
/// As the public reduce / reducescatter forms: `d` and `s` are symmetric ranges of `n` `T`s
/// (`s` of `n * team size` for `scatter`) that do not overlap; `h` is the team's handle;
/// every member calls with the same arguments and every thread of the group calls.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn by_type<T: Reducible>(op: ReduceOp, scatter: bool, g: Kind, h: c_int, d: *mut T, s: *const T, n: usize) {
    let (d, s) = (d.cast::<c_void>(), s.cast::<c_void>());
    // SAFETY: the caller upholds this function's contract, which is each `call`'s;
    // `T::KIND` names `T`, so the function's element type is `T`'s.
    unsafe {
        match T::KIND {
            ElemKind::U8 => u8_::call(op, scatter, g, h, d, s, n),
            ElemKind::I8 => i8_::call(op, scatter, g, h, d, s, n),
            ElemKind::U16 => u16_::call(op, scatter, g, h, d, s, n),
            ElemKind::I16 => i16_::call(op, scatter, g, h, d, s, n),
            ElemKind::U32 => u32_::call(op, scatter, g, h, d, s, n),
            ElemKind::I32 => i32_::call(op, scatter, g, h, d, s, n),
            ElemKind::U64 => u64_::call(op, scatter, g, h, d, s, n),
            ElemKind::I64 => i64_::call(op, scatter, g, h, d, s, n),
            ElemKind::F32 => f32_::call(op, scatter, g, h, d, s, n),
            ElemKind::F64 => f64_::call(op, scatter, g, h, d, s, n),
            ElemKind::F16 => f16_::call(op, scatter, g, h, d, s, n),
            ElemKind::Bf16 => bf16_::call(op, scatter, g, h, d, s, n),
        }
    }
}

/// `nvshmem[x]_<type>_<op>_reduce[_warp|_block]`.
///
/// # Safety
/// As the [`crate::collective`] call it serves: `dest` and `src` are symmetric ranges of `n` `T`s that
/// do not overlap; every member calls with the same
/// arguments and every thread of `g` calls.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn reduce<T: Reducible>(
    team: Team,
    _d: &TeamDesc,
    dest: *mut T,
    src: *const T,
    n: usize,
    op: ReduceOp,
    g: Group,
    call: &CStr,
) {
    // SAFETY: the caller upholds this function's contract, which is `by_type`'s (not
    // scattering); `engine_handle` gives the team's handle (or traps).
    unsafe { by_type(op, false, g.kind, engine_handle(team, call), dest, src, n) }
}

/// `nvshmem[x]_<type>_<op>_reducescatter[_warp|_block]`.
///
/// # Safety
/// As the [`crate::collective`] call it serves: `dest` is a symmetric range of `n` `T`s, `src` one of
/// `team size * n`, not overlapping; every member calls with the same
/// arguments and every thread of `g` calls.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn reducescatter<T: Reducible>(
    team: Team,
    _d: &TeamDesc,
    dest: *mut T,
    src: *const T,
    n: usize,
    op: ReduceOp,
    g: Group,
    call: &CStr,
) {
    // SAFETY: the caller upholds this function's contract, which is `by_type`'s (scattering);
    // `engine_handle` gives the team's handle (or traps).
    unsafe { by_type(op, true, g.kind, engine_handle(team, call), dest, src, n) }
}

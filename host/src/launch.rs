//! Kernel launch: plain, and collective (checked to be co-resident).

use crate::module::{check_owner, Kernel, Owner};
use crate::SymSlice;
use crate::{Error, Result};
use cudarc::driver::{sys, CudaContext, LaunchConfig};
use gpushmem_kernels::Sym;
use std::ffi::c_void;

/// One kernel argument: the value the kernel's parameter receives.
///
/// Implemented for the plain numbers a kernel takes (`u8`…`u64`, `i8`…`i64`,
/// `usize`, `isize`, `f32`, `f64`, `bool`, `F16`, `Bf16`), for the operator
/// types (`ReduceOp`, `Cmp`, `SignalOp`: the kernel's parameter has the same
/// type), for symmetric memory —
/// `&SymSlice<T>` becomes the kernel's [`Sym<T>`] handle (offset and length,
/// `#[repr(C)]`), and a [`Sym<T>`] made on the host passes as itself — and
/// for `u64` addresses from [`SymSlice::as_kernel_ptr`] for kernels that take
/// raw pointers. A type of your own implements it by naming the
/// `#[repr(C)]` value the kernel's parameter has.
pub trait KernelArg {
    /// What the kernel's parameter holds (its bytes are copied at launch).
    type Param: Copy;
    /// The parameter's value.
    fn param(&self) -> Self::Param;
}

macro_rules! plain_args {
    ($($t:ty),*) => {$(
        impl KernelArg for $t {
            type Param = $t;
            fn param(&self) -> $t {
                *self
            }
        }
    )*};
}
plain_args!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize, f32, f64, bool, crate::F16, crate::Bf16);
// The operator types travel as themselves (`#[repr(u32)]` on both sides), so a
// kernel takes `op: ReduceOp`, not a code it must decode.
plain_args!(crate::ReduceOp, crate::Cmp, crate::SignalOp);

impl<T> KernelArg for &SymSlice<T> {
    type Param = Sym<T>;
    fn param(&self) -> Sym<T> {
        self.sym()
    }
}

impl<T> KernelArg for Sym<T> {
    type Param = Sym<T>;
    fn param(&self) -> Sym<T> {
        *self
    }
}

/// A kernel's arguments: a tuple of [`KernelArg`]s, in the kernel's parameter order.
pub trait KernelArgs {
    /// Calls `f` with the `void*` array `cuLaunchKernel` takes.
    fn with_params<R>(&self, f: impl FnOnce(&mut [*mut c_void]) -> R) -> R;
}

macro_rules! tuple_args {
    ($($t:ident),*) => {
        impl<$($t: KernelArg),*> KernelArgs for ($($t,)*) {
            #[allow(non_snake_case)]
            fn with_params<R>(&self, f: impl FnOnce(&mut [*mut c_void]) -> R) -> R {
                let ($($t,)*) = self;
                // The parameters' values live here until the launch has copied them.
                $(let $t = $t.param();)*
                let mut params = [$(&$t as *const _ as *mut c_void),*];
                f(&mut params)
            }
        }
    };
}

impl KernelArgs for () {
    fn with_params<R>(&self, f: impl FnOnce(&mut [*mut c_void]) -> R) -> R {
        f(&mut [])
    }
}
tuple_args!(A);
tuple_args!(A, B);
tuple_args!(A, B, C);
tuple_args!(A, B, C, D);
tuple_args!(A, B, C, D, E);
tuple_args!(A, B, C, D, E, F);
tuple_args!(A, B, C, D, E, F, G);
tuple_args!(A, B, C, D, E, F, G, H);
tuple_args!(A, B, C, D, E, F, G, H, I);
tuple_args!(A, B, C, D, E, F, G, H, I, J);

/// `cuLaunchKernel` on `stream`, for the `Shmem` `launcher`: fails with
/// [`Error::Launch`] when another `Shmem` loaded `k` (see [`check_owner`]).
///
/// # Safety
/// `args` match the kernel's parameters in number and type.
pub(crate) unsafe fn launch_on(
    launcher: Owner,
    stream: sys::CUstream,
    k: &Kernel,
    cfg: LaunchConfig,
    args: &impl KernelArgs,
) -> Result<()> {
    check_owner(&k.name, k.owner, launcher)?;
    args.with_params(|p| {
        // SAFETY: `k` is a loaded function of `launcher`'s module (checked
        // above), and the caller guarantees that `p` (pointers to `args`,
        // alive for this call) matches its parameters.
        unsafe {
            cudarc::driver::result::launch_kernel(
                k.func.cu_function(),
                cfg.grid_dim,
                cfg.block_dim,
                cfg.shared_mem_bytes,
                stream,
                p,
            )
        }
    })
    .map_err(|e| Error::Launch {
        kernel: k.name.clone(),
        why: format!(
            "cuLaunchKernel with grid {:?}, block {:?}, {} bytes shared memory: {e}",
            cfg.grid_dim, cfg.block_dim, cfg.shared_mem_bytes
        ),
    })
}

/// How many blocks of `block` threads with `shared_mem_bytes` of dynamic
/// shared memory each of the `sharing` PEs on this device may launch so that
/// every PE's whole grid is resident at once: `(blocks per SM × SMs) /
/// sharing`, and, for messages, the blocks per SM and the SM count. Fails
/// when one block does not fit on an SM at all.
pub(crate) fn co_resident_blocks(
    ctx: &CudaContext,
    k: &Kernel,
    block: u32,
    shared_mem_bytes: u32,
    sharing: usize,
) -> Result<(u64, u32, u64)> {
    let err = |why: String| Error::Launch { kernel: k.name.clone(), why };
    let per_sm = k
        .func
        .occupancy_max_active_blocks_per_multiprocessor(block, shared_mem_bytes as usize, None)
        .map_err(|e| err(format!("occupancy query failed: {e}")))?;
    let sms = ctx
        .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .map_err(|e| err(format!("SM count query failed: {e}")))? as u64;
    if per_sm == 0 {
        let regs = k.func.num_regs().unwrap_or(-1);
        let max = k.func.max_threads_per_block().unwrap_or(-1);
        return Err(err(format!(
            "a block of {block} threads does not fit on an SM: the kernel uses {regs} registers per thread, \
             so at most {max} threads per block (and less with {shared_mem_bytes} bytes of dynamic shared memory)"
        )));
    }
    Ok((per_sm as u64 * sms / sharing.max(1) as u64, per_sm, sms))
}

/// Fails unless the whole grid can be resident on the device at once, given
/// that `sharing` PEs split the device (a kernel whose blocks wait for other
/// blocks or PEs would otherwise hang).
pub(crate) fn check_co_resident(ctx: &CudaContext, k: &Kernel, cfg: &LaunchConfig, sharing: usize) -> Result<()> {
    let (block, blocks) = crate::args::launch_shape(&k.name, cfg.grid_dim, cfg.block_dim)?;
    let err = |why: String| Error::Launch { kernel: k.name.clone(), why };
    let (fits, per_sm, sms) = co_resident_blocks(ctx, k, block, cfg.shared_mem_bytes, sharing)?;
    if blocks > fits {
        return Err(err(format!(
            "collective launch of {blocks} blocks × {block} threads cannot be co-resident: the device holds {} such blocks \
             ({per_sm} per SM × {sms} SMs), shared by {sharing} PE(s) on this GPU, so at most {fits} per PE; \
             use fewer blocks or threads, or less shared memory",
            per_sm as u64 * sms
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes each parameter pointer of `args` points at, `sizes[i]` of them.
    fn param_bytes(args: impl KernelArgs, sizes: &[usize]) -> Vec<Vec<u8>> {
        args.with_params(|p| {
            assert_eq!(p.len(), sizes.len());
            p.iter()
                .zip(sizes)
                // SAFETY: each pointer points at a live parameter of that many bytes (the caller's sizes).
                .map(|(&q, &n)| unsafe { std::slice::from_raw_parts(q as *const u8, n) }.to_vec())
                .collect()
        })
    }

    #[test]
    fn a_sym_handle_arrives_as_offset_and_length() {
        // `&SymSlice` passes `slice.sym()` (a SymSlice needs a GPU stream to exist;
        // the GPU suite passes them).
        // SAFETY: only its bytes are looked at; no kernel dereferences it.
        let s = unsafe { Sym::<u32>::from_raw_parts(4096, 10) };
        let b = param_bytes((s, 7u32, s.slice(2, 5)), &[16, 4, 16]);
        let words =
            |v: &[u8]| (u64::from_le_bytes(v[..8].try_into().unwrap()), u64::from_le_bytes(v[8..].try_into().unwrap()));
        assert_eq!(words(&b[0]), (4096, 10), "offset and length, not the address");
        assert_eq!(b[1], 7u32.to_le_bytes());
        assert_eq!(words(&b[2]), (4096 + 8, 3));
    }

    #[test]
    fn operator_types_arrive_as_their_codes() {
        let b = param_bytes((crate::ReduceOp::Max, crate::Cmp::Ge, crate::SignalOp::Add), &[4, 4, 4]);
        assert_eq!(b[0], (crate::ReduceOp::Max as u32).to_le_bytes());
        assert_eq!(b[1], (crate::Cmp::Ge as u32).to_le_bytes());
        assert_eq!(b[2], (crate::SignalOp::Add as u32).to_le_bytes());
    }
}

//! cudarc interop (issue 39). A kernel gpushmem did not build (cudarc's nvrtc
//! where its library is found, else PTX written by hand) writes into a
//! `SymSlice` through cudarc's launch builder; a gpushmem kernel on the
//! previous PE reads it remotely; cudarc copies check it, with the `SymSlice`
//! as cudarc's `DevicePtr`/`DevicePtrMut` on the PE's stream and on another
//! stream, and parts of it through `SymView`/`SymViewMut`. `init_on_2pe` runs
//! the same on a context and stream the program made itself
//! (`Shmem::init_on`), one process per PE, and checks that a legacy default
//! stream is refused on every PE.

use crate::common::*;
use gpushmem::cudarc::driver::{CudaContext, LaunchConfig, PushKernelArg};
use gpushmem::cudarc::nvrtc::Ptx;
use gpushmem::Shmem;
use std::time::Duration;

const LEN: usize = 1 << 16;

const FILL_CU: &str = r#"extern "C" __global__ void fill_u32(unsigned int *p, unsigned int base, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = base + i;
}"#;

/// FILL_CU by hand, for machines without libnvrtc.
const FILL_PTX: &str = "
.version 7.8
.target sm_80
.address_size 64
.visible .entry fill_u32(.param .u64 p, .param .u32 base, .param .u32 n)
{
    .reg .pred %q;
    .reg .b32 %r<7>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [p];
    ld.param.u32 %r1, [base];
    ld.param.u32 %r2, [n];
    mov.u32 %r3, %tid.x;
    mov.u32 %r4, %ctaid.x;
    mov.u32 %r5, %ntid.x;
    mad.lo.u32 %r3, %r4, %r5, %r3;
    setp.ge.u32 %q, %r3, %r2;
    @%q bra DONE;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r3, 4;
    add.u64 %rd2, %rd2, %rd3;
    add.u32 %r6, %r1, %r3;
    st.global.u32 [%rd2], %r6;
DONE:
    ret;
}
";

/// The foreign kernel's PTX and how it was made.
pub fn foreign_kernel() -> (&'static str, Ptx) {
    // SAFETY: only asks whether cudarc can load libnvrtc (no nvrtc call otherwise).
    if unsafe { gpushmem::cudarc::nvrtc::sys::is_culib_present() } {
        match gpushmem::cudarc::nvrtc::compile_ptx(FILL_CU) {
            Ok(ptx) => return ("cudarc's nvrtc", ptx),
            Err(e) => println!("  nvrtc failed ({e:?}); using the hand-written PTX"),
        }
    }
    ("hand-written PTX (no libnvrtc found)", Ptx::from_src(FILL_PTX))
}

/// One PE's part; returns what it found wrong.
pub fn body(shmem: &Shmem, ptx: &Ptx) -> gpushmem::Result<Vec<String>> {
    let (me, n) = (shmem.my_pe(), shmem.n_pes());
    let next = (me + 1) % n;
    let (ctx, stream) = (shmem.context(), shmem.stream());
    let module = ctx.load_module(ptx.clone())?;
    let fill = module.load_function("fill_u32")?;
    let src = shmem.malloc::<u32>(LEN)?;
    let mut got = shmem.calloc::<u32>(LEN)?;
    let (p, base, len) = (src.as_kernel_ptr(), (me as u32) << 20, LEN as u32);
    // SAFETY: fill_u32(p, base, n) writes p[0..n): `src`, LEN u32s of this PE's heap.
    unsafe { stream.launch_builder(&fill).arg(&p).arg(&base).arg(&len).launch(LaunchConfig::for_num_elems(len)) }?;
    shmem.barrier_all()?;
    let m = kernels(shmem)?;
    let get = m.kernel("probe_get_warp")?;
    // SAFETY: reads LEN u32s of PE `next`'s `src` into this PE's `got` (both LEN u32s).
    unsafe {
        shmem.launch(&get, one_block(32), (got.as_kernel_ptr(), src.as_kernel_ptr(), (LEN * 4) as u64, next as u32))?
    };
    let mut failures = Vec::new();
    let mut check = |what: &str, v: &[u32], want: &dyn Fn(usize) -> u32| {
        if let Some(i) = (0..LEN).find(|&i| v.get(i) != Some(&want(i))) {
            failures.push(format!("PE {me}: {what}: element {i} is {:?}, not {}", v.get(i), want(i)));
        }
    };
    // Another stream: the copy must wait for the get queued on the PE's stream.
    let side = ctx.new_stream()?;
    let received = side.clone_dtoh(&got)?;
    check("read from PE next by a gpushmem get, copied by cudarc on another stream", &received, &|i| {
        ((next as u32) << 20) + i as u32
    });
    let own = stream.clone_dtoh(&src)?;
    check("written by the foreign kernel, copied by cudarc on the PE's stream", &own, &|i| {
        ((me as u32) << 20) + i as u32
    });
    // DevicePtrMut on another stream; gpushmem's own read (PE's stream) must see it.
    side.memcpy_htod(&vec![7u32; LEN], &mut got)?;
    check("written by cudarc on another stream, read by Shmem::read", &shmem.read(&got)?, &|_| 7);
    // Views: parts of a SymSlice as cudarc's DevicePtrMut (another stream) and DevicePtr.
    side.memcpy_htod(&[9u32; 16], &mut got.slice_mut(16..32))?;
    check("16..32 written through a SymViewMut, the rest untouched", &shmem.read(&got)?, &|i| {
        if (16..32).contains(&i) {
            9
        } else {
            7
        }
    });
    let part = stream.clone_dtoh(&src.slice(100..200))?;
    if part.len() != 100 || (0..100).any(|i| part[i] != ((me as u32) << 20) + 100 + i as u32) {
        failures.push(format!("PE {me}: a SymView (100..200) copied by cudarc did not hold elements 100..200"));
    }
    shmem.barrier_all()?;
    Ok(failures)
}

/// The body on `n` PEs (threads, or processes in the process-mode variant).
pub fn cudarc_ptr(n: usize) -> TestResult {
    let (how, ptx) = foreign_kernel();
    let results = threads(n, 16 << 20, |s| body(s, &ptx))?;
    fail_if_any(&results.concat())?;
    println!(
        "  {n} PEs: a {how} kernel filled SymSlices, gpushmem got them remotely, cudarc copies (2 streams) checked"
    );
    Ok(())
}

/// The body on `n` PEs as threads on a context the program made
/// (`Threads::contexts`): each PE's `Shmem::context` is that context.
pub fn threads_on_contexts(n: usize) -> TestResult {
    let (how, ptx) = foreign_kernel();
    let ctx = CudaContext::new(0)?;
    let results = gpushmem::Threads::new(n).contexts(vec![ctx.clone()]).run(|s| {
        let mut failures = body(s, &ptx)?;
        if !std::sync::Arc::ptr_eq(s.context(), &ctx) {
            failures.push(format!("PE {}: Shmem::context is not the one given to Threads::contexts", s.my_pe()));
        }
        Ok(failures)
    })?;
    fail_if_any(&results.concat())?;
    println!("  {n} PEs as threads on the program's context: the {how} kernel's data went through, checked");
    Ok(())
}

/// Child scenario `init_on` (one PE of a `gpushmem-run` job): the body on a
/// context and stream made here; `init_on_default_stream`: the default stream.
pub fn init_on_child(default_stream: bool) -> gpushmem::Result<Vec<String>> {
    let local: usize = std::env::var("GPUSHMEM_LOCAL_RANK").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    let ctx = CudaContext::new(local % gpushmem::gpu_available()?)?;
    let stream = if default_stream { ctx.default_stream() } else { ctx.new_stream()? };
    let shmem = Shmem::init_on(ctx.clone(), stream.clone())?;
    let mut failures = Vec::new();
    if shmem.stream().cu_stream() != stream.cu_stream() || !std::sync::Arc::ptr_eq(shmem.context(), &ctx) {
        failures.push(format!("PE {}: Shmem::stream/context are not the ones given to init_on", shmem.my_pe()));
    }
    let (how, ptx) = foreign_kernel();
    failures.extend(body(&shmem, &ptx)?);
    println!("PE {}: init_on: {how}: {} failure(s)", shmem.my_pe(), failures.len());
    shmem.finalize()?;
    Ok(failures)
}

/// `Shmem::init_on` as 2 processes; a legacy default stream refused on both PEs.
pub fn init_on_2pe() -> TestResult {
    let (ok, text, _) = crate::errors::launch_processes(2, "init_on", &[], Duration::from_secs(120))?;
    if !ok || text.matches("init_on:").count() != 2 || text.contains("FAILED") {
        return Err(format!("Shmem::init_on as 2 processes did not pass:\n{text}").into());
    }
    let (ok, text, _) = crate::errors::launch_processes_with(
        2,
        "init_on_default_stream",
        &[],
        &["--wait-others"],
        Duration::from_secs(120),
    )?;
    if ok || text.matches("the stream is the legacy default stream").count() != 2 {
        return Err(format!("expected both PEs to refuse the legacy default stream:\n{text}").into());
    }
    println!("  2 processes: Shmem::init_on ran on the program's context and stream; the default stream was refused on both PEs");
    Ok(())
}

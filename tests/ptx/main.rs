//! CPU tests of the PTX the workspace builds: it assembles with `ptxas`, and
//! each primitive emits the instruction it promises (golden checks on one
//! probe kernel per primitive, tests/kernels/src/probes.rs).
//!
//! `ptxas` comes from `GPUSHMEM_PTXAS` or `PATH` (`.ci/run` installs the
//! pinned wheel). Without it the assemble test is ignored, with the reason —
//! except under CI (`CI` set), where a missing ptxas fails.
//!
//! `nvshmem_engine_ring_kernels` builds examples/ring-kernels for the NVSHMEM
//! engine through gpushmem-build at run time (it needs the source tree, cargo
//! and NVSHMEM's device bitcode, which `scripts/setup.sh` installs); where one
//! of them is missing it is ignored with the reason, except under CI, where it fails.

use libtest_mimic::{Arguments, Failed, Trial};

const PTX_PATH: &str = env!("GPUSHMEM_PTX_GPUSHMEM_TEST_KERNELS");
const PTX: &str = include_str!(env!("GPUSHMEM_PTX_GPUSHMEM_TEST_KERNELS"));

/// The text of the function that starts with `head` (`.entry name(` or `.func … name(`), up to the next function.
fn function_text<'a>(ptx: &'a str, head: &str) -> Option<&'a str> {
    let start = ptx.find(head)?;
    let rest = &ptx[start..];
    let after = &rest[head.len()..];
    let end = ["\n.visible ", "\n.func ", "\n.entry ", "\n.weak "]
        .iter()
        .filter_map(|m| after.find(m))
        .min()
        .map_or(rest.len(), |e| e + head.len());
    Some(&rest[..end])
}

/// The body of `.entry name(...)` in `ptx`, followed by the bodies of every
/// `.func` it calls, transitively (the slow paths are kept out of line).
fn entry(ptx: &str, name: &str) -> Result<String, Failed> {
    let body =
        function_text(ptx, &format!(".entry {name}(")).ok_or_else(|| format!("no kernel {name} in {PTX_PATH}"))?;
    let mut text = body.to_string();
    let mut seen = std::collections::BTreeSet::new();
    let mut todo = vec![body.to_string()];
    while let Some(t) = todo.pop() {
        for line in t.lines().filter(|l| l.trim_start().starts_with("call")) {
            // `call.uni (retval0), NAME, (params);` or `call.uni NAME, (params);`
            let callee = line.split(',').find_map(|part| {
                let w = part.trim().trim_start_matches("call.uni").trim();
                (!w.is_empty() && !w.starts_with('(')).then(|| w.to_string())
            });
            if let Some(c) = callee {
                if seen.insert(c.clone()) {
                    let head = format!(" {c}(");
                    if let Some(f) = ptx.match_indices(".func ").find_map(|(i, _)| {
                        let line_end = ptx[i..].find('\n').map_or(ptx.len(), |e| i + e);
                        ptx[i..line_end].contains(&head).then(|| function_text(&ptx[i..], ".func ")).flatten()
                    }) {
                        text.push_str(f);
                        todo.push(f.to_string());
                    }
                }
            }
        }
    }
    Ok(text)
}

fn golden(name: &'static str, must: &'static [&'static str], must_not: &'static [&'static str]) -> Trial {
    Trial::test(format!("emits::{name}"), move || {
        let body = entry(PTX, name)?;
        let body = body.as_str();
        for m in must {
            if !body.contains(m) {
                return Err(format!("{name}: expected `{m}` in its PTX").into());
            }
        }
        for m in must_not {
            if body.contains(m) {
                return Err(format!("{name}: `{m}` must not appear in its PTX").into());
            }
        }
        Ok(())
    })
}

/// The examples/ring-kernels crate, built at run time for the NVSHMEM engine.
const RING_KERNELS_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/ring-kernels");

/// Golden: block barriers in the NVSHMEM-engine PTX of examples/ring-kernels
/// (NVSHMEM 3.4.5 from scripts/setup.sh, sm_90), as (`bar.sync`, `barrier.sync`):
/// the two `bar.sync` of NVSHMEM's `nvshmemx_putmem_nbi_block` (inlined into
/// ring_shift) and the two `barrier.sync` of gpushmem's `quiet_block`. More means a barrier was
/// copied onto divergent paths, which optimising the Rust side before linking
/// NVSHMEM's bitcode does to kernels with a block barrier after a branch
/// (FACTS.md: 45 `bar.sync` instead of 28); fewer, that a barrier went missing.
/// (ring_shift has no such branch: measured 2026-12-04, the O3-first order gives
/// the same counts for it, so this guards the count, not the order by itself.)
/// A change to ring-kernels, gpushmem-kernels' NVSHMEM engine or the NVSHMEM
/// version can change it: read the PTX diff before updating.
const RING_NVSHMEM_BARRIERS: (usize, usize) = (2, 2);

/// How many instructions of `ptx` start with `op` (`bar.sync` does not count `bar.warp.sync`).
fn count_instr(ptx: &str, op: &str) -> usize {
    ptx.lines()
        .filter(|l| {
            let l = l.split("//").next().unwrap_or("").trim_start();
            let l =
                if l.starts_with('@') { l.split_once(char::is_whitespace).map_or("", |x| x.1).trim_start() } else { l };
            l.strip_prefix(op).is_some_and(|r| r.starts_with([' ', '\t', ';', '.']))
        })
        .count()
}

/// What the NVSHMEM-engine test needs that is not there, if anything.
fn nvshmem_test_missing() -> Option<String> {
    if !std::path::Path::new(RING_KERNELS_DIR).join("Cargo.toml").is_file() {
        return Some(format!("the kernel crate {RING_KERNELS_DIR} is not here (a staged test binary)"));
    }
    if let Err(e) = gpushmem_build::find_nvshmem_bitcode("sm_90") {
        return Some(format!("{e}"));
    }
    if gpushmem_build::find_ptxas().is_none() {
        return Some("ptxas not found (GPUSHMEM_PTXAS / PATH / scripts/setup.sh)".into());
    }
    None
}

fn nvshmem_engine_ring_kernels() -> Result<(), Failed> {
    if let Some(why) = nvshmem_test_missing() {
        return Err(why.into());
    }
    let t = std::time::Instant::now();
    let built = gpushmem_build::Builder::new(RING_KERNELS_DIR)
        .engine(gpushmem_build::Engine::Nvshmem)
        .arch("sm_90")
        .target_dir(concat!(env!("CARGO_TARGET_TMPDIR"), "/gpushmem-nvshmem-ptx"))
        .build()
        .map_err(|e| format!("building {RING_KERNELS_DIR} for the NVSHMEM engine: {e}"))?;
    let ptx_path = built.ptx.display();
    let ptx = std::fs::read_to_string(&built.ptx).map_err(|e| format!("reading {ptx_path}: {e}"))?;
    if built.cubin.is_none() {
        return Err(format!("{ptx_path} was not assembled (ptxas not found)").into());
    }
    let declared = |symbol: &str, spaces: &[&str]| {
        ptx.lines().any(|l| {
            spaces.iter().any(|s| l.starts_with(&format!(".visible {s} "))) && l.contains(&format!(" {symbol}["))
        })
    };
    if !declared(gpushmem_build::STATE_SYMBOL, &[".global"]) {
        return Err(format!("no `.visible .global … {}[…]` in {ptx_path}", gpushmem_build::STATE_SYMBOL).into());
    }
    // NVSHMEM 3.4.5 keeps its device state in constant memory; cuModuleGetGlobal finds either.
    if !declared("nvshmemi_device_state_d", &[".global", ".const"]) {
        return Err(format!("no `.visible .global|.const … nvshmemi_device_state_d[…]` in {ptx_path}").into());
    }
    if !ptx.contains(".entry ring_shift(") {
        return Err(format!("no kernel ring_shift in {ptx_path}").into());
    }
    let got = (count_instr(&ptx, "bar.sync"), count_instr(&ptx, "barrier.sync"));
    println!(
        "nvshmem engine: {ptx_path}: {} bytes, bar.sync {}, barrier.sync {}, NVSHMEM {} ({:.1?})",
        ptx.len(),
        got.0,
        got.1,
        built.nvshmem.as_ref().and_then(|n| n.version.as_deref()).unwrap_or("version unknown"),
        t.elapsed()
    );
    if got != RING_NVSHMEM_BARRIERS {
        return Err(format!(
            "{ptx_path}: (bar.sync, barrier.sync) = {got:?}, golden {RING_NVSHMEM_BARRIERS:?} (see RING_NVSHMEM_BARRIERS)"
        )
        .into());
    }
    Ok(())
}

fn main() {
    let args = Arguments::from_args();
    let mut tests = vec![
        Trial::test("state_symbol_is_visible_global", || {
            let want = format!(
                ".visible .global .align 8 .b8 {}[{}]",
                gpushmem::abi::STATE_SYMBOL,
                std::mem::size_of::<gpushmem::abi::State>()
            );
            if PTX.contains(&want) {
                Ok(())
            } else {
                Err(format!("`{want}` not in {PTX_PATH}").into())
            }
        }),
        // compute-sanitizer's racecheck looks at shared memory only; scripts/sanitize.sh
        // says only the bulk-copy probes (issue 40) use it, which this checks.
        Trial::test("kernels_use_no_shared_memory", || {
            let mut rest = PTX.to_string();
            for probe in ["bulk_probe_copy", "bulk_probe_dynamic"] {
                if let Some(body) = function_text(PTX, &format!(".entry {probe}(")) {
                    rest = rest.replace(body, "");
                }
            }
            match rest.lines().filter(|l| !l.contains("gs_probe_dynamic")).find(|l| l.contains(".shared")) {
            None => Ok(()),
            Some(l) => Err(format!(
                "`{}` in {PTX_PATH}: a kernel uses shared memory; update scripts/sanitize.sh (racecheck now has something to check)",
                l.trim()
            )
            .into()),
        }
        }),
        Trial::test("targets_sm_90", || {
            if PTX.contains(".target sm_90") {
                Ok(())
            } else {
                Err("PTX does not target sm_90".into())
            }
        }),
        // Issue 40, step 3: the bulk-copy engine and shared memory from Rust
        // (tests/kernels/src/bulk.rs); ptxas assembles it with the rest for sm_90.
        golden(
            "bulk_probe_copy",
            &[
                ".shared .align 128 .b8 gs_bulk_stage[32768];",
                "mbarrier.init.shared::cta.b64",
                "fence.mbarrier_init.release.cluster;",
                "mbarrier.arrive.expect_tx.shared::cta.b64",
                "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes",
                "mbarrier.try_wait.parity.shared::cta.b64",
                "cp.async.bulk.global.shared::cta.bulk_group",
                "cp.async.bulk.commit_group;",
                "cp.async.bulk.wait_group.read 0;",
                "cp.async.bulk.wait_group 0;",
            ],
            &[],
        ),
        golden("bulk_probe_dynamic", &["cvta.shared.u64", "gs_probe_dynamic", "bar.sync"], &[]),
        golden("probe_fence", &["fence.acq_rel.sys;", "fence.acq_rel.gpu;"], &[]),
        golden("probe_quiet", &["fence.sc.sys;", "fence.sc.gpu;"], &[]),
        golden("probe_quiet_block", &["barrier.sync 0;", "fence.sc.sys;"], &["bar.sync"]),
        golden(
            "probe_barrier_all",
            &[
                "fence.sc.sys;",
                "fence.sc.gpu;",
                "st.relaxed.sys.global.u64",
                "ld.relaxed.sys.global.b64",
                "ld.acquire.sys.global.b64",
                "ld.acquire.gpu.global.b64",
                "%globaltimer",
            ],
            &[],
        ),
        golden(
            "probe_barrier_all_block",
            &["barrier.sync 0;", "fence.sc.sys;", "st.release.sys.global.u64", "ld.relaxed.sys.global.b64"],
            &[],
        ),
        golden(
            "probe_sync_all",
            &["fence.acq_rel.sys;", "st.release.sys.global.u64", "ld.relaxed.sys.global.b64"],
            &["fence.sc.sys"],
        ),
        golden("probe_put_nbi_block", &["ld.global.v4.u32", "st.global.v4.u32"], &["fence", "barrier.sync"]),
        golden("probe_get_warp", &["ld.global.v4.u32", "st.global.v4.u32", "bar.warp.sync"], &[]),
        golden(
            "probe_wait",
            &[
                "ld.volatile.global.b64",
                "ld.relaxed.sys.global.b64",
                "ld.acquire.sys.global.b64",
                "ld.acquire.gpu.global.b64",
                "%globaltimer",
                "trap;",
            ],
            &["fence"],
        ),
        golden("probe_ptr", &["GPUSHMEM_STATE"], &[]),
        golden("probe_atomic_fetch_add_u64", &["atom.relaxed.sys.global.add.u64"], &["fence"]),
        golden("probe_atomic_add_u32", &["red.relaxed.sys.global.add.u32"], &["atom.", "fence"]),
        golden("probe_atomic_fetch_add_i32", &["atom.relaxed.sys.global.add.s32"], &["fence"]),
        golden("probe_atomic_compare_swap_u64", &["atom.relaxed.sys.global.cas.b64"], &["fence"]),
        golden("probe_atomic_swap_i32", &["atom.relaxed.sys.global.exch.b32"], &["fence"]),
        golden("probe_atomic_fetch_and_u32", &["atom.relaxed.sys.global.and.b32"], &["fence"]),
        golden("probe_atomic_fetch_or_u64", &["atom.relaxed.sys.global.or.b64"], &["fence"]),
        golden("probe_atomic_fetch_xor_i64", &["atom.relaxed.sys.global.xor.b64"], &["fence"]),
        golden("probe_atomic_fetch_u64", &["ld.relaxed.sys.global.b64"], &["ld.acquire", "fence"]),
        golden("probe_atomic_set_u32", &["st.relaxed.sys.global.b32"], &["st.release", "fence"]),
        golden("probe_atomic_set_u64", &["st.relaxed.sys.global.b64"], &["st.release", "fence"]),
        golden("probe_atomic_fetch_add_f32", &["atom.relaxed.sys.global.add.f32"], &["fence"]),
        golden("probe_atomic_fetch_add_f64", &["atom.relaxed.sys.global.add.f64"], &["fence"]),
        golden("probe_signal_op_set", &["st.release.sys.global.u64", "st.release.gpu.global.u64"], &["red.", "fence"]),
        golden(
            "probe_signal_op_add",
            &["red.release.sys.global.add.u64", "red.release.gpu.global.add.u64"],
            &["st.release", "fence"],
        ),
        golden(
            "probe_putmem_signal_block",
            &["ld.global.v4.u32", "st.global.v4.u32", "barrier.sync 0;", "st.release.sys.global.u64"],
            &["bar.sync", "red.release"],
        ),
        golden("probe_put_signal_nbi_add", &["st.global.v4.u32", "red.release.sys.global.add.u64"], &["barrier.sync"]),
        golden(
            "probe_signal_wait_until",
            &[
                "ld.volatile.global.b64",
                "ld.relaxed.sys.global.b64",
                "ld.acquire.sys.global.b64",
                "ld.acquire.gpu.global.b64",
                "%globaltimer",
                "trap;",
            ],
            &["fence"],
        ),
        golden(
            "probe_signal_relaxed",
            &["st.volatile.global.b64", "ld.volatile.global.b64", "%globaltimer", "trap;"],
            &["fence", "ld.acquire", "st.release", "red."],
        ),
        golden("probe_signal_fetch", &["ld.acquire.sys.global.b64", "ld.acquire.gpu.global.b64"], &["%globaltimer"]),
        golden(
            "probe_wait_until_i32",
            &[
                "ld.volatile.global.b32",
                "ld.relaxed.sys.global.b32",
                "ld.acquire.sys.global.b32",
                "ld.acquire.gpu.global.b32",
                "%globaltimer",
                "trap;",
            ],
            &["fence"],
        ),
        golden(
            "probe_test_u64",
            &["ld.relaxed.sys.global.b64", "ld.acquire.sys.global.b64", "ld.acquire.gpu.global.b64"],
            &["fence", "%globaltimer", "trap;"],
        ),
        golden("probe_test_any_u32", &["ld.relaxed.sys.global.b32", "fence.acq_rel.sys;"], &["%globaltimer", "trap;"]),
        golden(
            "probe_wait_until_all_u64",
            &["ld.relaxed.sys.global.b64", "fence.acq_rel.sys;", "%globaltimer", "trap;"],
            &["ld.acquire"],
        ),
        golden("probe_iput_block", &["barrier.sync 0;"], &["fence"]),
        golden(
            "probe_team_barrier",
            &[
                "fence.sc.sys;",
                "fence.sc.gpu;",
                "st.relaxed.sys.global.u64",
                "ld.relaxed.sys.global.b64",
                "%globaltimer",
            ],
            &[],
        ),
        golden(
            "probe_team_sync_warp",
            &["bar.warp.sync", "fence.acq_rel.sys;", "st.release.sys.global.u64", "ld.relaxed.sys.global.b64"],
            &["fence.sc.sys", "barrier.sync"],
        ),
        golden(
            "probe_broadcast_block",
            &["ld.global.v4.u32", "st.global.v4.u32", "barrier.sync 0;", "st.release.sys.global.u64"],
            &["bar.sync"],
        ),
        golden("probe_alltoall_block", &["ld.global.v4.u32", "st.global.v4.u32", "barrier.sync 0;"], &["bar.sync"]),
        golden("probe_fcollect_warp", &["ld.global.v4.u32", "st.global.v4.u32", "bar.warp.sync"], &["barrier.sync"]),
        // Reductions: IEEE add/mul (no contraction into fma, no min/max
        // instructions: the host reference applies the same code, bit-exact).
        golden(
            "probe_reduce_block_f32",
            &["add.rn.f32", "mul.rn.f32", "setp.lt.f32", "setp.gt.f32", "barrier.sync 0;"],
            &["fma.", "min.f32", "max.f32"],
        ),
        golden("probe_reduce_f16", &["add.rn.f32", "mul.rn.f32"], &["fma.", "min.f32", "max.f32"]),
        // bf16: the vector path's sums are one packed `fma.rn.bf16x2` (× 1.0) per
        // pair, the same bits as the f32 add and rounding (kernels/src/reduce.rs);
        // no f32 contraction.
        golden(
            "probe_reduce_warp_bf16",
            &["add.rn.f32", "mul.rn.f32", "fma.rn.bf16x2", "bar.warp.sync"],
            &["fma.rn.f32", "fma.f32", "min.f32", "max.f32"],
        ),
        golden("probe_reducescatter_block_i32", &["mul.lo.s32", "xor.b32", "barrier.sync 0;"], &[]),
    ];
    let ptxas = gpushmem_build::find_ptxas();
    let in_ci = std::env::var_os("CI").is_some();
    // Every PTX the workspace builds: the test kernels, the examples', the
    // benchmarks', the host's built-in kernels; with the cubin its build
    // script assembled for sm_90 (empty, or absent, when ptxas was not found then).
    let all: [(&str, &str, &str); 6] = [
        ("test-kernels", PTX, env!("GPUSHMEM_CUBIN_GPUSHMEM_TEST_KERNELS")),
        ("ring-kernels", include_str!(env!("GPUSHMEM_PTX_RING_KERNELS")), env!("GPUSHMEM_CUBIN_RING_KERNELS")),
        (
            "allreduce-kernels",
            include_str!(env!("GPUSHMEM_PTX_ALLREDUCE_KERNELS")),
            env!("GPUSHMEM_CUBIN_ALLREDUCE_KERNELS"),
        ),
        ("moe-kernels", include_str!(env!("GPUSHMEM_PTX_MOE_KERNELS")), env!("GPUSHMEM_CUBIN_MOE_KERNELS")),
        ("halo-kernels", include_str!(env!("GPUSHMEM_PTX_HALO_KERNELS")), env!("GPUSHMEM_CUBIN_HALO_KERNELS")),
        (
            "bench-kernels",
            include_str!(env!("GPUSHMEM_PTX_GPUSHMEM_BENCH_KERNELS")),
            env!("GPUSHMEM_CUBIN_GPUSHMEM_BENCH_KERNELS"),
        ),
    ];
    let assemble = Trial::test("ptxas_assembles_every_kernel_for_sm_90", move || {
        let Some(p) = &ptxas else {
            return Err("ptxas not found (set GPUSHMEM_PTXAS or put it on PATH; .ci/run installs it)".into());
        };
        let builtin = ("builtin-kernels", gpushmem::BUILTIN_PTX, !gpushmem::BUILTIN_CUBIN.is_empty());
        let built = all.map(|(name, text, cubin)| (name, text, std::fs::metadata(cubin).is_ok_and(|m| m.len() > 0)));
        for (name, text, assembled) in built.into_iter().chain([builtin]) {
            // The build script's ptxas run assembled this very text (it fails the
            // build when ptxas rejects it): not again, it takes minutes.
            if assembled {
                continue;
            }
            // The embedded text, so the test also runs where the build tree is not (a staged binary).
            let file = std::env::temp_dir().join(format!("gpushmem-{name}-{}.ptx", std::process::id()));
            std::fs::write(&file, text).map_err(|e| format!("writing {}: {e}", file.display()))?;
            let r = gpushmem_build::assemble(p, &file, "sm_90");
            let _ = std::fs::remove_file(file.with_extension("sm_90.cubin"));
            let _ = std::fs::remove_file(&file);
            r.map_err(|e| format!("{name}: {e}"))?;
        }
        Ok(())
    });
    if gpushmem_build::find_ptxas().is_none() && !in_ci {
        println!("note: ptxas not found (GPUSHMEM_PTXAS / PATH): the assemble test is ignored; under CI it fails");
        tests.push(assemble.with_kind("needs ptxas").with_ignored_flag(true));
    } else {
        tests.push(assemble);
    }
    let nvshmem = Trial::test("nvshmem_engine_ring_kernels", nvshmem_engine_ring_kernels);
    match nvshmem_test_missing() {
        Some(why) if !in_ci => {
            println!("note: nvshmem_engine_ring_kernels is ignored: {why}; under CI it fails");
            tests.push(nvshmem.with_kind("needs NVSHMEM bitcode").with_ignored_flag(true));
        }
        _ => tests.push(nvshmem),
    }
    libtest_mimic::run(&args, tests).exit();
}

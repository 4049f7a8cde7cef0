//! The build-and-load smoke test: a kernel from the test kernel crate,
//! compiled by gpushmem-build, loaded through the host crate, writes a
//! pattern the host reads back (poisoned output, random input).

use crate::common::*;
use gpushmem::LaunchConfig;

pub fn smoke_pattern() -> TestResult {
    let n = (1usize << 20) + 3;
    let out = threads(1, 16 << 20, |shmem| {
        let module = kernels(shmem)?;
        let k = module.kernel("smoke_pattern")?;
        let stream = shmem.stream();
        let input: Vec<u32> = random_bytes(seed(), 0, n * 4).chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
        let key = input[0] | 1;
        let inp = stream.clone_htod(&input).cu("htod")?;
        let poison = vec![0xDEAD_BEEFu32; n];
        let out = stream.clone_htod(&poison).cu("htod")?;
        let (pi, po) = (dptr(&inp, stream), dptr(&out, stream));
        unsafe { shmem.launch(&k, LaunchConfig::for_num_elems(n as u32), (po, pi, n as u64, key))? };
        shmem.synchronize()?;
        let got = stream.clone_dtoh(&out).cu("dtoh")?;
        let bad = (0..n).filter(|&i| got[i] != input[i] ^ key ^ (i as u32).wrapping_mul(2654435761)).count();
        Ok(bad)
    })?;
    if out[0] != 0 {
        return Err(format!("{} of {n} words wrong", out[0]).into());
    }
    Ok(())
}

/// The device sees the state the host installed: version, PE numbers, heap, peer table.
pub fn state_installed() -> TestResult {
    for n in [1usize, 2, 4] {
        let rows = threads(n, 8 << 20, |shmem| {
            let module = kernels(shmem)?;
            let k = module.kernel("state_probe")?;
            let stream = shmem.stream();
            let out = stream.alloc_zeros::<u64>(5 + n).cu("alloc")?;
            let p = dptr(&out, stream);
            unsafe { shmem.launch(&k, one_block(32), (p,))? };
            shmem.synchronize()?;
            let got = stream.clone_dtoh(&out).cu("dtoh")?;
            let s = shmem.device_state();
            let mut want = vec![s.version as u64, s.my_pe as u64, s.n_pes as u64, s.heap_base, s.heap_size];
            want.extend_from_slice(shmem.peer_heap_bases());
            Ok((got, want))
        })?;
        for (pe, (got, want)) in rows.iter().enumerate() {
            if got != want {
                return Err(format!("{n} PEs, PE {pe}: device saw {got:?}, host installed {want:?}").into());
            }
        }
    }
    Ok(())
}

//! gpushmem-info runs anywhere: without a GPU it says so; a bad setting is an error naming it.

use std::process::Command;

fn info(env: &[(&str, &str)]) -> (bool, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gpushmem-info"));
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().expect("running gpushmem-info");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn reports_toolchain_gpus_and_settings() {
    let (ok, text) = info(&[("GPUSHMEM_SYMMETRIC_SIZE", "2g")]);
    assert!(ok, "{text}");
    assert!(text.contains("kernel toolchain:"), "{text}");
    assert!(text.contains("ptxas:"), "{text}");
    assert!(text.contains("GPUs:"), "{text}");
    // Either a device list or the reason there is none.
    assert!(text.contains("device(s)") || text.contains("no CUDA driver/GPU found"), "{text}");
    assert!(text.contains("GPUSHMEM_SYMMETRIC_SIZE=\"2g\": 2147483648 bytes"), "{text}");
    // Every setting is shown, set or not.
    for name in
        ["GPUSHMEM_ENGINE", "GPUSHMEM_TIMEOUT", "GPUSHMEM_DEBUG", "GPUSHMEM_EXIT_TIMEOUT", "target architecture"]
    {
        assert!(text.contains(name), "{name} missing:\n{text}");
    }
}

#[test]
fn a_bad_setting_is_named() {
    let (ok, text) = info(&[("GPUSHMEM_TIMEOUT", "soon")]);
    assert!(!ok);
    assert!(text.contains("GPUSHMEM_TIMEOUT"), "{text}");
}

#[test]
fn every_bad_setting_is_named_with_the_verdict_init_gives() {
    let (ok, text) = info(&[
        ("GPUSHMEM_SYMMETRIC_SIZE", "1"),
        ("GPUSHMEM_DEBUG", "loud"),
        ("GPUSHMEM_ENGINE", "fast"),
        ("GPUSHMEM_ARCH", "banana"),
    ]);
    assert!(!ok, "{text}");
    for bad in ["GPUSHMEM_SYMMETRIC_SIZE=\"1\": BAD", "GPUSHMEM_DEBUG=\"loud\": BAD", "GPUSHMEM_ENGINE=\"fast\": BAD"] {
        assert!(text.contains(bad), "{bad} missing:\n{text}");
    }
    assert!(text.contains("target architecture: BAD") && text.contains("\"banana\""), "{text}");
}

#[test]
fn says_which_rendezvous_a_launch_would_use() {
    // srun -N2 --ntasks-per-node=2: TCP at the step's first node, on the port from the job.
    let slurm = [
        ("SLURM_PROCID", "1"),
        ("SLURM_NTASKS", "4"),
        ("SLURM_LOCALID", "1"),
        ("SLURM_STEP_NUM_NODES", "2"),
        ("SLURM_STEP_TASKS_PER_NODE", "2"),
        ("SLURM_STEP_NODELIST", "gpu[11-12]"),
        ("SLURM_JOB_ID", "77"),
        ("SLURM_STEP_ID", "0"),
        ("GPUSHMEM_BOOTSTRAP_PORT", "29500"),
    ];
    let (ok, text) = info(&slurm);
    assert!(ok, "{text}");
    assert!(text.contains("rendezvous tcp://gpu11:29500 (TCP: PEs on any node meet there)"), "{text}");
    assert!(text.contains("NOT SET: a TCP rendezvous refuses to start without one"), "{text}");
    // Open MPI across nodes without GPUSHMEM_BOOTSTRAP: the error saying what to set.
    let ompi = [
        ("OMPI_COMM_WORLD_RANK", "0"),
        ("OMPI_COMM_WORLD_SIZE", "8"),
        ("OMPI_COMM_WORLD_LOCAL_RANK", "0"),
        ("OMPI_COMM_WORLD_LOCAL_SIZE", "4"),
    ];
    let (ok, text) = info(&ompi);
    assert!(!ok);
    assert!(text.contains("this job spans nodes") && text.contains("GPUSHMEM_BOOTSTRAP=tcp://"), "{text}");
    // One node: the Unix socket.
    let (ok, text) = info(&[("GPUSHMEM_RANK", "0"), ("GPUSHMEM_SIZE", "2")]);
    assert!(ok && text.contains("(Unix socket in a private directory: PEs of this node only)"), "{text}");
}

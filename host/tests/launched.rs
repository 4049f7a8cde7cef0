//! `gpushmem::launched` and `Threads::run` under a launcher's variables (this
//! binary's only test, since it sets the process environment).

#[test]
fn threads_refuse_to_start_in_a_rank_of_a_launch() {
    assert!(!gpushmem::launched() || std::env::var_os("GPUSHMEM_RANK").is_some());
    // What `srun -n 2` gives rank 1 (one node).
    for (k, v) in [("SLURM_PROCID", "1"), ("SLURM_NTASKS", "2"), ("SLURM_LOCALID", "1"), ("SLURM_NTASKS_PER_NODE", "2")]
    {
        std::env::set_var(k, v);
    }
    assert!(gpushmem::launched());
    let e = gpushmem::Threads::new(2).run(|s| Ok(s.my_pe())).unwrap_err();
    let text = e.to_string();
    assert!(
        matches!(e, gpushmem::Error::Config { .. }) && text.contains("rank 1 of 2") && text.contains("Slurm"),
        "{text}"
    );
    assert!(text.contains("Shmem::init") && text.contains("allow_under_launcher"), "{text}");
    // Asked for: it goes on (to the GPU, or to the error that there is none).
    match gpushmem::Threads::new(2).allow_under_launcher(true).run(|s| Ok(s.my_pe())) {
        Ok(pes) => assert_eq!(pes, [0, 1]),
        Err(e) => assert!(matches!(e, gpushmem::Error::NoGpu(_)), "{e}"),
    }
    // Variables that are set but wrong count as launched (Shmem::init says what is wrong).
    std::env::set_var("SLURM_PROCID", "7");
    assert!(gpushmem::launched());
}

//! Teams: layout and translation on the host and the device for strided,
//! skipping, nested and 2D teams; slot reuse and exhaustion; bad and
//! mismatched arguments; per-team barriers in every form; back-to-back
//! collectives alternating between two overlapping teams.

use crate::common::*;
use gpushmem::abi::MAX_TEAMS;
use gpushmem::{Error, Shmem, Team};
use std::time::Instant;

/// World PEs `parent[start]`, `parent[start + stride]`, … (`size` of them).
fn strided(parent: &[usize], start: usize, stride: usize, size: usize) -> Vec<usize> {
    (0..size).map(|k| parent[start + k * stride]).collect()
}

/// `team_split_2d` of the team `parent` (world PEs, in member order) as PE
/// `me` sees it: its row (`xrange` consecutive members) and its column; `None`
/// when `me` is not in `parent`.
fn split_2d(parent: &[usize], xrange: usize, me: usize) -> Option<(Vec<usize>, Vec<usize>)> {
    let i = parent.iter().position(|&p| p == me)?;
    let x = xrange.min(parent.len());
    let row0 = i / x * x;
    let row = parent[row0..(row0 + x).min(parent.len())].to_vec();
    let col = parent.iter().copied().skip(i % x).step_by(x).collect();
    Some((row, col))
}

/// One team of the layout test, as this PE holds it, and what the test expects:
/// its world members in order (`None`: a `team_split_2d` handle of a PE outside
/// the parent, which only promises `my_pe() == None`).
struct Expected {
    name: String,
    team: Team,
    members: Option<Vec<usize>>,
}

fn opt_i32(v: Option<usize>) -> i32 {
    v.map_or(-1, |v| v as i32)
}

/// Host checks of one PE's view of `teams` against the member lists.
fn check_host_view(me: usize, teams: &[Expected]) -> Vec<String> {
    let mut bad = Vec::new();
    for e in teams {
        let t = &e.team;
        match &e.members {
            Some(m) => {
                let want_me = m.iter().position(|&p| p == me);
                if t.n_pes() != m.len() || t.my_pe() != want_me {
                    bad.push(format!(
                        "PE {me}: {}: n_pes {} my_pe {:?}, want {} {:?} (members {m:?})",
                        e.name,
                        t.n_pes(),
                        t.my_pe(),
                        m.len(),
                        want_me
                    ));
                }
                for i in 0..=m.len() {
                    if t.world_pe(i) != m.get(i).copied() {
                        bad.push(format!(
                            "PE {me}: {}: world_pe({i}) = {:?}, want {:?}",
                            e.name,
                            t.world_pe(i),
                            m.get(i)
                        ));
                    }
                }
            }
            None => {
                if t.my_pe().is_some() {
                    bad.push(format!("PE {me}: {}: my_pe {:?} on a PE outside the parent", e.name, t.my_pe()));
                }
            }
        }
    }
    for a in teams {
        for b in teams {
            let (Some(am), Some(bm)) = (&a.members, &b.members) else { continue };
            for i in 0..=am.len() {
                let want = am.get(i).and_then(|w| bm.iter().position(|p| p == w));
                let got = a.team.translate_pe(i, &b.team);
                if got != want {
                    bad.push(format!("PE {me}: translate_pe({}: {i} -> {}) = {got:?}, want {want:?}", a.name, b.name));
                }
            }
        }
    }
    bad
}

/// 8 PEs: the world, even, odd, skipping (1, 4), nested (members 1, 3 of the
/// odd team = 3, 7) and 2D teams (xrange 2; xrange 3 with an uneven last row;
/// xrange 2 of the even team) plus a destroyed slot. On the host: `n_pes`,
/// `my_pe`, `world_pe`, `translate_pe` against member lists; on the device:
/// `team_my_pe`, `team_n_pes` and `team_translate_pe` (every PE number -1..=n,
/// every pair of teams) equal to the host's answers; handles equal on every PE.
pub fn layout() -> TestResult {
    let n = 8;
    let rows = threads(n, 16 << 20, |shmem| {
        let me = shmem.my_pe();
        let all: Vec<usize> = (0..n).collect();
        let world = shmem.team_world();
        let mut teams = vec![Expected { name: "world".into(), team: world, members: Some(all.clone()) }];
        let mut add = |name: &str, team: Team, members: Option<Vec<usize>>| {
            teams.push(Expected { name: name.into(), team, members });
            team
        };
        let even_l = strided(&all, 0, 2, n / 2);
        let odd_l = strided(&all, 1, 2, n / 2);
        let even = add("even", shmem.team_split_strided(&world, 0, 2, n / 2)?, Some(even_l.clone()));
        let odd = add("odd", shmem.team_split_strided(&world, 1, 2, n / 2)?, Some(odd_l.clone()));
        add("skip(1,3,2)", shmem.team_split_strided(&world, 1, 3, 2)?, Some(strided(&all, 1, 3, 2)));
        add("odd(1,2,2)", shmem.team_split_strided(&odd, 1, 2, 2)?, Some(strided(&odd_l, 1, 2, 2)));
        for (pname, parent, plist, x) in
            [("world", world, &all, 2), ("world", world, &all, 3), ("even", even, &even_l, 2)]
        {
            let (tx, ty) = shmem.team_split_2d(&parent, x)?;
            let (mx, my) = split_2d(plist, x, me).unzip();
            add(&format!("2d({pname},{x}).x"), tx, mx);
            add(&format!("2d({pname},{x}).y"), ty, my);
        }
        // A slot that was used and freed: the device must see it as unused.
        let tmp = shmem.team_split_strided(&world, 0, 1, n)?;
        let destroyed = tmp.handle();
        shmem.team_destroy(tmp)?;

        let mut bad = check_host_view(me, &teams);
        let mut handles: Vec<u32> = teams.iter().map(|e| e.team.handle()).collect();
        handles.push(destroyed);
        let mut sorted = handles.clone();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != handles.len() || sorted.iter().any(|&h| h >= MAX_TEAMS) {
            bad.push(format!("PE {me}: handles not distinct slots below {MAX_TEAMS}: {handles:?}"));
        }

        // The device's view.
        let nt = handles.len();
        let row = n + 2;
        let per = 2 + nt * row;
        let hbuf = shmem.malloc::<u32>(nt)?;
        let out = shmem.malloc::<i32>(nt * per)?;
        shmem.write(&hbuf, &handles)?;
        shmem.write(&out, &vec![i32::MIN; nt * per])?;
        let module = kernels(shmem)?;
        let k = module.kernel("team_query")?;
        unsafe { shmem.launch(&k, one_block(32), (hbuf.as_kernel_ptr(), nt as u32, n as u32, out.as_kernel_ptr()))? };
        shmem.synchronize()?;
        let got = shmem.read(&out)?;
        // Host answers; index nt - 1 is the destroyed slot (queries say -1, as on NVSHMEM_TEAM_INVALID).
        let live = |a: usize| (a + 1 < nt).then(|| &teams[a].team);
        let name = |a: usize| if a + 1 < nt { teams[a].name.clone() } else { format!("destroyed slot {destroyed}") };
        for a in 0..nt {
            let o = &got[a * per..(a + 1) * per];
            let (want_me, want_n) = match live(a) {
                Some(t) => (opt_i32(t.my_pe()), t.n_pes() as i32),
                None => (-1, -1),
            };
            if o[0] != want_me || o[1] != want_n {
                bad.push(format!(
                    "PE {me}: device {}: team_my_pe {} team_n_pes {}, host says {want_me} {want_n}",
                    name(a),
                    o[0],
                    o[1]
                ));
            }
            for b in 0..nt {
                for kk in 0..row {
                    let pe = kk as i32 - 1;
                    let want = match (live(a), live(b)) {
                        (Some(ta), Some(tb)) if pe >= 0 => opt_i32(ta.translate_pe(pe as usize, tb)),
                        _ => -1,
                    };
                    let g = o[2 + b * row + kk];
                    if g != want {
                        bad.push(format!(
                            "PE {me}: device team_translate_pe({}, {pe}, {}) = {g}, host says {want}",
                            name(a),
                            name(b)
                        ));
                    }
                }
            }
        }
        shmem.free(out)?;
        shmem.free(hbuf)?;
        for e in teams.into_iter().skip(1) {
            shmem.team_destroy(e.team)?;
        }
        Ok((bad, handles))
    })?;
    let mut bad: Vec<String> = rows.iter().flat_map(|(b, _)| b.iter().cloned()).collect();
    if rows.iter().any(|(_, h)| h != &rows[0].1) {
        bad.push(format!(
            "team handles differ across PEs: {:?}",
            rows.iter().map(|(_, h)| h.clone()).collect::<Vec<_>>()
        ));
    }
    fail_if_any(&bad)?;
    println!(
        "  {n} PEs: {} teams (strided, skipping, nested, 2D incl. uneven rows, a destroyed slot): host and device \
         agree on my_pe, n_pes and every translation; handles {:?}",
        rows[0].1.len(),
        rows[0].1
    );
    Ok(())
}

/// `Err` whose error satisfies `ok`, as a failure message otherwise.
fn want_err<T: std::fmt::Debug>(
    me: usize,
    what: &str,
    r: gpushmem::Result<T>,
    ok: impl Fn(&Error) -> bool,
    bad: &mut Vec<String>,
) {
    match r {
        Err(e) if ok(&e) => {
            if me == 0 {
                println!("  PE 0: {what}: {e}");
            }
        }
        other => bad.push(format!("PE {me}: {what}: expected a specific error, got {other:?}")),
    }
}

fn is_config_with(e: &Error, needle: &str) -> bool {
    matches!(e, Error::Config { why, .. } if why.contains(needle))
}

/// Runs `rounds` team barrier rounds on `team` (every PE launches; non-members return at once).
#[allow(clippy::too_many_arguments)]
fn barrier_on(
    shmem: &Shmem,
    k: &gpushmem::Kernel,
    team: u32,
    buf: u64,
    base: u64,
    rounds: u32,
    errors: u64,
    form: u32,
) -> gpushmem::Result<()> {
    unsafe { shmem.launch_collective(k, one_block(64), (team, buf, base, rounds, errors, form)) }
}

/// 4 PEs: 100 (quick mode: 12, each shape twice) create/barrier/destroy
/// cycles of teams of changing shape reuse one slot (no exhaustion; the
/// slot's sync words are zeroed for each new team, or the barrier after an
/// even-team cycle would hang or pass early);
/// `MAX_TEAMS - 1` live teams fit and one more fails on every PE (also a 2D
/// split that needs two slots); destroying the world team, splits with bad
/// ranges, a destroyed parent, and arguments that differ across PEs fail on
/// every PE; afterwards teams still work and handles agree across PEs.
pub fn slots() -> TestResult {
    let n = 4;
    // Every one of the 6 shapes at least twice, each after a different shape.
    let cycles = scaled(100).max(12);
    let rows = threads(n, 16 << 20, |shmem| {
        let me = shmem.my_pe();
        let world = shmem.team_world();
        let mut bad = Vec::new();
        let mut handles = Vec::new();
        let module = kernels(shmem)?;
        let k = module.kernel("team_barrier_rounds")?;
        // Two halves of n slots per barrier run; three runs at once in part 4.
        let buf = shmem.calloc::<u64>(3 * 2 * n)?;
        let stream = shmem.stream();
        let errors = stream.alloc_zeros::<u32>(1).cu("alloc")?;
        let eptr = dptr(&errors, stream);

        // 1. Create, use, destroy: 100 cycles, shapes changing so that the
        // members' barrier counters differ between consecutive teams.
        let shapes = [(0, 2, n / 2), (0, 1, n), (1, 2, n / 2), (1, 1, n - 1), (n - 1, 1, 1), (0, 3, 2)];
        let mut first = None;
        for i in 0..cycles as u64 {
            let (s, st, sz) = shapes[i as usize % shapes.len()];
            let t = shmem.team_split_strided(&world, s, st, sz)?;
            handles.push(t.handle());
            if *first.get_or_insert(t.handle()) != t.handle() {
                bad.push(format!(
                    "PE {me}: cycle {i}: handle {} (first cycle's was {first:?}): slot not reused",
                    t.handle()
                ));
            }
            barrier_on(shmem, &k, t.handle(), buf.as_kernel_ptr(), i * 1000, 20, eptr, (i % 6) as u32)?;
            shmem.synchronize()?;
            shmem.team_destroy(t)?;
        }
        let e = stream.clone_dtoh(&errors).cu("dtoh")?[0];
        if e != 0 {
            bad.push(format!("PE {me}: {e} stale slots seen in the barriers of the {cycles} create/destroy cycles"));
        }

        // 2. Exhaustion: MAX_TEAMS - 1 live teams fit, one more does not.
        let mut live = Vec::new();
        for i in 0..(MAX_TEAMS - 1) as usize {
            live.push(shmem.team_split_strided(&world, i % n, 1, 1)?);
        }
        handles.extend(live.iter().map(|t| t.handle()));
        want_err(
            me,
            "split with every slot in use",
            shmem.team_split_strided(&world, 0, 1, n),
            |e| is_config_with(e, "in use"),
            &mut bad,
        );
        want_err(
            me,
            "2D split with every slot in use",
            shmem.team_split_2d(&world, 2),
            |e| is_config_with(e, "in use"),
            &mut bad,
        );
        let mut freed = None;
        if let Some(t) = live.pop() {
            freed = Some(t.handle());
            shmem.team_destroy(t)?;
        }
        want_err(
            me,
            "2D split with one slot free",
            shmem.team_split_2d(&world, 2),
            |e| is_config_with(e, "in use"),
            &mut bad,
        );
        let again = shmem.team_split_strided(&world, 0, 1, n)?;
        if Some(again.handle()) != freed {
            bad.push(format!("PE {me}: the one free slot {freed:?} was not reused (got {})", again.handle()));
        }
        // The last slot's team works (its sync words were zeroed).
        barrier_on(shmem, &k, again.handle(), buf.as_kernel_ptr(), 1 << 40, 100, eptr, 1)?;
        shmem.synchronize()?;
        live.push(again);
        for t in live.drain(..) {
            shmem.team_destroy(t)?;
        }
        let (x, y) = shmem.team_split_2d(&world, 2)?;
        handles.extend([x.handle(), y.handle()]);
        shmem.team_destroy(x)?;
        shmem.team_destroy(y)?;

        // 3. Bad arguments, the same on every PE.
        want_err(
            me,
            "destroy the world team",
            shmem.team_destroy(world),
            |e| is_config_with(e, "world team"),
            &mut bad,
        );
        want_err(
            me,
            "stride 0",
            shmem.team_split_strided(&world, 0, 0, 2),
            |e| matches!(e, Error::Config { .. }),
            &mut bad,
        );
        want_err(
            me,
            "size 0",
            shmem.team_split_strided(&world, 0, 1, 0),
            |e| matches!(e, Error::Config { .. }),
            &mut bad,
        );
        want_err(
            me,
            "last member outside the parent",
            shmem.team_split_strided(&world, 1, 1, n),
            |e| is_config_with(e, "outside"),
            &mut bad,
        );
        want_err(me, "xrange 0", shmem.team_split_2d(&world, 0), |e| matches!(e, Error::Config { .. }), &mut bad);
        let gone = shmem.team_split_strided(&world, 0, 2, n / 2)?;
        shmem.team_destroy(gone)?;
        want_err(
            me,
            "split of a destroyed team",
            shmem.team_split_strided(&gone, 0, 1, 1),
            |e| is_config_with(e, "not a live team"),
            &mut bad,
        );
        want_err(me, "destroy twice", shmem.team_destroy(gone), |e| is_config_with(e, "not a live team"), &mut bad);

        // 4. Arguments that differ across PEs (each valid on its PE): a mismatch on every PE, nothing created.
        let size = if me == 0 { 1 } else { 2 };
        want_err(
            me,
            "split_strided, sizes differ",
            shmem.team_split_strided(&world, 0, 1, size),
            |e| matches!(e, Error::Mismatch { .. }),
            &mut bad,
        );
        want_err(
            me,
            "split_2d, xranges differ",
            shmem.team_split_2d(&world, size),
            |e| matches!(e, Error::Mismatch { .. }),
            &mut bad,
        );
        let a = shmem.team_split_strided(&world, 0, 1, n)?;
        let b = shmem.team_split_strided(&world, 0, 2, n / 2)?;
        want_err(
            me,
            "destroy, teams differ",
            shmem.team_destroy(if me == 0 { a } else { b }),
            |e| matches!(e, Error::Mismatch { .. }),
            &mut bad,
        );
        // Both still live, and the table still the same everywhere. Each run has its
        // own 2n slots: the three launch back to back, so a PE outside `b` may
        // already be writing the world run's round into PE 0's slots while PE 0
        // still checks `b`'s (seen under racecheck, which delays some PEs).
        let run_buf = |r: u64| buf.as_kernel_ptr() + r * (2 * n * 8) as u64;
        barrier_on(shmem, &k, a.handle(), run_buf(0), 2 << 40, 100, eptr, 0)?;
        barrier_on(shmem, &k, b.handle(), run_buf(1), 3 << 40, 100, eptr, 2)?;
        barrier_on(shmem, &k, 0, run_buf(2), 4 << 40, 100, eptr, 1)?;
        shmem.synchronize()?;
        handles.extend([a.handle(), b.handle()]);
        shmem.team_destroy(a)?;
        shmem.team_destroy(b)?;
        let c = shmem.team_split_strided(&world, 1, 1, n - 1)?;
        handles.push(c.handle());
        shmem.team_destroy(c)?;
        let e = stream.clone_dtoh(&errors).cu("dtoh")?[0];
        if e != 0 {
            bad.push(format!("PE {me}: {e} stale slots seen in the barriers after the error cases"));
        }
        shmem.free(buf)?;
        Ok((bad, handles))
    })?;
    let mut bad: Vec<String> = rows.iter().flat_map(|(b, _)| b.iter().cloned()).collect();
    if rows.iter().any(|(_, h)| h != &rows[0].1) {
        bad.push("team handles differ across PEs".into());
    }
    fail_if_any(&bad)?;
    println!(
        "  {n} PEs: {cycles} create/barrier/destroy cycles in one slot; {} live teams max; every error on every PE",
        MAX_TEAMS - 1
    );
    Ok(())
}

/// Names of the forms of the kernel `team_barrier_rounds`.
const BARRIER_FORMS: [&str; 6] = [
    "barrier",
    "barrier_block",
    "barrier_warp",
    "quiet_block+team_sync_block",
    "quiet_block+team_sync",
    "quiet_block+team_sync_warp",
];

/// 8 PEs, 1000 rounds (quick mode: 10) per (team, form): members write the round into every
/// member's slot, synchronize on the team, check every slot. Teams: world;
/// even and odd at once (disjoint, each PE passes its own); skipping (1, 4);
/// nested (3, 7); the rows and the columns of a 2D split with an uneven row
/// (three rows share one handle and run at once). Non-members launch and return.
pub fn barrier_rounds() -> TestResult {
    let n = 8;
    let rounds = scaled(1000) as u32;
    let start = Instant::now();
    let rows = threads(n, 16 << 20, |shmem| {
        let me = shmem.my_pe();
        let world = shmem.team_world();
        let even = shmem.team_split_strided(&world, 0, 2, n / 2)?;
        let odd = shmem.team_split_strided(&world, 1, 2, n / 2)?;
        let skip = shmem.team_split_strided(&world, 1, 3, 2)?;
        let nested = shmem.team_split_strided(&odd, 1, 2, 2)?;
        let (x, y) = shmem.team_split_2d(&world, 3)?;
        let configs = [
            ("world", world.handle()),
            ("even|odd", if me % 2 == 0 { even.handle() } else { odd.handle() }),
            ("skip(1,4)", skip.handle()),
            ("nested(3,7)", nested.handle()),
            ("2d rows", x.handle()),
            ("2d columns", y.handle()),
        ];
        let module = kernels(shmem)?;
        let k = module.kernel("team_barrier_rounds")?;
        let runs = configs.len() * BARRIER_FORMS.len();
        // Each run has its own slots: a PE that has finished one run may write
        // the next run's slots of a peer that is still checking its last round
        // in another team of the same shape.
        let buf = shmem.calloc::<u64>(2 * n * runs)?;
        let stream = shmem.stream();
        let errors = stream.alloc_zeros::<u32>(runs).cu("alloc")?;
        let e0 = dptr(&errors, stream);
        for (ci, &(_, h)) in configs.iter().enumerate() {
            for f in 0..BARRIER_FORMS.len() {
                let run = ci * BARRIER_FORMS.len() + f;
                // A distinct round range per run: no value of an earlier run can pass a check.
                barrier_on(
                    shmem,
                    &k,
                    h,
                    buf.as_kernel_ptr() + (2 * n * run * 8) as u64,
                    run as u64 * 1_000_000,
                    rounds,
                    e0 + 4 * run as u64,
                    f as u32,
                )?;
            }
        }
        shmem.synchronize()?;
        let errs = stream.clone_dtoh(&errors).cu("dtoh")?;
        let mut bad = Vec::new();
        for (run, &e) in errs.iter().enumerate() {
            if e != 0 {
                let (c, f) = (run / BARRIER_FORMS.len(), run % BARRIER_FORMS.len());
                bad.push(format!(
                    "PE {me}: team {} with {}: {e} stale slots in {rounds} rounds",
                    configs[c].0, BARRIER_FORMS[f]
                ));
            }
        }
        shmem.free(buf)?;
        for t in [even, odd, skip, nested, x, y] {
            shmem.team_destroy(t)?;
        }
        Ok(bad)
    })?;
    let bad: Vec<String> = rows.into_iter().flatten().collect();
    fail_if_any(&bad)?;
    println!(
        "  {n} PEs: 6 team shapes × {} forms × {rounds} rounds, every slot checked, in {:.1?}",
        BARRIER_FORMS.len(),
        start.elapsed()
    );
    Ok(())
}

/// 8 PEs: one kernel per (pair, form) doing 10^4 (quick mode: 100) collectives back to back,
/// alternating between two overlapping teams (world/even; 2D rows/columns;
/// odd/nested), each a barrier, fcollect, sum reduce or broadcast (by form,
/// see the kernel `team_alternate`) whose result every member checks. A mixed
/// round or a deadlock shows as wrong values or a device timeout.
pub fn alternating() -> TestResult {
    let n = 8;
    let iters = scaled(10_000) as u32;
    let elems = 40u32;
    let start = Instant::now();
    let rows = threads(n, 16 << 20, |shmem| {
        let me = shmem.my_pe();
        let world = shmem.team_world();
        let even = shmem.team_split_strided(&world, 0, 2, n / 2)?;
        let odd = shmem.team_split_strided(&world, 1, 2, n / 2)?;
        let nested = shmem.team_split_strided(&odd, 1, 2, 2)?;
        let (x, y) = shmem.team_split_2d(&world, 3)?;
        let pairs = [("world/even", world, even), ("2d rows/columns", x, y), ("odd/nested", odd, nested)];
        let module = kernels(shmem)?;
        let k = module.kernel("team_alternate")?;
        let src = shmem.malloc::<u64>(elems as usize)?;
        let dst = shmem.malloc::<u64>(n * elems as usize)?;
        let stream = shmem.stream();
        let runs = pairs.len() * 3;
        let errors = stream.alloc_zeros::<u32>(2 * runs).cu("alloc")?;
        let e0 = dptr(&errors, stream);
        let mut times = Vec::new();
        for (pi, (_, a, b)) in pairs.iter().enumerate() {
            for form in 0..3u32 {
                let run = pi * 3 + form as usize;
                let t0 = Instant::now();
                let args = (
                    a.handle(),
                    b.handle(),
                    iters,
                    src.as_kernel_ptr(),
                    dst.as_kernel_ptr(),
                    elems,
                    form,
                    e0 + 8 * run as u64,
                );
                unsafe { shmem.launch_collective(&k, one_block(128), args)? };
                shmem.synchronize()?;
                times.push(t0.elapsed().as_secs_f64());
            }
        }
        let errs = stream.clone_dtoh(&errors).cu("dtoh")?;
        let mut bad = Vec::new();
        for run in 0..runs {
            if errs[2 * run] != 0 {
                bad.push(format!(
                    "PE {me}: {} form {}: {} wrong elements (last failing iteration {})",
                    pairs[run / 3].0,
                    ["thread", "warp", "block"][run % 3],
                    errs[2 * run],
                    errs[2 * run + 1] as i64 - 1
                ));
            }
        }
        shmem.free(dst)?;
        shmem.free(src)?;
        for t in [even, odd, nested, x, y] {
            shmem.team_destroy(t)?;
        }
        Ok((bad, times))
    })?;
    let bad: Vec<String> = rows.iter().flat_map(|(b, _)| b.iter().cloned()).collect();
    fail_if_any(&bad)?;
    let slowest: f64 = (0..rows[0].1.len()).map(|i| rows.iter().map(|(_, t)| t[i]).fold(0.0, f64::max)).sum();
    println!(
        "  {n} PEs: 3 team pairs × 3 forms × {iters} alternating collectives, every result checked, kernels {slowest:.2} s, \
         all in {:.1?}",
        start.elapsed()
    );
    Ok(())
}

/// `team_split_strided` on 2 PEs that may share a GPU, then a barrier: on the
/// native engine (or NVSHMEM with a GPU per PE) the team `{PE 0}` is made and
/// destroyed; on the NVSHMEM engine with both PEs on one GPU (NVSHMEM 3.4.5
/// ends the process if asked to split there) every PE gets `Error::Engine`
/// saying why, and the job goes on: the barrier after it completes.
pub fn split_sharing_gpu() -> TestResult {
    let n = 2;
    let refuse = nvshmem_shares_gpu(n);
    let rows = threads(n, 16 << 20, |shmem| {
        let world = shmem.team_world();
        let got = match shmem.team_split_strided(&world, 0, 1, 1) {
            Ok(t) => {
                let me = t.my_pe();
                shmem.team_destroy(t)?;
                format!("made (my_pe {me:?})")
            }
            Err(Error::Engine { why }) => format!("refused: {why}"),
            Err(e) => return Err(e),
        };
        shmem.barrier_all()?;
        Ok(got)
    })?;
    let bad: Vec<String> = rows
        .iter()
        .enumerate()
        .filter(|(pe, r)| {
            if refuse {
                !(r.starts_with("refused: ") && r.contains("share a GPU"))
            } else {
                **r != format!("made (my_pe {:?})", (*pe == 0).then_some(0usize))
            }
        })
        .map(|(pe, r)| format!("PE {pe}: {r} (want {})", if refuse { "Error::Engine" } else { "the team" }))
        .collect();
    fail_if_any(&bad)?;
    println!("  2 PEs: {}", rows[0]);
    Ok(())
}
